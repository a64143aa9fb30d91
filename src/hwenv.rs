//! hwloc's process-wide switches, set through the environment before the first topology
//! of the process is loaded: the CLI's alone (single-threaded, about to load), never the
//! planning library's, which reads no environment.

/// The variables this process set in its own environment for hwloc (a user's own
/// setting is never among them). They are binder's, not the task's: every exec scrubs
/// them ([`set_here`]), whichever path set them and however often it was asked to (the
/// second ask finds them set and sets nothing, so a list kept by each caller lost them:
/// a cold launch's task inherited the plugin blocklist, and its own hwloc then found no
/// PCI device).
static SET_HERE: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// Sets `var` in this process's environment and records it in [`SET_HERE`].
fn set(var: &'static str, value: &str) {
    std::env::set_var(var, value);
    let mut set = SET_HERE.lock().unwrap_or_else(|e| e.into_inner());
    if !set.contains(&var) {
        set.push(var);
    }
}

/// Every variable binder set in its own environment for hwloc so far: what an exec
/// removes from the task's environment.
pub fn set_here() -> Vec<&'static str> {
    SET_HERE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// hwloc plugins binder never uses on a host: GPU runtimes (binder finds GPUs as PCI
/// devices), OpenGL, and libxml (no XML is parsed when discovering the host).
const UNUSED_PLUGINS: &str =
    "hwloc_gl,hwloc_opencl,hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero,hwloc_xml_libxml";

/// The environment variables through which hwloc reads its plugin blocklist (2.9 reads
/// the old name; newer releases also the new one).
pub const PLUGIN_BLOCKLIST_VARS: [&str; 2] = ["HWLOC_PLUGINS_BLACKLIST", "HWLOC_PLUGINS_BLOCKLIST"];

/// Keeps hwloc from `dlopen`ing plugins binder never uses (OpenGL, OpenCL, libxml; PCI too
/// when `io` is false), which costs milliseconds on every task of every job.
///
/// **Process-wide:** hwloc reads this list from the environment once, at the first
/// topology of the process, so this sets environment variables. Only a single-threaded
/// program about to load its first topology may call it: binder's CLI does
/// (`run`); a plugin or binding that embeds the library should not (loading
/// works the same without it, only slower). A user's own setting is left alone; what it
/// sets is recorded for [`set_here`].
pub fn block_unused_plugins(io: bool) {
    let list = if io {
        UNUSED_PLUGINS.to_owned()
    } else {
        format!("{UNUSED_PLUGINS},hwloc_pci")
    };
    for var in PLUGIN_BLOCKLIST_VARS {
        if std::env::var_os(var).is_none() {
            set(var, &list);
        }
    }
}

/// Keeps hwloc from reading the XML binder builds from a Grid Engine string with libxml2,
/// whose in-memory parser refuses documents of more than about 10 MB (a 12,256-PU string
/// makes one); hwloc's own parser has no such limit. Process-wide, like
/// [`block_unused_plugins`], and for the CLI alone; recorded for [`set_here`].
pub fn block_libxml() {
    if std::env::var_os("HWLOC_LIBXML_IMPORT").is_none() {
        set("HWLOC_LIBXML_IMPORT", "0");
    }
}

/// Whether `t`, loaded on the host, is an XML of this very host that hwloc does not take
/// for it: Flux's job shell with `-o hwloc.xmlfile` hands every task `HWLOC_XMLFILE`,
/// its own export of this node, and hwloc treats any XML as another machine (binding to
/// it would be refused). When the XML names this host (`HostName`) and holds its online
/// CPUs, all of them or some (an export restricted to the job's cores), this sets `HWLOC_THISSYSTEM=1` (hwloc's own switch for that) so the next
/// load is this system; process-wide, like [`block_unused_plugins`], for the CLI alone.
/// An XML of another machine stays refused.
pub fn trust_own_xml(t: &binder_plan::topology::Topology) -> bool {
    use binder_core::procfs::Procs;
    if t.is_this_system()
        || std::env::var_os("HWLOC_XMLFILE").is_none()
        || std::env::var_os("HWLOC_THISSYSTEM").is_some()
        || std::env::var_os("HWLOC_SYNTHETIC").is_some()
    {
        return false;
    }
    let named = t
        .host_name()
        .is_some_and(|h| h == binder_core::identity::hostname());
    let pus = t.complete().to_vec();
    let online = binder_core::procfs::Real.online();
    // All of this host's online CPUs, or some of them: `-o hwloc.restrict=1` hands the
    // task its export restricted to the job's cores (#44).
    let inside = online
        .as_deref()
        .is_some_and(|on| !pus.is_empty() && pus.iter().all(|p| on.binary_search(p).is_ok()));
    if !named || !inside {
        return false;
    }
    set("HWLOC_THISSYSTEM", "1");
    true
}

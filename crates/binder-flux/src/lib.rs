//! binder as a Flux job shell plugin: `flux run -o binder=SHAPE ./app` binds each task
//! with the same planner, node ledger and task environment as `flux run binder SHAPE --
//! ./app`, without the wrapper's two execs and `flux job taskmap` per task: the shell
//! already knows the node's task count, the job's cores and GPUs here (R) and each task's
//! rank.
//!
//! ```lua
//! -- a site: /etc/flux/shell/lua.d/binder.lua (or a user's -o userrc=FILE)
//! plugin.load { file = "/usr/lib/x86_64-linux-gnu/binder/libbinder_flux.so",
//!               conf = { catalog = "/usr/share/binder/shapes" } }
//! ```
//!
//! * **Inert unless asked:** without `-o binder=SHAPE` (a path, relative to the job's
//!   working directory, or a catalog name) or a site `default` in the plugin's `conf`, it
//!   binds nothing and only removes the `BINDER_*` variables an enclosing binder exported.
//!   `-o binder-report`, `-o binder-verbose` (or the object form `-o binder.shape=… -o
//!   binder.report -o binder.verbose`); an off word (`-o binder=off`) turns a site default
//!   off. What to do is the front module's decision (`binder_host::front::Ask`): a site
//!   default never binds a job that runs a Flux broker (`flux alloc`, `flux batch`), and
//!   leaves a job that runs the wrapper to it.
//! * **When active** it turns the shell's own `cpu-affinity` off in `flux_plugin_init`
//!   (its `shell.init` runs before a plugin's), and `gpu-affinity` only for a shape that
//!   asks for GPUs (binding CPUs never unbinds GPUs), takes the job's cores here from R as
//!   the envelope (SEMANTICS §4.1), plans the node in `shell.init`, sets each task's
//!   variables in `task.init` (a task's environment is fixed when it is forked) and binds
//!   in `task.exec`, in the task's process before exec, through the front module's one
//!   plugin launch (`binder_host::front::launch`: the node ledger claims the task's PID).
//! * **A refusal** (a bad shape, too few free units) writes binder's one `binder:` line
//!   to the task's stderr and `_exit(125)`s in the task's process: a `task.exec` callback
//!   that returns -1 does not stop the task (seen on 0.88), and nothing may run unbound. A
//!   site default that cannot be planned gives each task what Flux's affinity would have.
//!
//! The FFI is a small hand-kept module ([`ffi`]); `tests/header.rs` compiles it against
//! the installed headers.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

pub mod ffi;
pub mod shell;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Mutex, MutexGuard};

use binder_core::launch::env::refuse_task as refuse;
use binder_host::around::Refusal;
use binder_host::front::{JobShape, Kind};
use ffi::{Plugin, PluginArg, Shell as ShellPtr};
use shell::{Node, Request, Shell};

/// What the plugin knows of this job, from `flux_plugin_init` on.
enum State {
    /// binder leaves the job to Flux; `wrapper`: its command is binder's wrapper.
    Left { wrapper: bool },
    /// Asked, before `shell.init`: the request, its shape as read once in
    /// `flux_plugin_init` (or why it cannot be), and whether the plugin turned
    /// gpu-affinity off.
    Asked(Request, Result<Box<JobShape>, String>, bool),
    /// The node's plan, made in `shell.init` (boxed: the other states are small).
    Planned(Box<Shell>),
    /// The line every task reports; none runs.
    Refused(String),
    /// A declined site default: what Flux's affinity would have given each task (the
    /// job's CPUs here; `CUDA_VISIBLE_DEVICES` where the plugin turned gpu-affinity off).
    Fallback(Vec<usize>, Option<String>),
}

static STATE: Mutex<State> = Mutex::new(State::Left { wrapper: false });

/// The state, whatever a panicking holder left.
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A C string Flux returned that the caller frees, as a `String`.
///
/// # Safety
/// `ptr` is NULL or a malloc'd C string the caller owns.
unsafe fn take(ptr: *mut c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: a valid, owned C string.
    let s = unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: Flux allocated it with malloc and hands it over.
    unsafe { libc::free(ptr.cast()) };
    Some(s)
}

/// A JSON answer of the shell (`rc` 0 or `ok` its success), taken over.
///
/// # Safety
/// `json` is what the call that returned `rc` wrote: NULL or an owned C string.
unsafe fn answer(ok: bool, json: *mut c_char) -> Option<String> {
    // SAFETY: the caller's contract.
    unsafe { take(json) }.filter(|_| ok)
}

/// A shell option's JSON, when set.
fn getopt(shell: ShellPtr, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: `shell` is the shell's handle; `json` receives an owned string or NULL.
    let rc = unsafe { ffi::flux_shell_getopt(shell, name.as_ptr(), &mut json) };
    // SAFETY: what the call wrote.
    unsafe { answer(rc == 1, json) }
}

/// A variable of the job's environment.
fn getenv(shell: ShellPtr, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    // SAFETY: `shell` is the shell's handle; the result is NULL or a string it owns.
    let value = unsafe { ffi::flux_shell_getenv(shell, name.as_ptr()) };
    (!value.is_null()).then(|| {
        // SAFETY: not NULL, so a valid C string owned by the shell, copied at once.
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned()
    })
}

/// The shell's handle of plugin `p`.
fn shell_of(p: Plugin) -> ShellPtr {
    // SAFETY: `p` is the plugin handle Flux passed in.
    unsafe { ffi::flux_plugin_get_shell(p) }
}

/// `flux_plugin_init`: reads the request; binds nothing without one.
///
/// # Safety
/// Called by flux-shell with a valid plugin handle.
#[no_mangle]
pub unsafe extern "C" fn flux_plugin_init(p: Plugin) -> c_int {
    // SAFETY: a valid handle and a static C string.
    unsafe { ffi::flux_plugin_set_name(p, c"binder".as_ptr()) };
    let shell = shell_of(p);
    if shell.is_null() {
        return 0;
    }
    // SAFETY: `p` is valid; the conf string (or NULL) is the plugin's, copied at once.
    let conf = unsafe { ffi::flux_plugin_get_conf(p) };
    let conf = (!conf.is_null()).then(|| {
        // SAFETY: not NULL, so a valid C string owned by the plugin.
        unsafe { CStr::from_ptr(conf) }
            .to_string_lossy()
            .into_owned()
    });
    let site = match shell::site(conf.as_deref()) {
        Ok(site) => site,
        Err(why) => {
            binder_core::text::emit(&mut std::io::stderr(), &why);
            return -1;
        }
    };
    let command = shell_info(shell).map_or_else(Vec::new, |j| shell::command_of(&j));
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    *state() = match shell::noted_request_from(&|name| getopt(shell, name), &site, &command) {
        Ok((Some(request), _)) => {
            // binder binds: the shell's own cpu-affinity would bind first (its
            // `shell.init` runs before a plugin's); gpu-affinity is turned off only for a
            // shape that sets every task's visible devices itself (SEMANTICS §4.3).
            let cwd = std::env::current_dir()
                .ok()
                .map(|d| d.display().to_string());
            let get = |name: &str| getenv(shell, name);
            // The one rule every plugin follows (binder_host::front::resolve_shape): the
            // shell's directory, the job's PWD, the catalog.
            let pwd = get("PWD");
            let shape = binder_host::front::resolve_shape(
                &request.shape,
                &[cwd.as_deref(), pwd.as_deref()],
                &site.catalog,
            )
            .and_then(|path| JobShape::at(&path, &get))
            .map(Box::new)
            .map_err(|Refusal(why)| why);
            let gpus_off = shape.as_ref().map_or(true, |s| s.shape.needs_gpus());
            let off: &[&CStr] = if gpus_off {
                &[c"cpu-affinity", c"gpu-affinity"]
            } else {
                &[c"cpu-affinity"]
            };
            for name in off {
                // SAFETY: valid handle and C strings; the shell copies the JSON.
                unsafe { ffi::flux_shell_setopt(shell, name.as_ptr(), c"\"off\"".as_ptr()) };
            }
            State::Asked(request, shape, gpus_off)
        }
        // Left to Flux: only what an outer binder exported is removed in `task.init`.
        Ok((None, note)) => {
            // A report or verbose lines asked for a job binder leaves alone: why, once.
            if let Some(note) = note {
                binder_core::text::emit(&mut std::io::stderr(), &note);
            }
            State::Left {
                wrapper: matches!(Kind::of_command(&command), Kind::Wrapper(_)),
            }
        }
        Err(why) => State::Refused(why),
    };
    for (topic, cb) in [
        ("shell.init", shell_init as ffi::Handler),
        ("task.init", task_init),
        ("task.exec", task_exec),
    ] {
        let Ok(topic) = CString::new(topic) else {
            return -1;
        };
        // SAFETY: a valid handle; Flux copies the topic; `cb` lives for the process.
        if unsafe { ffi::flux_plugin_add_handler(p, topic.as_ptr(), cb, std::ptr::null_mut()) } < 0
        {
            return -1;
        }
    }
    0
}

/// The shell's info JSON (`flux_shell_get_info`: the jobspec, R, the task count).
fn shell_info(shell: ShellPtr) -> Option<String> {
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid handle; `json` receives an owned string or NULL.
    let rc = unsafe { ffi::flux_shell_get_info(shell, &mut json) };
    // SAFETY: what the call wrote.
    unsafe { answer(rc == 0, json) }
}

/// This shell's node, from its rank info.
fn node_of(shell: ShellPtr) -> Result<Node, Refusal> {
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid handle; -1 is this shell's rank; `json` receives an owned string.
    let rc = unsafe { ffi::flux_shell_get_rank_info(shell, -1, &mut json) };
    // SAFETY: what the call wrote.
    let json = unsafe { answer(rc == 0, json) }
        .ok_or_else(|| Refusal("the shell gave no rank info".into()))?;
    let jobid =
        getenv(shell, "FLUX_JOB_ID").ok_or_else(|| Refusal("the job has no FLUX_JOB_ID".into()))?;
    let mut node = Node::from_rank_info(jobid, &json).map_err(Refusal)?;
    // The shell runs with its broker's binding (the plugin turned the shell's own
    // cpu-affinity off before it could bind the shell): the instance's CPUs.
    node.instance = binder_core::procfs::affinity(None);
    Ok(node)
}

/// `shell.init`: the node's plan, once.
unsafe extern "C" fn shell_init(
    p: Plugin,
    _: *const c_char,
    _: PluginArg,
    _: *mut c_void,
) -> c_int {
    let shell = shell_of(p);
    let mut state = state();
    if !matches!(*state, State::Asked(..)) {
        return 0;
    }
    let State::Asked(request, shape, gpus_off) =
        std::mem::replace(&mut *state, State::Left { wrapper: false })
    else {
        return 0;
    };
    let get = |name: &str| getenv(shell, name);
    let site_default = request.site_default;
    let prepared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let shape = shape.map_err(Refusal)?;
        let node = node_of(shell)?;
        // What Flux gave each task, which a site's default never narrows (SEMANTICS §4.3);
        // an explicit request may, so only a default reads it (the CPUs per core need
        // the topology).
        let given = request
            .site_default
            .then(|| shell_info(shell).and_then(|info| shell::cores_per_slot(&info)))
            .and_then(|cores| shell::given(&node, cores));
        let request = Request { given, ..request };
        Shell::prepare(node, request, *shape, &get, &mut std::io::stderr())
    }));
    *state = match prepared {
        Ok(Ok(shell)) => State::Planned(Box::new(shell)),
        // A site default that cannot be planned: what Flux's affinity (turned off by now)
        // would have given each task, the job's cores and GPUs here, with one line.
        Ok(Err(Refusal(why))) if site_default => match node_of(shell).and_then(|n| Ok((shell::job_cpus(&n)?, shell::job_gpus(&n)))) {
            Ok((cpus, gpus)) => {
                binder_host::front::declined(&mut std::io::stderr(), &why, "the job's cores and GPUs stand, as Flux's own affinity gives them");
                State::Fallback(cpus, gpus_off.then_some(gpus))
            }
            Err(Refusal(also)) => State::Refused(format!("the site's default shape is not used for this job ({why}), and the job's own cores cannot be found ({also})")),
        },
        Ok(Err(Refusal(why))) => State::Refused(why),
        Err(_) => State::Refused("internal error while planning this job (a bug: please report it)".into()),
    };
    0
}

/// The current task's local id and job-wide rank.
fn current_task(shell: ShellPtr) -> Option<(ffi::Task, usize, Option<usize>)> {
    // SAFETY: a valid handle, in a `task.*` callback.
    let task = unsafe { ffi::flux_shell_current_task(shell) };
    if task.is_null() {
        return None;
    }
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid task; `json` receives an owned string.
    let rc = unsafe { ffi::flux_shell_task_get_info(task, &mut json) };
    // SAFETY: what the call wrote.
    let info: serde_json::Value = serde_json::from_str(&unsafe { answer(rc == 0, json) }?).ok()?;
    let local = usize::try_from(info.get("localid")?.as_u64()?).ok()?;
    let rank = info
        .get("rank")
        .and_then(serde_json::Value::as_u64)
        .and_then(|r| usize::try_from(r).ok());
    Some((task, local, rank))
}

/// `task.init`: the task's variables, on its command; binder's own stale ones removed.
unsafe extern "C" fn task_init(p: Plugin, _: *const c_char, _: PluginArg, _: *mut c_void) -> c_int {
    let shell = shell_of(p);
    let Some((task, local, rank)) = current_task(shell) else {
        return 0;
    };
    // SAFETY: a valid task in `task.init`.
    let cmd = unsafe { ffi::flux_shell_task_cmd(task) };
    let unset = |names: &mut dyn Iterator<Item = &'static str>| {
        for name in names.filter_map(|n| CString::new(n).ok()) {
            // SAFETY: valid command and C string.
            unsafe { ffi::flux_cmd_unsetenv(cmd, name.as_ptr()) };
        }
    };
    let vars = match &*state() {
        State::Left { wrapper } => {
            let kind = if *wrapper {
                Kind::Wrapper("binder")
            } else {
                Kind::Task
            };
            unset(&mut binder_host::front::left_alone(kind));
            return 0;
        }
        State::Planned(prepared) => {
            match prepared.task_env(local, rank, &|n| getenv(shell, n), &mut std::io::stderr()) {
                Ok(vars) => vars,
                Err(_) => return 0, // task.exec reports it, and the task does not run
            }
        }
        State::Fallback(_, Some(gpus)) => vec![("CUDA_VISIBLE_DEVICES".to_owned(), gpus.clone())],
        State::Fallback(_, None) => Vec::new(),
        State::Asked(..) | State::Refused(_) => return 0,
    };
    for (name, value) in &vars {
        let (Ok(name), Ok(value)) = (CString::new(name.as_str()), CString::new(value.as_str()))
        else {
            continue;
        };
        // SAFETY: valid command and C strings; "%s" takes exactly the one string.
        unsafe { ffi::flux_cmd_setenvf(cmd, 1, name.as_ptr(), c"%s".as_ptr(), value.as_ptr()) };
    }
    // What binder did not set this time must not reach the task from an outer binder.
    unset(&mut binder_core::launch::env::stale(&vars));
    0
}

/// `task.exec`: in the task's process, before exec: bind, or refuse.
unsafe extern "C" fn task_exec(p: Plugin, _: *const c_char, _: PluginArg, _: *mut c_void) -> c_int {
    let shell = shell_of(p);
    let state = state();
    let prepared = match &*state {
        State::Planned(prepared) => prepared,
        State::Refused(why) => refuse(why),
        State::Fallback(cpus, _) => {
            if let Err(e) = binder_core::launch::affinity::bind_cpus_raw(cpus) {
                refuse(&format!(
                    "cannot bind to the job's cores as Flux would have: {e}"
                ));
            }
            return 0;
        }
        State::Left { .. } | State::Asked(..) => return 0,
    };
    let Some((_, local, rank)) = current_task(shell) else {
        refuse("the job shell gave no current task; binder cannot place it");
    };
    let get = |name: &str| getenv(shell, name);
    let bound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        prepared.bind(local, rank, &get, &mut std::io::stderr())
    }));
    match bound {
        Ok(Ok(())) => 0,
        Ok(Err(Refusal(why))) => refuse(&why),
        Err(_) => refuse("internal error while binding this task (a bug: please report it)"),
    }
}

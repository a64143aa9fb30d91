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
//!   registers nothing. `-o binder-report`, `-o binder-verbose` (or the object form
//!   `-o binder.shape=… -o binder.report -o binder.verbose`); `-o binder=off` turns a
//!   site default off.
//! * **When active** it turns the shell's own `cpu-affinity` and `gpu-affinity` off in
//!   `flux_plugin_init` (their `shell.init` runs before a plugin's), takes the job's
//!   cores here from R as the envelope (SEMANTICS §4.1), plans the node in `shell.init`,
//!   sets each task's variables in `task.init` (a task's environment is fixed when it is
//!   forked) and binds in `task.exec`, in the task's process before exec, through the one
//!   launch flow (the node ledger claims the task's own PID).
//! * **A refusal** (a bad shape, too few free units) writes binder's one `binder:` line
//!   to the task's stderr and `_exit(125)`s in the task's process: a `task.exec` callback
//!   that returns -1 does not stop the task (seen on 0.88), and nothing may run unbound. A
//!   site default that cannot be planned leaves the shell's own affinity on instead.
//!
//! The FFI is a small hand-kept module ([`ffi`]); `tests/header.rs` compiles it against
//! the installed headers.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

pub mod ffi;
pub mod shell;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

use binder_host::around::Refusal;
use ffi::{Plugin, PluginArg, Shell as ShellPtr};
use shell::{Node, Request, Shell, Site};

/// What `shell.init` left for the tasks: the plan, or the refusal every task reports.
static STATE: Mutex<Option<Result<Shell, String>>> = Mutex::new(None);
/// A declined site default: what Flux's cpu- and gpu-affinity would have given each
/// task (the job's CPUs here, `CUDA_VISIBLE_DEVICES`), which binder gives it instead,
/// since it turned them off before it could know.
static FALLBACK: Mutex<Option<(Vec<usize>, String)>> = Mutex::new(None);
/// Tasks whose command is binder's wrapper (local ids): under a site default the wrapper
/// binds them (`Err(None)`), beside an explicit `-o binder` they are refused with the line
/// (`Err(Some(line))`).
static WRAPPED: Mutex<Vec<(usize, Option<String>)>> = Mutex::new(Vec::new());
/// The request, from `flux_plugin_init`.
static REQUEST: Mutex<Option<(Request, Site)>> = Mutex::new(None);

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

/// A shell option's JSON, when set.
fn getopt(shell: ShellPtr, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: `shell` is the shell's handle; `json` receives an owned string or NULL.
    let rc = unsafe { ffi::flux_shell_getopt(shell, name.as_ptr(), &mut json) };
    // SAFETY: owned by us now (or NULL).
    let value = unsafe { take(json) };
    (rc == 1).then_some(value).flatten()
}

/// A variable of the job's environment.
fn getenv(shell: ShellPtr, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    // SAFETY: `shell` is the shell's handle; the result is NULL or a string it owns.
    let value = unsafe { ffi::flux_shell_getenv(shell, name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: a valid C string owned by the shell, copied at once.
    Some(
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The shell's handle of plugin `p`.
fn shell_of(p: Plugin) -> ShellPtr {
    // SAFETY: `p` is the plugin handle Flux passed in.
    unsafe { ffi::flux_plugin_get_shell(p) }
}

/// Writes the one line on stderr.
fn say(line: &str) {
    binder_core::text::emit(&mut std::io::stderr(), line);
}

/// `flux_plugin_init`: reads the request; inert without one.
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
        let text = unsafe { CStr::from_ptr(conf) };
        text.to_string_lossy().into_owned()
    });
    let site = match Site::parse(conf.as_deref()) {
        Ok(site) => site,
        Err(why) => {
            say(&why);
            return -1;
        }
    };
    let request = match shell::request_from(&|name| getopt(shell, name), &site) {
        Ok(Some(request)) => request,
        Ok(None) => return 0,
        Err(why) => {
            // Reported by every task, which then does not run.
            *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(why));
            return register(p, &[("task.exec", task_exec)]);
        }
    };
    // binder binds: the shell's own affinity would bind first and set
    // CUDA_VISIBLE_DEVICES per task (both run in their `shell.init`, after this).
    // A site default that cannot be planned turns them back on in `shell.init`.
    for name in [c"cpu-affinity", c"gpu-affinity"] {
        // SAFETY: valid handle and C strings; the shell copies the JSON.
        unsafe { ffi::flux_shell_setopt(shell, name.as_ptr(), c"\"off\"".as_ptr()) };
    }
    *REQUEST.lock().unwrap_or_else(|e| e.into_inner()) = Some((request, site));
    register(
        p,
        &[
            ("shell.init", shell_init),
            ("task.init", task_init),
            ("task.exec", task_exec),
        ],
    )
}

/// Registers each topic's handler.
fn register(p: Plugin, handlers: &[(&str, ffi::Handler)]) -> c_int {
    for &(topic, cb) in handlers {
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

/// This shell's node, from its rank info.
fn node_of(shell: ShellPtr) -> Result<Node, String> {
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid handle; -1 is this shell's rank; `json` receives an owned string.
    let rc = unsafe { ffi::flux_shell_get_rank_info(shell, -1, &mut json) };
    // SAFETY: owned by us now (or NULL).
    let json = unsafe { take(json) };
    let json = json
        .filter(|_| rc == 0)
        .ok_or("the shell gave no rank info")?;
    let jobid = getenv(shell, "FLUX_JOB_ID").ok_or("the job has no FLUX_JOB_ID")?;
    let mut node = Node::from_rank_info(jobid, &json)?;
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
    let Some((request, site)) = REQUEST.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return 0;
    };
    let get = |name: &str| getenv(shell, name);
    let cwd = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let site_default = request.site_default;
    let prepared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let node = node_of(shell).map_err(Refusal)?;
        Shell::prepare(
            node,
            request,
            &site,
            &get,
            cwd.as_deref(),
            &mut std::io::stderr(),
        )
    }));
    let state = match prepared {
        Ok(Ok(shell)) => Ok(shell),
        // A site default that cannot be planned: the shell's own affinity, with one line.
        // Flux's affinity plugins have run (turned off) by now: binder gives each task
        // what they would have, the job's cores and GPUs here.
        Ok(Err(Refusal(why))) if site_default => {
            let fallback = node_of(shell)
                .map_err(Refusal)
                .and_then(|node| Ok((shell::job_cpus(&node)?, shell::job_gpus(&node))));
            return match fallback {
                Ok(fallback) => {
                    say(&format!("warning: the site's default shape is not used for this job ({why}); the job's cores and GPUs stand, as Flux's own affinity gives them"));
                    *FALLBACK.lock().unwrap_or_else(|e| e.into_inner()) = Some(fallback);
                    0
                }
                Err(Refusal(also)) => {
                    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(format!("the site's default shape is not used for this job ({why}), and the job's own cores cannot be found ({also})")));
                    0
                }
            };
        }
        Ok(Err(Refusal(why))) => Err(why),
        Err(_) => Err("internal error while planning this job (a bug: please report it)".into()),
    };
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(state);
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
    // SAFETY: owned by us now (or NULL).
    let json = unsafe { take(json) }.filter(|_| rc == 0)?;
    let info: serde_json::Value = serde_json::from_str(&json).ok()?;
    let local = usize::try_from(info.get("localid")?.as_u64()?).ok()?;
    let rank = info
        .get("rank")
        .and_then(serde_json::Value::as_u64)
        .and_then(|r| usize::try_from(r).ok());
    Some((task, local, rank))
}

/// `task.init`: the task's variables, on its command.
unsafe extern "C" fn task_init(p: Plugin, _: *const c_char, _: PluginArg, _: *mut c_void) -> c_int {
    let shell = shell_of(p);
    let Some((task, local, rank)) = current_task(shell) else {
        return 0;
    };
    let state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let get = |name: &str| getenv(shell, name);
    // SAFETY: a valid task in `task.init`.
    let cmd = unsafe { ffi::flux_shell_task_cmd(task) };
    if let Some(Ok(prepared)) = state.as_ref() {
        // SAFETY: a valid command; the string is the command's, copied at once.
        let arg0 = unsafe { ffi::flux_cmd_arg(cmd, 0) };
        let arg0 = (!arg0.is_null()).then(|| {
            // SAFETY: not NULL, so a valid C string the command owns.
            unsafe { CStr::from_ptr(arg0) }
                .to_string_lossy()
                .into_owned()
        });
        if let Some(wrapper) = arg0.filter(|a| binder_core::launch::line::is_wrapper(a)) {
            return leave_to_wrapper(prepared, local, &wrapper, cmd);
        }
    }
    let vars = match state.as_ref() {
        Some(Ok(prepared)) => match prepared.task_env(local, rank, &get, &mut std::io::stderr()) {
            Ok(vars) => vars,
            Err(_) => return 0, // task.exec reports it, and the task does not run
        },
        _ => match FALLBACK.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some((_, gpus)) => vec![("CUDA_VISIBLE_DEVICES".to_owned(), gpus.clone())],
            None => return 0,
        },
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
    for stale in binder_core::launch::env::stale(&vars) {
        if let Ok(name) = CString::new(stale) {
            // SAFETY: valid command and C string.
            unsafe { ffi::flux_cmd_unsetenv(cmd, name.as_ptr()) };
        }
    }
    0
}

/// A task whose command is binder's wrapper (SEMANTICS §4.2): under a site default the
/// wrapper binds it, inside the job's cores here, which the shell takes as its own binding
/// as Flux's cpu-affinity would have (the wrapper reads the job shell's binding as the
/// job's allocation); beside an explicit `-o binder` the task is refused in `task.exec`
/// with one line naming both.
fn leave_to_wrapper(prepared: &Shell, local: usize, wrapper: &str, cmd: ffi::Cmd) -> c_int {
    let refusal = (!prepared.request.site_default).then(|| {
        format!(
            "-o binder={} and the wrapper `{}` both bind this task; drop -o binder (the wrapper binds it), or run the command without the wrapper",
            binder_core::text::printable(&prepared.request.shape, 80),
            binder_core::text::printable(wrapper, 80)
        )
    });
    if refusal.is_none() {
        match shell::job_cpus(&prepared.node) {
            Ok(cpus) if !cpus.is_empty() => {
                if let Err(e) = binder_core::launch::affinity::bind_cpus_raw(&cpus) {
                    say(&format!("warning: cannot bind the job shell to the job's cores ({e}); the wrapper may see more than the job's"));
                }
            }
            Ok(_) => {}
            Err(Refusal(why)) => say(&format!("warning: the job's cores cannot be found ({why}); the wrapper may see more than the job's")),
        }
        // What an outer binder exported must not reach the wrapper's task.
        for stale in binder_core::launch::env::stale(&[]) {
            if let Ok(name) = CString::new(stale) {
                // SAFETY: valid command and C string.
                unsafe { ffi::flux_cmd_unsetenv(cmd, name.as_ptr()) };
            }
        }
    }
    WRAPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((local, refusal));
    0
}

use binder_core::launch::env::refuse_task as refuse;

/// `task.exec`: in the task's process, before exec: bind, or refuse.
unsafe extern "C" fn task_exec(p: Plugin, _: *const c_char, _: PluginArg, _: *mut c_void) -> c_int {
    let shell = shell_of(p);
    let state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let prepared = match state.as_ref() {
        None => {
            if let Some((cpus, _)) = FALLBACK.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                if let Err(e) = binder_core::launch::affinity::bind_cpus_raw(cpus) {
                    refuse(&format!(
                        "cannot bind to the job's cores as Flux would have: {e}"
                    ));
                }
            }
            return 0;
        }
        Some(Err(why)) => refuse(why),
        Some(Ok(prepared)) => prepared,
    };
    let Some((_, local, rank)) = current_task(shell) else {
        refuse("the job shell gave no current task; binder cannot place it");
    };
    let wrapped = WRAPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(l, _)| *l == local)
        .map(|(_, r)| r.clone());
    match wrapped {
        Some(Some(line)) => refuse(&line),
        Some(None) => return 0, // the wrapper binds it
        None => {}
    }
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

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
//!   in `task.exec`, in the task's process before exec, through the one launch flow (the
//!   node ledger claims the task's own PID).
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
use std::sync::atomic::Ordering;

/// What `shell.init` left for the tasks: the plan, or the refusal every task reports.
static STATE: Mutex<Option<Result<Shell, String>>> = Mutex::new(None);
/// A declined site default: what Flux's cpu- and gpu-affinity would have given each
/// task (the job's CPUs here, `CUDA_VISIBLE_DEVICES`), which binder gives it instead,
/// since it turned them off before it could know.
static FALLBACK: Mutex<Option<(Vec<usize>, String)>> = Mutex::new(None);
/// Whether a job binder leaves to Flux runs the wrapper, which keeps the enclosing job's
/// name (`BINDER_JOB`) to read.
static LEFT_TO_WRAPPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Whether the plugin turned the shell's `gpu-affinity` off (only for a shape that sets
/// every task's visible devices itself: binding CPUs never unbinds GPUs, SEMANTICS §4.3).
static GPUS_OFF: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
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
    let site = match shell::site(conf.as_deref()) {
        Ok(site) => site,
        Err(why) => {
            say(&why);
            return -1;
        }
    };
    let command = job_command(shell);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let request = match shell::request_from(&|name| getopt(shell, name), &site, &command) {
        Ok(Some(request)) => request,
        // binder leaves the job to Flux: only what an outer binder exported is removed
        // (an enclosing job's `BINDER_JOB` describes no task of this one).
        Ok(None) => {
            let kind = binder_host::front::Kind::of_command(&command);
            let wrapper = matches!(kind, binder_host::front::Kind::Wrapper(_));
            LEFT_TO_WRAPPER.store(wrapper, Ordering::Relaxed);
            return register(p, &[("task.init", scrub_task)]);
        }
        Err(why) => {
            // Reported by every task, which then does not run.
            *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(why));
            return register(p, &[("task.exec", task_exec)]);
        }
    };
    // binder binds: the shell's own cpu-affinity would bind first (its `shell.init` runs
    // before a plugin's). Its gpu-affinity is turned off only for a shape that sets every
    // task's visible devices itself; a CPU-only shape keeps Flux's GPU binding as Flux
    // makes it. A site default that cannot be planned stands in for both in `task.*`.
    let cwd = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let gpus =
        binder_host::front::asks_gpus(&request.shape, cwd.as_deref(), &site.catalog, &|name| {
            getenv(shell, name)
        })
        .unwrap_or(true);
    GPUS_OFF.store(gpus, Ordering::Relaxed);
    let off: &[&CStr] = if gpus {
        &[c"cpu-affinity", c"gpu-affinity"]
    } else {
        &[c"cpu-affinity"]
    };
    for name in off {
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

/// The job's command, its first two words (`jobspec.tasks[0].command`), from the shell's
/// info: a Flux broker (`flux alloc`, `flux batch`) is a container, the wrapper binds its
/// own task.
fn job_command(shell: ShellPtr) -> Vec<String> {
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid handle; `json` receives an owned string or NULL.
    let rc = unsafe { ffi::flux_shell_get_info(shell, &mut json) };
    // SAFETY: owned by us now (or NULL).
    let json = unsafe { take(json) };
    json.filter(|_| rc == 0)
        .map(|j| shell::command_of(&j))
        .unwrap_or_default()
}

/// `task.init` of a job binder leaves to Flux: binder's own variables from an outer
/// binder are removed from the task's command.
unsafe extern "C" fn scrub_task(
    p: Plugin,
    _: *const c_char,
    _: PluginArg,
    _: *mut c_void,
) -> c_int {
    if let Some((task, _, _)) = current_task(shell_of(p)) {
        // SAFETY: a valid task in `task.init`.
        let cmd = unsafe { ffi::flux_shell_task_cmd(task) };
        let kind = if LEFT_TO_WRAPPER.load(Ordering::Relaxed) {
            binder_host::front::Kind::Wrapper("binder")
        } else {
            binder_host::front::Kind::Task
        };
        for stale in binder_host::front::left_alone(kind) {
            if let Ok(name) = CString::new(stale) {
                // SAFETY: valid command and C string.
                unsafe { ffi::flux_cmd_unsetenv(cmd, name.as_ptr()) };
            }
        }
    }
    0
}

/// Unsets binder's variables that `vars` (what binder set for this task) does not set.
fn scrub(cmd: ffi::Cmd, vars: &[(String, String)]) {
    for stale in binder_core::launch::env::stale(vars) {
        if let Ok(name) = CString::new(stale) {
            // SAFETY: valid command and C string.
            unsafe { ffi::flux_cmd_unsetenv(cmd, name.as_ptr()) };
        }
    }
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
                    binder_host::front::declined(
                        &mut std::io::stderr(),
                        &why,
                        "the job's cores and GPUs stand, as Flux's own affinity gives them",
                    );
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
    let vars = match state.as_ref() {
        Some(Ok(prepared)) => match prepared.task_env(local, rank, &get, &mut std::io::stderr()) {
            Ok(vars) => vars,
            Err(_) => return 0, // task.exec reports it, and the task does not run
        },
        _ => match FALLBACK.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            // What Flux's gpu-affinity would have exported, where binder turned it off.
            Some((_, gpus)) if GPUS_OFF.load(Ordering::Relaxed) => {
                vec![("CUDA_VISIBLE_DEVICES".to_owned(), gpus.clone())]
            }
            _ => Vec::new(),
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
    scrub(cmd, &vars);
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

//! binder as a Slurm SPANK plugin: `srun --binder=SHAPE ./app` binds each task inside
//! slurmstepd, before exec, with the same planner, node ledger and task environment as
//! `srun binder SHAPE -- ./app`, and without the two extra execs per task.
//!
//! ```text
//! # plugstack.conf (the plugin is built for the Slurm whose headers it finds)
//! required /usr/lib/x86_64-linux-gnu/binder/libbinder_spank.so default=cores-packed catalog=/usr/share/binder/shapes
//! ```
//!
//! * Options: `--binder=SHAPE` (a path, relative to the job's working directory, or a
//!   catalog name looked up in `catalog=DIR`), `--binder-report`, `--binder-verbose`.
//!   Arguments: `default=SHAPE` binds every step that gives no `--binder`;
//!   `catalog=DIR` (default `/usr/share/binder/shapes`).
//! * `slurm_spank_task_init` runs in the task's own process, as the user, after Slurm's
//!   task plugin and before exec: binding this process binds the task (so binder's
//!   binding wins over the task plugin's default one). Identity comes from SPANK items
//!   (`S_TASK_ID`, `S_JOB_LOCAL_TASK_COUNT`, `S_JOB_ID`, `S_JOB_STEPID`, `S_JOB_NODEID`),
//!   the environment from `spank_getenv`, and the task's variables go out through
//!   `spank_setenv`.
//! * A refusal writes binder's one `binder:` line to the task's stderr and ends the task
//!   with exit status 125 before exec, whether the plugstack line says `required` or
//!   `optional` (which only decides whether a plugin that fails to *load* fails the
//!   job): nothing runs unbound.
//!
//! The FFI is a small hand-kept module ([`ffi`]) rather than `bindgen`; its doc says why,
//! and a test checks it against the installed `spank.h`.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

pub mod ffi;
pub mod multiprog;
pub mod task;
pub mod version;

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

use ffi::{Spank, SpankOption, ESPANK_SUCCESS};

/// The plugin's name, as Slurm lists it (`plugin_name`).
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static plugin_name: [u8; 7] = *b"binder\0";
/// `plugin_type`: a SPANK plugin.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// `plugin_version`: the Slurm release built against (its `slurm_version.h`, read by
/// `build.rs`); Slurm refuses a plugin of another major.minor release.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static plugin_version: u32 = SLURM_VERSION_NUMBER;
/// `spank_plugin_version`.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static spank_plugin_version: u32 = 0;

/// The mark of a plugin built without Slurm's headers (`plugin_version` 0, which no Slurm
/// loads): `make install` and the packages find it in the file and leave the plugin out.
#[cfg(spank_unloadable)]
#[used]
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static binder_spank_unloadable: [u8; 65] =
    *b"binder-spank: UNLOADABLE (built without Slurm's slurm_version.h)\0";

/// `SLURM_VERSION_NUMBER` of the Slurm this plugin is built against (`build.rs` reads
/// it from `slurm/slurm_version.h`: `SLURM_INCLUDE_DIR`, pkg-config, `/usr/include`);
/// 0 when no header was found, which no Slurm loads.
pub const SLURM_VERSION_NUMBER: u32 = decimal(env!("SPANK_BUILT_SLURM_VERSION"));

/// A decimal number at compile time (what `build.rs` writes).
const fn decimal(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut value: u32 = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(
            bytes[i].is_ascii_digit(),
            "build.rs writes a decimal number"
        );
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

/// The catalog a bare shape name is looked up in (the one path every front uses).
pub const CATALOG: &str = binder_core::launch::line::CATALOG;

/// What plugstack.conf says: the front module's one site type (`default=`, `catalog=`).
pub use binder_host::front::Site;

static SITE: OnceLock<Site> = OnceLock::new();

/// The three options, by name: `binder` takes a shape, the others are flags.
const OPTIONS: [(&CStr, Option<&CStr>, &CStr); 3] = [
    (
        c"binder",
        Some(c"SHAPE"),
        c"Bind each task with binder's SHAPE (a YAML file, or a catalog name)",
    ),
    (
        c"binder-report",
        None,
        c"Print each task's binder binding on its stderr",
    ),
    (
        c"binder-verbose",
        None,
        c"Say what binder's node ledger decided for each task",
    ),
];

/// A SPANK option for `OPTIONS[i]`, leaked: Slurm keeps the pointer it is registered
/// with for the life of the process.
fn option(i: usize) -> *mut SpankOption {
    let (name, arginfo, usage) = OPTIONS[i];
    Box::into_raw(Box::new(SpankOption {
        name: name.as_ptr(),
        arginfo: arginfo.map_or(std::ptr::null(), CStr::as_ptr),
        usage: usage.as_ptr(),
        has_arg: c_int::from(arginfo.is_some()),
        val: i as c_int,
        cb: None,
    }))
}

/// The plugstack.conf arguments as strings.
///
/// # Safety
/// `argv` holds `argc` valid C strings (Slurm's contract for every SPANK callback).
unsafe fn args<'a>(argc: c_int, argv: *const *const c_char) -> Vec<&'a str> {
    (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the caller's contract: `argc` valid pointers to C strings.
        .filter_map(|i| unsafe { CStr::from_ptr(*argv.add(i)) }.to_str().ok())
        .collect()
}

/// `slurm_spank_init`: registers the options (srun and slurmstepd both need them) and
/// reads the plugstack.conf arguments.
///
/// # Safety
/// Called by Slurm with a valid handle and argument vector.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(
    sp: Spank,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    // SAFETY: Slurm's contract for this callback.
    let args = unsafe { args(argc, argv) };
    let site = match Site::from_args(args) {
        Ok(site) => site,
        Err(why) => {
            binder_core::text::emit(&mut std::io::stderr(), &why);
            return -1;
        }
    };
    let _ = SITE.set(site);
    for i in 0..OPTIONS.len() {
        // SAFETY: `sp` is Slurm's handle; the option lives for the process (leaked).
        if unsafe { ffi::spank_option_register(sp, option(i)) } != ESPANK_SUCCESS {
            return -1;
        }
    }
    0
}

/// The value of option `i` when it was given (`Some("")` for a flag).
fn getopt(sp: Spank, i: usize) -> Option<String> {
    let mut arg: *mut c_char = std::ptr::null_mut();
    // SAFETY: `sp` is Slurm's handle; `arg` receives NULL or a string Slurm owns.
    let rc = unsafe { ffi::spank_option_getopt(sp, option(i), &mut arg) };
    if rc != ESPANK_SUCCESS {
        return None;
    }
    if arg.is_null() {
        return Some(String::new());
    }
    // SAFETY: Slurm returned a valid C string.
    Some(
        unsafe { CStr::from_ptr(arg) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// A `uint32_t` or `int` item.
fn item(sp: Spank, which: c_int) -> Option<u32> {
    let mut value: u32 = 0;
    // SAFETY: every item read here is written through one `uint32_t *` or `int *`
    // (same size and alignment), per spank.h.
    let rc = unsafe { ffi::spank_get_item(sp, which, &mut value as *mut u32) };
    (rc == ESPANK_SUCCESS).then_some(value)
}

/// A variable of the job's environment.
fn getenv(sp: Spank, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: `buf` is writable for its length, which is passed; Slurm NUL-terminates.
    let rc = unsafe {
        ffi::spank_getenv(
            sp,
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len() as c_int,
        )
    };
    if rc != ESPANK_SUCCESS {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0)?;
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// Sets (`Some`) or removes a variable of the task's environment.
fn setenv(sp: Spank, name: &str, value: Option<&str>) {
    let Ok(name) = CString::new(name) else { return };
    match value.map(CString::new) {
        // SAFETY: valid C strings; Slurm copies them.
        Some(Ok(value)) => unsafe {
            ffi::spank_setenv(sp, name.as_ptr(), value.as_ptr(), 1);
        },
        Some(Err(_)) => {}
        // SAFETY: a valid C string.
        None => unsafe {
            ffi::spank_unsetenv(sp, name.as_ptr());
        },
    }
}

/// Removes binder's own variables that `vars` (what binder set for this task) does not
/// set: a stale `BINDER_CPUS` from an outer binder (the shell that ran `srun`) must
/// not describe this task.
fn scrub(sp: Spank, vars: &[(String, String)]) {
    // Unset whether or not it is there: one call each, no 64 KiB read of the variable.
    for stale in binder_core::launch::env::stale(vars) {
        setenv(sp, stale, None);
    }
}

/// The task's command and its first argument (`S_JOB_ARGV[0..2]`), as Slurm gives them.
fn argv(sp: Spank) -> Vec<String> {
    let mut argc: c_int = 0;
    let mut argv: *mut *mut c_char = std::ptr::null_mut();
    // SAFETY: S_JOB_ARGV is read through an `int *` and a `char ***` (spank.h); Slurm
    // keeps the vector for the step's life.
    let rc = unsafe {
        ffi::spank_get_item(
            sp,
            ffi::item::S_JOB_ARGV,
            &mut argc as *mut c_int,
            &mut argv as *mut *mut *mut c_char,
        )
    };
    if rc != ESPANK_SUCCESS || argc < 1 || argv.is_null() {
        return Vec::new();
    }
    let n = usize::try_from(argc).unwrap_or(0).min(2);
    (0..n)
        .map_while(|i| {
            // SAFETY: `argv` holds `argc` pointers, and `i` < `argc`.
            let arg = unsafe { *argv.add(i) };
            (!arg.is_null()).then(|| {
                // SAFETY: not NULL, so a valid C string Slurm owns, copied at once.
                unsafe { CStr::from_ptr(arg) }
                    .to_string_lossy()
                    .into_owned()
            })
        })
        .collect()
}

use binder_core::launch::env::refuse_task as refuse;

/// What slurmstepd's step environment says in `slurm_spank_user_init`, once per step,
/// before Slurm's task plugin writes the binding it chose itself (task/affinity's implicit
/// auto binding, or `none` rewritten to `mask_cpu`) and its gres code each task's own
/// GPUs (`--gpus-per-task`, `--gpu-bind`) into each task's environment. Tasks are forked
/// after it is set.
static STEP_ENV: OnceLock<task::StepEnv> = OnceLock::new();

/// `slurm_spank_user_init`: in slurmstepd, once per step, before the tasks are forked:
/// keeps what binding the user typed and the step's GPUs.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_user_init(
    sp: Spank,
    _: c_int,
    _: *const *const c_char,
) -> c_int {
    // SAFETY: no arguments; Slurm's contract.
    if unsafe { ffi::spank_context() } == ffi::S_CTX_REMOTE {
        let _ = STEP_ENV.set(task::StepEnv::read(&|name| getenv(sp, name)));
    }
    0
}

/// `slurm_spank_local_user_init`: in srun, after its options are read and before the
/// tasks are launched: marks a `--cpu-bind` that srun only inherited from the step it runs
/// in (`task::inherited_cpu_bind`), so that slurmstepd's side does not take it for one the
/// user typed. The mark is a variable of srun's environment, which srun hands to the step.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_local_user_init(
    _: Spank,
    _: c_int,
    _: *const *const c_char,
) -> c_int {
    // SAFETY: no arguments; Slurm's contract.
    if unsafe { ffi::spank_context() } != ffi::S_CTX_LOCAL {
        return 0;
    }
    let argv: Vec<String> = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let in_step = std::env::var_os("SLURM_STEP_ID").is_some();
    let cpu_bind = std::env::var("SLURM_CPU_BIND").ok();
    // srun is one thread here, reading its options; it copies its environment into the
    // step's after this callback.
    if task::inherited_cpu_bind(in_step, cpu_bind.as_deref(), &argv) {
        std::env::set_var(task::INHERITED_CPU_BIND, "1");
    }
    if multiprog::asked(&argv) {
        std::env::set_var(multiprog::MARK, "1");
    }
    0
}

/// `slurm_spank_task_init`: in the task's process, as the user, before exec: bind.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(
    sp: Spank,
    _: c_int,
    _: *const *const c_char,
) -> c_int {
    // SAFETY: no arguments; Slurm's contract.
    if unsafe { ffi::spank_context() } != ffi::S_CTX_REMOTE {
        return 0;
    }
    let site = SITE.get().cloned().unwrap_or_default();
    // What the user typed (`srun --cpu-bind=…`), as srun handed it over, read before
    // Slurm's task plugin wrote its own (implicit) binding into the task's environment.
    let stepenv = STEP_ENV.get().cloned().unwrap_or_default();
    setenv(sp, task::INHERITED_CPU_BIND, None);
    let typed = stepenv.typed.clone();
    let asked = getopt(sp, 0);
    let mut argv = argv(sp);
    // `srun --multi-prog`: the step's argv is the file and its text; the task's own
    // command is its line of it (an unreadable one: no command, which no default binds).
    let multi_prog = getenv(sp, multiprog::MARK).is_some();
    if multi_prog {
        setenv(sp, multiprog::MARK, None);
        argv = item(sp, ffi::item::S_TASK_GLOBAL_ID)
            .zip(argv.get(1))
            .and_then(|(rank, text)| multiprog::command(text, rank))
            .unwrap_or_default();
    }
    let step = task::Step {
        asked: asked.as_deref(),
        default: site.default_shape(),
        typed: typed.as_deref(),
        step: item(sp, ffi::item::S_JOB_STEPID).unwrap_or(0),
        command: argv.first().map(String::as_str),
        arg1: argv.get(1).map(String::as_str),
        report: getopt(sp, 1).is_some(),
        verbose: getopt(sp, 2).is_some(),
        pty: getenv(sp, "SLURM_PTY_PORT").is_some(),
        multi_prog,
    };
    let request = match step.decide() {
        task::Decision::Bind(request) => request,
        task::Decision::Refuse(why) => refuse(&why),
        task::Decision::Stay => {
            // `--binder-report` or `--binder-verbose` alone: why nothing is bound.
            if let Some(why) = step.why_left() {
                binder_core::text::emit(&mut std::io::stderr(), &why);
            }
            // What binder exports describes one task: never another step's (a batch
            // script or a task that inherited them from a bound shell); a wrapper keeps
            // the enclosing job's name.
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            for stale in binder_host::front::left_alone(binder_host::front::Kind::of_command(&argv))
            {
                setenv(sp, stale, None);
            }
            return 0;
        }
    };
    let ids = (
        item(sp, ffi::item::S_TASK_ID),
        item(sp, ffi::item::S_JOB_LOCAL_TASK_COUNT),
        item(sp, ffi::item::S_JOB_ID),
        item(sp, ffi::item::S_JOB_STEPID),
        item(sp, ffi::item::S_JOB_NODEID),
    );
    let (Some(t), Some(n), Some(job), Some(step), Some(node)) = ids else {
        refuse("SPANK did not give this task's id, task count, job, step or node id; binder cannot place it");
    };
    let items = task::Items {
        task: t as usize,
        local_count: n as usize,
        job,
        step,
        node,
        global: item(sp, ffi::item::S_TASK_GLOBAL_ID),
    };
    // The job's GPUs on this node are the step's, never one task's visible devices.
    let get = |name: &str| stepenv.gpu_var(name).unwrap_or_else(|| getenv(sp, name));
    // hwloc reads its variables from this process's environment, which is slurmstepd's;
    // the job's are what `srun binder` would see. This process is the task's, one thread,
    // about to exec with the job's environment (not this one).
    binder_host::front::adopt_hwloc_env(&get);
    // The one rule (binder_host::front::resolve_shape): the task's directory, the job's
    // PWD, the catalog; a misspelt name gets the nearest catalog name.
    let cwd = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let pwd = get("PWD");
    let bound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let path = binder_host::front::resolve_shape(
            &request.shape,
            &[cwd.as_deref(), pwd.as_deref()],
            &site.catalog,
        )?;
        task::bind(&request, &path, items, &get, &mut std::io::stderr())
    }));
    match bound {
        // A site's default that cannot be planned leaves the task to Slurm's own
        // binding, with the one line: a plain `srun` never fails because of it.
        Ok(Err(refusal)) if request.site_default => {
            binder_host::front::declined(
                &mut std::io::stderr(),
                &refusal.0,
                "Slurm's binding stands",
            );
            scrub(sp, &[]);
            0
        }
        Ok(Ok(vars)) => {
            for (name, value) in &vars {
                setenv(sp, name, Some(value));
            }
            scrub(sp, &vars);
            0
        }
        Ok(Err(refusal)) => refuse(&refusal.0),
        Err(_) => refuse("internal error while planning this task (a bug: please report it)"),
    }
}

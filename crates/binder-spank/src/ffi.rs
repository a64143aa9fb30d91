//! The part of Slurm's `<slurm/spank.h>` (Debian's libslurm-dev 22.05) this plugin uses,
//! kept by hand: five functions, two item numbers' worth of enum, one struct. A
//! `bindgen` build would need libclang on every build machine for these few lines; the
//! header has been ABI-stable for these declarations since Slurm 2.x (`spank_option`'s
//! layout, the `spank_item` order up to `S_JOB_ARRAY_TASK_ID`), and
//! `tests/header.rs` compares every value here with the installed header, so a drift
//! fails a test instead of a task.

use std::ffi::{c_char, c_int};

/// `spank_t`: slurmstepd's handle, opaque.
#[repr(C)]
pub struct SpankHandle {
    _private: [u8; 0],
}

/// `spank_t`.
pub type Spank = *mut SpankHandle;

/// `ESPANK_SUCCESS`.
pub const ESPANK_SUCCESS: c_int = 0;

/// `enum spank_item` values used (their position in the header's enum).
pub mod item {
    use std::ffi::c_int;
    /// `S_JOB_ID` (`uint32_t *`).
    pub const S_JOB_ID: c_int = 2;
    /// `S_JOB_STEPID` (`uint32_t *`).
    pub const S_JOB_STEPID: c_int = 3;
    /// `S_JOB_NODEID` (`uint32_t *`).
    pub const S_JOB_NODEID: c_int = 5;
    /// `S_JOB_LOCAL_TASK_COUNT` (`uint32_t *`).
    pub const S_JOB_LOCAL_TASK_COUNT: c_int = 6;
    /// `S_JOB_ARGV`, the task's command (`int *`, `char ***`).
    pub const S_JOB_ARGV: c_int = 9;
    /// `S_TASK_ID`, the local task id (`int *`).
    pub const S_TASK_ID: c_int = 11;
    /// `S_TASK_GLOBAL_ID` (`uint32_t *`).
    pub const S_TASK_GLOBAL_ID: c_int = 12;
}

/// `SLURM_INTERACTIVE_STEP` (slurm.h): the lowest of the step ids that name no job
/// step of the user's (`SLURM_BATCH_SCRIPT`, `SLURM_EXTERN_CONT`, `SLURM_PENDING_STEP`
/// lie above it).
pub const SLURM_INTERACTIVE_STEP: u32 = 0xffff_fffa;
/// `SLURM_BATCH_SCRIPT`: the batch script's step.
pub const SLURM_BATCH_SCRIPT: u32 = 0xffff_fffb;
/// `SLURM_EXTERN_CONT`: the extern step (pam_slurm_adopt's processes).
pub const SLURM_EXTERN_CONT: u32 = 0xffff_fffc;
/// `SLURM_PENDING_STEP`.
pub const SLURM_PENDING_STEP: u32 = 0xffff_fffd;

/// `S_CTX_LOCAL`: inside srun.
pub const S_CTX_LOCAL: c_int = 1;
/// `S_CTX_REMOTE`: inside slurmstepd.
pub const S_CTX_REMOTE: c_int = 2;

/// `spank_opt_cb_f`.
pub type OptionCallback = Option<unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int>;

/// `struct spank_option`.
#[repr(C)]
pub struct SpankOption {
    /// Long option name (without `--`).
    pub name: *const c_char,
    /// One word naming the argument, or NULL.
    pub arginfo: *const c_char,
    /// The help text.
    pub usage: *const c_char,
    /// 1 when the option takes an argument.
    pub has_arg: c_int,
    /// Passed to the callback.
    pub val: c_int,
    /// Called when the option is seen; NULL here (values are read with getopt).
    pub cb: OptionCallback,
}

extern "C" {
    /// `spank_context()`.
    pub fn spank_context() -> c_int;
    /// `spank_option_register(spank, opt)`.
    pub fn spank_option_register(spank: Spank, opt: *mut SpankOption) -> c_int;
    /// `spank_option_getopt(spank, opt, &optarg)`.
    pub fn spank_option_getopt(spank: Spank, opt: *mut SpankOption, arg: *mut *mut c_char)
        -> c_int;
    /// `spank_get_item(spank, item, ...)`.
    pub fn spank_get_item(spank: Spank, item: c_int, ...) -> c_int;
    /// `spank_getenv(spank, var, buf, len)`: the job's environment.
    pub fn spank_getenv(spank: Spank, var: *const c_char, buf: *mut c_char, len: c_int) -> c_int;
    /// `spank_setenv(spank, var, val, overwrite)`.
    pub fn spank_setenv(
        spank: Spank,
        var: *const c_char,
        val: *const c_char,
        overwrite: c_int,
    ) -> c_int;
    /// `spank_unsetenv(spank, var)`.
    pub fn spank_unsetenv(spank: Spank, var: *const c_char) -> c_int;
}

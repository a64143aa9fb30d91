//! The slice of flux-core 0.88's shell plugin API binder uses (`<flux/shell.h>`,
//! `<flux/core/plugin.h>`, `<flux/core/command.h>`), kept by hand rather than generated
//! with bindgen: a dozen functions, all taking opaque handles and C strings, whose JSON
//! answers binder parses itself (no jansson varargs). `tests/header.rs` compiles each
//! declaration against the installed headers with `-Werror`, so a drift fails the build
//! of that test, not a job. The symbols are the shell's own: the plugin leaves them
//! undefined and the dynamic loader binds them when `flux-shell` loads it.

use std::ffi::{c_char, c_int, c_void};

/// `flux_plugin_t *`.
pub type Plugin = *mut c_void;
/// `flux_plugin_arg_t *`.
pub type PluginArg = *mut c_void;
/// `flux_shell_t *`.
pub type Shell = *mut c_void;
/// `flux_shell_task_t *`.
pub type Task = *mut c_void;
/// `flux_cmd_t *`.
pub type Cmd = *mut c_void;

/// `flux_plugin_f`: a topic's callback.
pub type Handler = unsafe extern "C" fn(Plugin, *const c_char, PluginArg, *mut c_void) -> c_int;

extern "C" {
    /// Names the plugin (`flux_plugin_set_name`).
    pub fn flux_plugin_set_name(p: Plugin, name: *const c_char) -> c_int;
    /// Registers `cb` for `topic` (a glob).
    pub fn flux_plugin_add_handler(
        p: Plugin,
        topic: *const c_char,
        cb: Handler,
        arg: *mut c_void,
    ) -> c_int;
    /// The plugin's configuration as JSON (`plugin.load { conf = … }`), or NULL.
    pub fn flux_plugin_get_conf(p: Plugin) -> *const c_char;
    /// The shell that loaded the plugin.
    pub fn flux_plugin_get_shell(p: Plugin) -> Shell;
    /// A shell option as JSON (caller frees): 1 when set, 0 when not, -1 on error.
    pub fn flux_shell_getopt(shell: Shell, name: *const c_char, json: *mut *mut c_char) -> c_int;
    /// Sets a shell option from JSON (NULL unsets it).
    pub fn flux_shell_setopt(shell: Shell, name: *const c_char, json: *const c_char) -> c_int;
    /// A variable of the job's environment, or NULL.
    pub fn flux_shell_getenv(shell: Shell, name: *const c_char) -> *const c_char;
    /// A shell rank's info as JSON (caller frees), -1 for this shell: `ntasks`,
    /// `taskids`, `resources: {cores, gpus}`.
    pub fn flux_shell_get_rank_info(shell: Shell, rank: c_int, json: *mut *mut c_char) -> c_int;
    /// The shell's info as JSON (caller frees): `jobid`, `rank`, `jobspec` (whose
    /// `tasks[0].command` says whether the job runs a Flux broker), `R`, …
    pub fn flux_shell_get_info(shell: Shell, json: *mut *mut c_char) -> c_int;
    /// The task being initialized or started (in `task.*` callbacks).
    pub fn flux_shell_current_task(shell: Shell) -> Task;
    /// A task's info as JSON (caller frees): `localid`, `rank`, …
    pub fn flux_shell_task_get_info(task: Task, json: *mut *mut c_char) -> c_int;
    /// The task's command (its environment is set on it in `task.init`).
    pub fn flux_shell_task_cmd(task: Task) -> Cmd;
    /// Sets a variable of a command's environment (printf-style).
    pub fn flux_cmd_setenvf(
        cmd: Cmd,
        overwrite: c_int,
        name: *const c_char,
        fmt: *const c_char,
        ...
    ) -> c_int;
    /// Unsets a variable of a command's environment.
    pub fn flux_cmd_unsetenv(cmd: Cmd, name: *const c_char);
    /// Argument `n` of a command (`NULL` past the last; owned by the command).
    pub fn flux_cmd_arg(cmd: Cmd, n: c_int) -> *const c_char;
}

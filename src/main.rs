//! The `binder` executable: parse arguments, run, map errors to exit codes.
use clap::Parser;

use binder::{cli::Cli, config::Config, exit_code, launch::ProcessEnv};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap's usage errors would exit 2, which a task could mean; binder's is 125.
            let code = if e.use_stderr() {
                exit_code::REFUSED
            } else {
                exit_code::SUCCESS
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let report_env = std::env::var("BINDER_REPORT").ok();
    let result = Config::from_cli(cli, report_env.as_deref()).and_then(|config| {
        binder::run(
            &config,
            &ProcessEnv,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        )
    });
    if let Err(err) = result {
        if err.is_broken_pipe() {
            std::process::exit(exit_code::SUCCESS);
        }
        eprintln!("binder: {err}");
        std::process::exit(err.exit_code());
    }
}

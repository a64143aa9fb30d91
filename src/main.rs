//! The `binder` executable: parse arguments, run, map errors to exit codes.
use clap::Parser;

use binder::{cli::Cli, config::Config, exit_code, identity::ProcessEnv, report};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap's own output, exit 0.
            let _ = e.print();
            std::process::exit(exit_code::SUCCESS);
        }
        Err(e) => {
            // clap's usage errors would exit 2, which a task could mean; binder's is 125,
            // on one line like every other refusal.
            report::emit(&mut std::io::stderr(), &binder::cli::one_line(&e));
            std::process::exit(exit_code::REFUSED);
        }
    };
    if let Some(binder::cli::Action::Generate { what }) = cli.action {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(&binder::cli::generated(what));
        std::process::exit(exit_code::SUCCESS);
    }
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
        report::emit(&mut std::io::stderr(), &err.to_string());
        std::process::exit(err.exit_code());
    }
}

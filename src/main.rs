//! The `binder` executable: parse arguments, run, map errors to exit codes.
use clap::Parser;

fn main() {
    let cli = match binder::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                binder::exit_code::REFUSED
            } else {
                binder::exit_code::SUCCESS
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(err) = binder::run(cli, &mut out) {
        if err.is_broken_pipe() {
            std::process::exit(binder::exit_code::SUCCESS);
        }
        eprintln!("binder: {err}");
        std::process::exit(err.exit_code());
    }
}

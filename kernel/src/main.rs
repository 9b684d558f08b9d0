//! The `oxibot` binary: parses the command line, sets up logging, maps errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use oxibot_kernel::launcher;

mod cli;

fn main() -> ExitCode {
    // The launcher mode runs before anything else: it must be cheap and must not log.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|first| first == launcher::SUBCOMMAND) {
        let failure = launcher::exec_plugin(args.collect());
        eprintln!("oxibot: {failure}");
        return ExitCode::from(127);
    }
    let cli = cli::Cli::parse();
    init_logging(cli.wants_logs());
    match cli::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings and errors; info with `--logs`).
fn init_logging(verbose: bool) {
    let fallback = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(fallback));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).init();
}

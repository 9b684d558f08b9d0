//! The `oxibot` binary: runs a bundled plugin when started as one (`oxibot __plugin fs`, a link
//! named `oxibot-tool-fs`; see `oxibot_kernel::bundled`), else parses the command line, sets up
//! logging and maps errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use oxibot_kernel::launcher;

mod cli;

fn main() -> ExitCode {
    // A bundled plugin sets up its own runtime and logging: decided before anything else.
    if let Some(code) = oxibot_kernel::bundled::dispatch() {
        return code;
    }
    // The launcher mode runs before anything else: it must be cheap and must not log.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|first| first == launcher::SUBCOMMAND) {
        let failure = launcher::exec_plugin(args.collect());
        eprintln!("oxibot: {failure}");
        return ExitCode::from(127);
    }
    quiet_on_closed_pipe();
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

/// Output into a pipe whose reader went away (`oxibot status | head -3`) ends the program
/// quietly, as it does for other command-line tools, instead of with a panic and a backtrace.
/// (SIGPIPE stays ignored, so a write to a dead plugin's socket is an error, never a kill.)
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings and errors; info with `--logs`),
/// in colour only on a terminal and never with `NO_COLOR` set: a log file or the journal gets
/// plain text.
fn init_logging(verbose: bool) {
    use std::io::IsTerminal;
    let fallback = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(fallback));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(colour)
        .init();
}

//! Command-line definition and dispatch.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod kernel;
mod tools;

/// oxibot — a personal AI assistant whose tools run as plugin processes.
#[derive(Debug, Parser)]
#[command(name = "oxibot", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and call tool plugins.
    #[command(subcommand)]
    Tools(ToolsCommand),
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// Start every plugin and show its state, pid and tools.
    List {
        #[command(flatten)]
        common: CommonArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool call through the plugin host and print its result.
    ///
    /// Exits with status 1 and prints the error to stderr when the tool reports an error.
    Call {
        /// The tool to call, e.g. `read_file` or `exec`.
        tool: String,
        /// The arguments as a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Give up after this many seconds (default: the tool's own timeout).
        #[arg(long, value_name = "SECS")]
        timeout: Option<f64>,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// Options every kernel command takes.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Config file [default: $OXIBOT_HOME/config.json, else ~/.oxibot/config.json].
    #[arg(long, value_name = "PATH", global = true)]
    config: Option<PathBuf>,
    /// Workspace the tools work in [default: --workspace, else the config's
    /// agents.defaults.workspace when a config file exists, else the current directory].
    #[arg(long, value_name = "PATH", global = true)]
    workspace: Option<PathBuf>,
}

/// Runs the parsed command and returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Tools(ToolsCommand::List { common, json }) => tools::list(&common, json),
        Command::Tools(ToolsCommand::Call { tool, args, timeout, common }) => tools::call(&common, &tool, &args, timeout),
    }
}

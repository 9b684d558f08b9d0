//! Command-line definition and dispatch.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod acp;
mod agent;
mod approvals;
mod background;
mod cron;
mod gateway;
mod import;
mod kernel;
mod local_server;
mod man;
mod markdown;
mod mcp_serve;
mod memory;
mod onboard;
mod plugin_hints;
mod repl;
mod service;
mod spinner;
mod status;
mod stream;
mod tools;
mod turn;
mod typeahead;
mod usage;

/// oxibot — a personal AI assistant whose tools run as plugin processes.
#[derive(Debug, Parser)]
#[command(name = "oxibot", version = env!("OXIBOT_VERSION"), about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Talk to the assistant: one message with -m, or an interactive chat.
    Agent {
        /// Send this message, print the answer and exit.
        #[arg(short, long)]
        message: Option<String>,
        /// Session to talk in (`channel:chat_id`).
        #[arg(short, long, default_value = "cli:direct")]
        session: String,
        /// Print answers as the model writes them, without Markdown styling, even on a terminal.
        #[arg(long)]
        no_markdown: bool,
        /// Show the kernel's logs (info level) on stderr.
        #[arg(long)]
        logs: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Run as an Agent Client Protocol agent over stdio, for editors such as Zed: each
    /// session's workspace is the editor's project directory.
    Acp {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Run the gateway: the daemon that serves the chat channels enabled in the config.
    ///
    /// Stops cleanly on SIGTERM or Ctrl-C. `GET /health` on gateway.host:gateway.port
    /// (default 127.0.0.1:18790) reports the kernel's and every plugin's state.
    Gateway {
        /// Port of the health endpoint (overrides gateway.port).
        #[arg(long)]
        port: Option<u16>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Print a one-time login link for the web UI of the gateway (run `oxibot gateway` first).
    ///
    /// The link signs one browser in (a cookie keeps it) and is good for an hour; run this
    /// again for another browser or when the link has expired.
    Ui {
        /// Port of the gateway (overrides gateway.port).
        #[arg(long)]
        port: Option<u16>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Which tool calls wait for a person's yes: the policy, standing approvals (grant,
    /// revoke), and the log of who or what allowed each recorded call.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Approve senders who asked to talk to the assistant (they received a pairing code).
    #[command(subcommand)]
    Pairing(PairingCommand),
    /// Write a default config and a workspace (existing files are never overwritten).
    Onboard {
        /// Use the local OpenAI-compatible server found on this machine (Ollama, llama.cpp's
        /// server, LM Studio, vLLM): write it into the config as the model's provider.
        #[arg(long)]
        local: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Show config and workspace paths, the model, providers and plugin health.
    Status {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Inspect and call tool plugins.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Scheduled jobs (`<workspace>/cron/jobs.json`): list, add, remove, enable, disable, run.
    ///
    /// A running gateway picks up every change at once.
    #[command(subcommand)]
    Cron(cron::CronCommand),
    /// Bring over another assistant's data: `oxibot import nanobot`.
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Search memory, rebuild its index, and see Dream's changes to SOUL.md, USER.md and
    /// memory/MEMORY.md (a git repository in the workspace).
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Run the gateway as a service of your user: a systemd user unit on Linux, a launchd
    /// agent on macOS.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Token use per day (or per source, cron job, session or model) over the last days, with
    /// the cache hit rate and the cost when `agents.defaults.pricing` gives the models' prices
    /// per million tokens.
    Usage {
        /// How many days back, today included.
        #[arg(long, default_value_t = 7)]
        days: u64,
        /// One row per what: day, source (user, cron, heartbeat, subagent, system), job,
        /// session or model.
        #[arg(long, value_enum, default_value_t = usage::By::Day)]
        by: usage::By,
        /// Same as `--by session`.
        #[arg(long, conflicts_with = "by")]
        by_session: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Offer the assistant to MCP clients: `oxibot mcp serve` (stdio, or `--http ADDR`).
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Print a shell completion script, e.g. `oxibot completions bash > ~/.local/share/bash-completion/completions/oxibot`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff), e.g. `oxibot man | man -l -` or `oxibot man cron add`.
    Man {
        /// The command whose page to print (default: oxibot itself).
        command: Vec<String>,
        /// Write every command's page into this directory instead (e.g. ~/.local/share/man/man1).
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum ServiceCommand {
    /// Write the service definition for `oxibot gateway`, enable it and start it.
    Install {
        /// Only write the definition; do not enable or start it.
        #[arg(long)]
        no_start: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Stop and disable the service and remove its definition.
    Uninstall,
    /// Show whether the service runs.
    Status,
    /// Show the service's log.
    Logs {
        /// Keep showing new lines as they come.
        #[arg(short, long)]
        follow: bool,
    },
}

#[derive(Debug, Subcommand)]
enum PairingCommand {
    /// Let the sender who received this code talk to the assistant.
    Approve {
        /// The code they received, e.g. `K7QX2M`.
        code: String,
    },
    /// Show waiting requests and approved senders.
    List,
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// Search the memory files (MEMORY.md, daily logs, history) and print the best matches.
    Search {
        /// What to look for.
        query: String,
        /// How many matches to print.
        #[arg(short = 'n', long, default_value_t = 5)]
        limit: usize,
        /// Only this kind of memory: core, daily or conversation.
        #[arg(long)]
        category: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Delete the search index and build it again from the memory files.
    Reindex {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// List the most recent Dream changes, newest first.
    Log {
        /// How many to list.
        #[arg(short = 'n', long, default_value_t = 10)]
        limit: usize,
        /// List every commit, not only Dream's.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Show what a change did, as a diff (default: the latest Dream change).
    Show {
        /// The commit (an abbreviated sha is enough).
        sha: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Put the memory files back as they were before a change (recorded as a new commit), or
    /// without a commit as they are in the latest one: after a deletion, the workspace's
    /// repository is re-created from its copy in the data dir.
    Restore {
        /// The commit to undo (see `oxibot memory log`); none: the latest commit's files.
        sha: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Serve the assistant over MCP: a `chat` tool (a real turn in a session), `memory_search`,
    /// and the sessions as resources.
    ///
    /// Over stdio by default (an MCP client starts this command). With `--http` it serves
    /// streamable HTTP at /mcp, and every request needs `Authorization: Bearer <key>`: the key
    /// in OXIBOT_MCP_KEY, else the "mcp" entry of <data dir>/local-secrets.json (made on first
    /// use and shown once).
    Serve {
        /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// The session `chat` talks in when a call names none.
        #[arg(short, long, default_value = "mcp:default")]
        session: String,
        #[command(flatten)]
        common: CommonArgs,
    },
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
    /// Workspace the tools work in [default: the config's agents.defaults.workspace, which
    /// defaults to $OXIBOT_HOME/workspace, i.e. ~/.oxibot/workspace; the same for every command].
    #[arg(long, value_name = "PATH", global = true)]
    workspace: Option<PathBuf>,
}

impl Cli {
    /// Whether the command asked for logs on stderr.
    pub fn wants_logs(&self) -> bool {
        matches!(self.command, Command::Agent { logs: true, .. } | Command::Gateway { .. })
    }
}

/// Runs the parsed command and returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Agent { message, session, no_markdown, logs: _, common } => {
            agent::run(&common, agent::AgentOptions { message, session, no_markdown })
        }
        Command::Acp { common } => acp::run(&common),
        Command::Gateway { port, common } => gateway::run(&common, port),
        Command::Ui { port, common } => gateway::ui(&common, port),
        Command::Approvals(command) => approvals::run(command),
        Command::Pairing(PairingCommand::Approve { code }) => gateway::approve(&code),
        Command::Pairing(PairingCommand::List) => gateway::list(),
        Command::Onboard { common, local } => onboard::run(&common, local),
        Command::Status { common } => status::run(&common),
        Command::Tools(ToolsCommand::List { common, json }) => tools::list(&common, json),
        Command::Tools(ToolsCommand::Call { tool, args, timeout, common }) => {
            tools::call(&common, &tool, &args, timeout)
        }
        Command::Cron(command) => cron::run(command),
        Command::Memory(MemoryCommand::Search { query, limit, category, common }) => {
            memory::search(&common, &query, limit, category.as_deref())
        }
        Command::Memory(MemoryCommand::Reindex { common }) => memory::reindex(&common),
        Command::Import(command) => import::run(command),
        Command::Memory(MemoryCommand::Log { limit, all, common }) => memory::log(&common, limit, all),
        Command::Memory(MemoryCommand::Show { sha, common }) => memory::show(&common, sha.as_deref()),
        Command::Memory(MemoryCommand::Restore { sha, common }) => memory::restore(&common, sha.as_deref()),
        Command::Service(ServiceCommand::Install { no_start, common }) => service::install(&common, no_start),
        Command::Service(ServiceCommand::Uninstall) => service::uninstall(),
        Command::Service(ServiceCommand::Status) => service::status(),
        Command::Service(ServiceCommand::Logs { follow }) => service::logs(follow),
        Command::Usage { days, by, by_session, common } => {
            usage::run(&common, days, if by_session { usage::By::Session } else { by })
        }
        Command::Mcp(McpCommand::Serve { http, session, common }) => {
            mcp_serve::serve(&common, mcp_serve::ServeOptions { http, session })
        }
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "oxibot", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { command, dir } => {
            let top = <Cli as clap::CommandFactory>::command();
            match dir {
                Some(dir) => man::write_all(top, &dir),
                None => man::print(top, &command),
            }
        }
    }
}

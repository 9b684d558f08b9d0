//! `oxibot approvals`: the approval policy and the standing approvals (list, grant, revoke),
//! and the audit trail of who or what allowed each recorded call (`log`), read from the
//! session files.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;
use oxibot_kernel::paths;
use oxibot_kernel::session::SessionStore;
use oxibot_kernel::turn::approval::audit_text;
use oxibot_kernel::turn::approval::standing::{StandingGrant, StandingGrants};
use serde_json::Value;

use super::CommonArgs;
use super::kernel::Setup;

/// `oxibot approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Show the policy (`tools.approval`) and the standing approvals.
    List {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Allow calls of TOOL without asking from now on (a standing approval), all of them or
    /// those whose ARGUMENT matches PATTERN (a glob; for `exec` a pattern never covers a
    /// command with `;`, `&`, `|`, `$`, backticks or redirections unless it is that command).
    Grant {
        /// The tool, or a pattern such as `mcp_github_*`.
        tool: String,
        /// The argument the pattern is about, e.g. `command` or `path`.
        #[arg(long, requires = "pattern")]
        argument: Option<String>,
        /// The glob the argument must match, e.g. `git status*`.
        #[arg(long, requires = "argument")]
        pattern: Option<String>,
    },
    /// Remove a standing approval, named as `list` shows it.
    Revoke {
        /// The approval as `list` shows it, e.g. `exec command==make test`.
        grant: String,
    },
    /// Who or what allowed (or refused) the recorded calls, newest last.
    Log {
        /// How many to show.
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// Runs one `oxibot approvals` command.
pub fn run(command: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    let standing = StandingGrants::in_data_dir(&paths::data_dir());
    let mut out = std::io::stdout().lock();
    match command {
        ApprovalsCommand::List { common } => {
            let setup = Setup::load(&common)?;
            let policy = &setup.settings.config.tools.approval;
            let source =
                if policy.is_default { "the defaults (no tools.approval in the config)" } else { "tools.approval" };
            writeln!(out, "policy ({source}):")?;
            for line in policy.describe() {
                writeln!(out, "  {line}")?;
            }
            writeln!(out, "  in the terminal, ask means: {}", policy.terminal)?;
            writeln!(out, "  no answer within {} s: denied", policy.timeout_secs)?;
            let grants = standing.list();
            writeln!(out, "standing approvals:{}", if grants.is_empty() { " none" } else { "" })?;
            for grant in grants {
                writeln!(out, "  {}", grant.describe())?;
            }
        }
        ApprovalsCommand::Grant { tool, argument, pattern } => {
            let grant = StandingGrant { tool, argument, pattern, exact: false };
            let described = grant.describe();
            standing.add(grant)?;
            writeln!(out, "granted: {described}")?;
        }
        ApprovalsCommand::Revoke { grant } => {
            let removed = standing.revoke(&grant)?;
            if removed == 0 {
                anyhow::bail!("no standing approval is named `{grant}` (see `oxibot approvals list`)");
            }
            writeln!(out, "revoked: {grant}")?;
        }
        ApprovalsCommand::Log { limit, common } => {
            let setup = Setup::load(&common)?;
            let store = SessionStore::for_workspace(&setup.workspace, &paths::data_dir());
            let mut entries = audit_entries(store.dir());
            entries.sort();
            let skip = entries.len().saturating_sub(limit);
            if entries.is_empty() {
                writeln!(out, "no recorded calls")?;
            }
            for (_, line) in entries.into_iter().skip(skip) {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every tool result with an `approval` record in the session files of `dir`, with its time
/// (for ordering) and one line to show.
fn audit_entries(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    let Ok(files) = std::fs::read_dir(dir) else { return entries };
    for file in files.flatten() {
        let Ok(text) = std::fs::read_to_string(file.path()) else { continue };
        let mut session = String::new();
        for line in text.lines() {
            let Ok(message) = serde_json::from_str::<Value>(line) else { continue };
            if let Some(key) = message.get("key").and_then(Value::as_str) {
                session = key.to_owned();
            }
            let Some(record) = message.get("approval") else { continue };
            let at = message.get("timestamp").and_then(Value::as_str).unwrap_or("").to_owned();
            let tool = message.get("name").and_then(Value::as_str).unwrap_or("?");
            entries.push((at.clone(), describe(&at, &session, tool, record)));
        }
    }
    entries
}

fn describe(at: &str, session: &str, tool: &str, record: &Value) -> String {
    let call = record.get("call").and_then(Value::as_str).unwrap_or("");
    format!("{at}  {session}  {tool}  {}  call {}", audit_text(record), call.get(..12).unwrap_or(""))
}

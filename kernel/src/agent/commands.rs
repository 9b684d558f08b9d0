//! Slash commands a user can send in any channel: `/new`, `/stop`, `/help`, `/status`, and
//! the memory commands `/dream`, `/dream-log [sha]`, `/dream-restore [sha]`.

use super::AgentError;
use crate::memory::MemoryActors;
use crate::memory::dream_actor::RunDream;
use crate::memory::git_actor::{GetLog, RestoreCommit, ShowCommit};
use crate::services::Services;
use crate::session::Session;
use crate::turn::budget::estimate_tokens;
use crate::turn::hooks::UsageTotals;

/// A recognised slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Start a fresh conversation.
    New,
    /// Stop the running turn (handled before the session's queue, see `SessionManager`).
    Stop,
    /// List the commands.
    Help,
    /// Show model, usage and context size.
    Status,
    /// Run Dream now.
    Dream,
    /// Show the latest Dream change, or the given commit, as a diff.
    DreamLog(Option<String>),
    /// List recent Dream commits, or undo the given one.
    DreamRestore(Option<String>),
}

impl Command {
    /// Parses a message that is exactly a command (surrounding whitespace allowed); the
    /// memory commands take an optional commit sha.
    pub fn parse(text: &str) -> Option<Command> {
        let mut words = text.split_whitespace();
        let name = words.next()?;
        let argument = words.next().map(str::to_owned);
        if words.next().is_some() {
            return None;
        }
        match (name, argument) {
            ("/new", None) => Some(Command::New),
            ("/stop", None) => Some(Command::Stop),
            ("/help", None) => Some(Command::Help),
            ("/status", None) => Some(Command::Status),
            ("/dream", None) => Some(Command::Dream),
            ("/dream-log", sha) => Some(Command::DreamLog(sha)),
            ("/dream-restore", sha) => Some(Command::DreamRestore(sha)),
            _ => None,
        }
    }
}

/// The help text.
pub const HELP: &str = "Commands:
  /new                  start a new conversation (the current one is archived to memory first)
  /stop                 stop the reply being written
  /status               model, token usage and context size
  /dream                fold recent history into long-term memory now
  /dream-log [sha]      show what Dream last changed (or what commit <sha> changed)
  /dream-restore [sha]  list recent Dream changes, or undo commit <sha>
  /help                 this list";

/// Runs a memory command; `None` when `command` is not one.
pub async fn run_memory(command: &Command, memory: &MemoryActors) -> Option<String> {
    let reply = match command {
        Command::Dream => match memory.dream.send(RunDream).await {
            Ok(Ok(outcome)) => outcome.summary(),
            Ok(Err(error)) => format!("Dream did not run: {error}"),
            Err(_) => "Dream is not available.".to_owned(),
        },
        Command::DreamLog(sha) => match memory.git.send(ShowCommit { sha: sha.clone() }).await {
            Ok(Ok(diff)) => format!(
                "{} {} ({})\n\n{}",
                diff.commit.short,
                diff.commit.message,
                diff.commit.time,
                diff.diff.trim_end()
            ),
            Ok(Err(error)) => format!("Cannot show the change: {error}"),
            Err(_) => "Memory versioning is not available.".to_owned(),
        },
        Command::DreamRestore(None) => {
            match memory.git.send(GetLog { limit: 10, only_prefix: Some("dream:".to_owned()) }).await {
                Ok(Ok(commits)) if commits.is_empty() => "Dream has not changed the memory files yet.".to_owned(),
                Ok(Ok(commits)) => {
                    let lines: Vec<String> =
                        commits.iter().map(|c| format!("  {} {} {}", c.short, c.time, c.message)).collect();
                    format!("Recent Dream changes (undo one with /dream-restore <sha>):\n{}", lines.join("\n"))
                }
                Ok(Err(error)) => format!("Cannot list Dream changes: {error}"),
                Err(_) => "Memory versioning is not available.".to_owned(),
            }
        }
        Command::DreamRestore(Some(sha)) => match memory.git.send(RestoreCommit { sha: sha.clone() }).await {
            Ok(Ok(commit)) => {
                format!("Restored the memory files to before {sha}; recorded as {} ({}).", commit.short, commit.message)
            }
            Ok(Err(error)) => format!("Cannot restore: {error}"),
            Err(_) => "Memory versioning is not available.".to_owned(),
        },
        _ => return None,
    };
    Some(reply)
}

/// Runs a session command against a loaded session and returns the reply text.
pub fn run(
    command: &Command,
    session: &mut Session,
    services: &Services,
    usage: UsageTotals,
) -> Result<String, AgentError> {
    match command {
        Command::Help => Ok(HELP.to_owned()),
        Command::Stop => Ok("Nothing is running.".to_owned()),
        Command::New => {
            // Nothing is deleted: the history the model sees starts after this point.
            session.last_consolidated = session.message_count();
            services.sessions().save_metadata(session).map_err(AgentError::Session)?;
            session.forget_archived();
            Ok("Started a new conversation.".to_owned())
        }
        Command::Status => Ok(status(session, services, usage)),
        Command::Dream | Command::DreamLog(_) | Command::DreamRestore(_) => {
            Ok("This command is handled by the memory actors.".to_owned())
        }
    }
}

/// `Today: …` with every session's use so far today (UTC), and its cost when priced, then
/// what spent it: each source's tokens and prompt-cache hit rate.
fn today_line(services: &Services) -> String {
    use crate::usage::{GroupBy, UsageStore, group};
    let prices = services.settings().prices_or_none();
    let entries = services.usage().entries(chrono::Utc::now().date_naive(), 1);
    let (days, _) = crate::usage::summarise(&entries, &prices);
    let Some(totals) = days.values().next() else { return String::new() };
    let cost = totals.cost.map(|c| format!(", cost {c:.4}")).unwrap_or_default();
    let sources: Vec<String> = group(&entries, &prices, GroupBy::Source)
        .iter()
        .map(|(source, t)| {
            let hit = (t.cached * 100).checked_div(t.prompt).unwrap_or(0);
            format!("{source} {} ({hit}% cached)", t.prompt + t.completion)
        })
        .collect();
    format!(
        "\nToday, all sessions: {} prompt ({} cached), {} completion ({} reasoning) in {} calls{cost}\nToday by source: {}",
        totals.prompt,
        totals.cached,
        totals.completion,
        totals.reasoning,
        totals.calls,
        sources.join(", ")
    )
}

/// The part of every request besides the messages: system prompt, tool definitions and the
/// recent history, by the same estimate as the messages (about 3 bytes per token).
fn fixed_tokens(session: &Session, services: &Services) -> u64 {
    let channel = session.key.split_once(':').map_or(session.key.as_str(), |(channel, _)| channel);
    let bytes = services.system_prompt(channel).len()
        + services.host().tools_json().len()
        + services.builtins().specs_json().len()
        + services.recent_history().map_or(0, |history| history.len());
    (bytes as u64).div_ceil(3)
}

fn status(session: &Session, services: &Services, usage: UsageTotals) -> String {
    let settings = services.settings();
    let defaults = &settings.config.agents.defaults;
    let pending = session.unconsolidated();
    let estimate = estimate_tokens(pending) + fixed_tokens(session, services);
    let budget = defaults.context_window_tokens.saturating_sub(defaults.max_tokens);
    let uptime = services.started().elapsed().as_secs();
    let provider = services.provider();
    let fallbacks = match (provider.fallback_models(), provider.last_fallback()) {
        (models, _) if models.is_empty() => String::new(),
        (models, None) => format!("\nFallback models: {}", models.join(", ")),
        (models, Some(last)) => format!("\nFallback models: {} (last answered: {last})", models.join(", ")),
    };
    let today = today_line(services);
    format!(
        "Model: {} (provider {}){fallbacks}{today}\nSession: {} — {} messages, {} in the current context\nContext: ~{} of {} tokens\nTokens used this session: {} prompt ({} cached), {} completion in {} calls\nUptime: {}h {}m {}s",
        defaults.model,
        services.provider().name(),
        session.key,
        session.message_count(),
        pending.len(),
        estimate,
        budget,
        usage.prompt_tokens,
        usage.cached_tokens,
        usage.completion_tokens,
        usage.calls,
        uptime / 3600,
        uptime / 60 % 60,
        uptime % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_commands_are_recognised() {
        assert_eq!(Command::parse(" /new \n"), Some(Command::New));
        assert_eq!(Command::parse("/stop"), Some(Command::Stop));
        assert_eq!(Command::parse("/new please"), None);
        assert_eq!(Command::parse("tell me about /help"), None);
        assert_eq!(Command::parse("/dream-log"), Some(Command::DreamLog(None)));
        assert_eq!(Command::parse("/dream-restore 1a2b3c4"), Some(Command::DreamRestore(Some("1a2b3c4".into()))));
        assert_eq!(Command::parse("/dream-restore a b"), None);
        assert_eq!(Command::parse("/dream now"), None);
    }
}

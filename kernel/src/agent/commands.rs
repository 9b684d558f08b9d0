//! Slash commands a user can send in any channel: `/new`, `/stop`, `/help`, `/status`.

use super::hooks::UsageTotals;
use super::{Agent, AgentError};
use crate::session::Session;

/// A recognised slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Start a fresh conversation.
    New,
    /// Stop the running turn (handled before the session's queue, see `SessionManager`).
    Stop,
    /// List the commands.
    Help,
    /// Show model, usage and context size.
    Status,
}

impl Command {
    /// Parses a message that is exactly a command (surrounding whitespace allowed).
    pub fn parse(text: &str) -> Option<Command> {
        match text.trim() {
            "/new" => Some(Command::New),
            "/stop" => Some(Command::Stop),
            "/help" => Some(Command::Help),
            "/status" => Some(Command::Status),
            _ => None,
        }
    }
}

/// The help text.
pub const HELP: &str = "Commands:\n  /new     start a new conversation (earlier messages stay in the session file)\n  /stop    stop the reply being written\n  /status  model, token usage and context size\n  /help    this list";

/// Runs a command against a loaded session and returns the reply text.
pub fn run(command: Command, session: &mut Session, agent: &Agent, usage: UsageTotals) -> Result<String, AgentError> {
    match command {
        Command::Help => Ok(HELP.to_owned()),
        Command::Stop => Ok("Nothing is running.".to_owned()),
        Command::New => {
            // Nothing is deleted: the history the model sees starts after this point.
            session.last_consolidated = session.messages.len();
            agent.store.save_metadata(session).map_err(|e| AgentError::Session(e.to_string()))?;
            Ok("Started a new conversation.".to_owned())
        }
        Command::Status => Ok(status(session, agent, usage)),
    }
}

fn status(session: &Session, agent: &Agent, usage: UsageTotals) -> String {
    let defaults = &agent.config.agents.defaults;
    let pending = &session.messages[session.last_consolidated.min(session.messages.len())..];
    let estimate = super::budget::estimate_tokens(pending);
    let budget = defaults.context_window_tokens.saturating_sub(defaults.max_tokens);
    let uptime = agent.started.elapsed().as_secs();
    format!(
        "Model: {} (provider {})\nSession: {} — {} messages, {} in the current context\nContext: ~{} of {} tokens\nTokens used this session: {} prompt ({} cached), {} completion in {} calls\nUptime: {}h {}m {}s",
        defaults.model,
        agent.provider.name(),
        session.key,
        session.messages.len(),
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
    }
}

//! What a message to a session produced, and why it produced nothing: the replies, errors and
//! turn failures the session manager hands its callers, and what a background message asks of
//! its turn.

use crate::memory::consolidator::ConsolidateError;
use crate::provider::Usage;
use crate::session::SessionError;
use crate::turn::runner::RunError;

/// What a message the kernel wrote itself asks of its turn: the cron job it comes from (for
/// the usage log and its budget) and a model of its own (a background source's cheaper one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Background {
    /// The cron job's id.
    pub cron_job: Option<String>,
    /// The model to use instead of the configured one; its fallbacks still follow.
    pub model: Option<String>,
}

/// What a message produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnReply {
    /// The model's answer, and the tokens the turn's model calls used.
    Answer(String, Usage),
    /// A command's output.
    Command(String),
    /// The turn was stopped.
    Stopped,
    /// The message was a redelivery of one already answered, or there was nothing to
    /// resume; nothing to send.
    AlreadyAnswered,
}

impl TurnReply {
    /// The text to show the user.
    pub fn text(&self) -> &str {
        match self {
            TurnReply::Answer(text, _) | TurnReply::Command(text) => text,
            TurnReply::Stopped => "(stopped)",
            TurnReply::AlreadyAnswered => "",
        }
    }
}

/// Why a message could not be handled.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session file could not be read or written.
    #[error("session storage failed: {0}")]
    Session(#[source] SessionError),
    /// The session's archive state could not be brought up to date on load.
    #[error("session storage failed: {0}")]
    Archive(#[source] ConsolidateError),
    /// The session is not loaded (an internal ordering error; the message was not lost).
    #[error("session storage failed: the session is not loaded")]
    NotLoaded,
    /// The turn failed (the error was also stored as the answer).
    #[error(transparent)]
    Turn(TurnFailure),
    /// The conversation does not fit the model's context window, even with long tool results
    /// cut and older messages archived (stored as the answer, too).
    #[error(
        "the conversation no longer fits the model's context window, even with long tool results cut and older \
         messages archived ({0}); send /new to start afresh — the session file and memory keep everything"
    )]
    ContextOverflow(TurnFailure),
    /// The session's actor is gone (kernel shutting down).
    #[error("the session is shutting down")]
    Gone,
}

/// Why a turn produced no outcome.
#[derive(Debug, thiserror::Error)]
pub enum TurnFailure {
    /// The loop failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `/stop` (or Ctrl-C) ended it.
    #[error("the turn was stopped")]
    Stopped,
    /// The turn's task ended without an answer (it panicked).
    #[error("the runner stopped unexpectedly")]
    Lost,
}

impl TurnFailure {
    /// Whether the turn's request did not fit the model's context window.
    pub fn is_overflow(&self) -> bool {
        matches!(self, TurnFailure::Run(error) if error.is_overflow())
    }

    /// Whether that was found by the estimate, before any request was sent.
    pub fn is_estimated_overflow(&self) -> bool {
        matches!(self, TurnFailure::Run(RunError::EstimatedOverflow))
    }
}

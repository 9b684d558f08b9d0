//! What can go wrong: [`TelegramError`] ends the channel, [`ApiError`] is one failed Bot API
//! request. Neither ever shows the bot token.

use std::time::Duration;

/// Why the channel stopped.
#[derive(Debug, thiserror::Error)]
pub enum TelegramError {
    /// The `channels.telegram` section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] oxibot_plugin::chat::SectionError),
    /// The `channels.telegram` section is unusable.
    #[error("invalid channels.telegram config: {0}")]
    Config(String),
    /// The HTTP client could not be set up.
    #[error("cannot set up the http client: {0}")]
    HttpClient(String),
    /// Telegram refused the token.
    #[error("Telegram rejected the bot token (401 Unauthorized); check channels.telegram.token")]
    Unauthorized,
}

/// One Bot API request that did not succeed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Telegram could not be reached, or the answer did not arrive in time.
    #[error("{method}: cannot reach Telegram: {reason}")]
    Network {
        /// The Bot API method.
        method: String,
        /// What went wrong, without the URL (it holds the token).
        reason: String,
    },
    /// Telegram answered `ok: false`.
    #[error("{method}: Telegram answered {code}: {description}")]
    Rejected {
        /// The Bot API method.
        method: String,
        /// `error_code` (the HTTP status).
        code: u16,
        /// Telegram's explanation.
        description: String,
        /// How long Telegram asks us to wait (429 Too Many Requests).
        retry_after: Option<Duration>,
    },
    /// The answer was not what the Bot API promises.
    #[error("{method}: unexpected answer from Telegram: {reason}")]
    Malformed {
        /// The Bot API method.
        method: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A file to upload or a downloaded file could not be read or written.
    #[error("{method}: {reason}")]
    File {
        /// The Bot API method (or `download`).
        method: String,
        /// What went wrong.
        reason: String,
    },
}

impl ApiError {
    /// The HTTP status Telegram answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Rejected { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether Telegram refused the HTML of a message (so plain text may get through).
    pub fn is_bad_html(&self) -> bool {
        matches!(self, ApiError::Rejected { code: 400, description, .. } if description.to_ascii_lowercase().contains("can't parse entities"))
    }

    /// Whether an edit changed nothing (Telegram treats that as an error; we do not).
    pub fn is_not_modified(&self) -> bool {
        matches!(self, ApiError::Rejected { code: 400, description, .. } if description.contains("message is not modified"))
    }

    /// How long Telegram asked us to wait, for a 429.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Rejected { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(code: u16, description: &str) -> ApiError {
        ApiError::Rejected { method: "sendMessage".into(), code, description: description.into(), retry_after: None }
    }

    #[test]
    fn a_400_about_entities_is_bad_html_and_other_400s_are_not() {
        assert!(
            rejected(400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0")
                .is_bad_html()
        );
        assert!(!rejected(400, "Bad Request: chat not found").is_bad_html());
        assert!(!rejected(500, "can't parse entities").is_bad_html());
    }

    #[test]
    fn an_unchanged_edit_is_recognised() {
        assert!(rejected(400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same").is_not_modified());
        assert!(!rejected(400, "Bad Request: message to edit not found").is_not_modified());
    }
}

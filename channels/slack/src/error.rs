//! Why the Slack channel stops: errors that no reconnecting or retrying can fix.

use crate::api::WebError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    /// The `channels.slack` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(WebError),
    /// Slack refused the bot token (`xoxb-…`).
    #[error("slack refused the bot token (channels.slack.botToken): {0}")]
    BotToken(WebError),
    /// Slack refused the app-level token (`xapp-…`, with the `connections:write` scope).
    #[error("slack refused the app token (channels.slack.appToken): {0}")]
    AppToken(WebError),
}

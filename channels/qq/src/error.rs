//! Why the QQ channel stops: errors that no reconnecting or retrying can fix.

use crate::api::ApiError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum QqError {
    /// The `channels.qq` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(ApiError),
    /// QQ refused the app's credentials when asked for an access token.
    #[error("qq refused the bot's credentials (channels.qq.appId, secret): {0}")]
    Credentials(ApiError),
    /// The gateway closed the connection for good (the bot is banned, offline or over its
    /// limits).
    #[error("the qq gateway refuses the bot: close code {code}, {reason}")]
    Refused {
        /// The WebSocket close code.
        code: u16,
        /// QQ's words.
        reason: String,
    },
}

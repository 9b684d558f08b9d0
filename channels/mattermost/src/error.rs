//! Why the Mattermost channel stops: errors that no reconnecting or retrying can fix.

use crate::api::RestError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum MattermostError {
    /// The `channels.mattermost` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(RestError),
    /// The server refused the token.
    #[error("mattermost refused the token (channels.mattermost.token): {0}")]
    Token(RestError),
}

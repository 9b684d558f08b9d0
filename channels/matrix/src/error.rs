//! Why the Matrix channel stops: errors that no reconnecting or retrying can fix.

use crate::api::ApiError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The `channels.matrix` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(ApiError),
    /// The homeserver refused the access token.
    #[error("the homeserver refused the access token (channels.matrix.accessToken): {0}")]
    Token(ApiError),
    /// The homeserver refused the password login.
    #[error("the homeserver refused the login (channels.matrix.password): {0}")]
    Password(ApiError),
    /// The token belongs to another account than `userId`.
    #[error("channels.matrix.userId is {configured} but the access token belongs to {actual}")]
    WrongUser {
        /// `userId` of the config.
        configured: String,
        /// Who `whoami` says the token is.
        actual: String,
    },
}

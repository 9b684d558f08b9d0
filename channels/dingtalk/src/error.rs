//! Why the DingTalk channel stops: errors that no reconnecting or retrying can fix.

use crate::api::ApiError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum DingTalkError {
    /// The `channels.dingtalk` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(ApiError),
    /// DingTalk refused the app's credentials when a Stream connection was registered.
    #[error("dingtalk refused the app credentials (channels.dingtalk.clientId, clientSecret): {0}")]
    Credentials(ApiError),
}

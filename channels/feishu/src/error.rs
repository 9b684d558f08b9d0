//! Why the Feishu channel stops: errors that no reconnecting or retrying can fix.

use crate::api::ApiError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum FeishuError {
    /// The `channels.feishu` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(ApiError),
    /// Feishu refused the app's credentials.
    #[error("feishu refused the app credentials (channels.feishu.appId, appSecret): {0}")]
    Credentials(ApiError),
}

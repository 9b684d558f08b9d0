//! Why the Signal channel stops: errors that no reconnecting or retrying can fix.

use crate::api::DaemonError;
use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// The `channels.signal` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(DaemonError),
}

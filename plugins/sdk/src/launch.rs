//! What the kernel hands a plugin process when it starts it: socket path, token, kernel pid.

use std::path::PathBuf;

use oxibot_proto::{ENV_SOCKET as SOCKET_VAR, ENV_TOKEN as TOKEN_VAR};

/// The launch parameters read from the environment.
#[derive(Debug, Clone)]
pub struct LaunchEnv {
    /// Where the kernel listens for this process.
    pub socket: PathBuf,
    /// The secret that proves this process is the one the kernel started.
    pub token: String,
}

/// Why a plugin cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The process was not started by the kernel.
    #[error(
        "{plugin} is an oxibot plugin and is started by the oxibot kernel, not by hand \
         ({SOCKET_VAR} is not set); try `oxibot tools list` to see it running"
    )]
    NotLaunchedByKernel {
        /// The plugin's name.
        plugin: String,
    },
    /// A channel's config (in `OXIBOT_CHANNEL_CONFIG`) is not JSON.
    #[error("the channel config in OXIBOT_CHANNEL_CONFIG is not valid JSON: {reason}")]
    ChannelConfig {
        /// What the JSON parser said.
        reason: String,
    },
}

impl LaunchEnv {
    /// Reads the launch parameters, or explains that the process was started by hand.
    pub fn from_env(plugin: &str) -> Result<LaunchEnv, LaunchError> {
        let not_launched = || LaunchError::NotLaunchedByKernel { plugin: plugin.to_owned() };
        let socket = std::env::var_os(SOCKET_VAR).filter(|s| !s.is_empty()).ok_or_else(not_launched)?;
        let token = std::env::var(TOKEN_VAR).map_err(|_| not_launched())?;
        Ok(LaunchEnv { socket: PathBuf::from(socket), token })
    }
}

//! The `channels.a2a` config section: where to listen, the bearer keys remote agents present
//! (at least one, on loopback too), how the agent card names the agent, and how long a
//! message may wait for its reply.

use std::time::Duration;

use oxibot_plugin::chat::{ChannelConfig, SectionError};
use oxibot_plugin::serving::Listening;
use serde::Deserialize;

/// Default address: only this machine can connect.
const DEFAULT_HOST: &str = "127.0.0.1";
/// Default port, after the API channel's 18791 and the WebSocket channel's 18792.
const DEFAULT_PORT: u16 = 18793;
/// Default time a message may wait for its reply.
const DEFAULT_TIMEOUT_SECS: u64 = 300;
/// Default time a client has to send a request's headers.
const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 5;
/// Default time a client has to send a request's body.
const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;

/// The channel's settings, read from camelCase or snake_case keys; unknown keys (the
/// gateway's `enabled` and `allowFrom`) are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// The address to listen on.
    pub host: String,
    /// The TCP port to listen on.
    pub port: u16,
    /// The keys a client may present as `Authorization: Bearer`; at least one is required.
    pub keys: Vec<String>,
    /// The URL other agents reach this server at, as the card advertises it; by default
    /// `http://<host>:<port>`.
    pub url: Option<String>,
    /// The agent's name on its card.
    pub name: String,
    /// The agent's description on its card.
    pub description: String,
    /// How long a message waits for its reply before its task fails.
    #[serde(alias = "timeout_secs")]
    pub timeout_secs: u64,
    /// How long a client has to send a request's headers (the connection is closed after).
    #[serde(alias = "header_timeout_secs")]
    pub header_timeout_secs: u64,
    /// How long a client has to send a request's body.
    #[serde(alias = "body_timeout_secs")]
    pub body_timeout_secs: u64,
    /// Most connections open at once.
    #[serde(alias = "max_connections")]
    pub max_connections: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            host: DEFAULT_HOST.to_owned(),
            port: DEFAULT_PORT,
            keys: Vec::new(),
            url: None,
            name: "oxibot".to_owned(),
            description: "A personal AI assistant with tools, memory and scheduled tasks.".to_owned(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            header_timeout_secs: DEFAULT_HEADER_TIMEOUT_SECS,
            body_timeout_secs: DEFAULT_BODY_TIMEOUT_SECS,
            max_connections: oxibot_plugin::serving::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// Without a key any local process, or any agent that finds the port, could use the agent.
    #[error("refusing to serve A2A without a key: set channels.a2a.keys to at least one non-empty key")]
    NoKey,
    /// A zero timeout would fail every task at once.
    #[error("invalid a2a config: timeoutSecs must be at least 1")]
    ZeroTimeout,
}

impl ChannelConfig for Config {
    const CHANNEL: &'static str = "a2a";
    type Error = ConfigError;

    fn check(&self) -> Result<(), ConfigError> {
        if self.keys.is_empty() || self.keys.iter().any(|key| key.trim().is_empty()) {
            return Err(ConfigError::NoKey);
        }
        if self.timeout_secs == 0 {
            return Err(ConfigError::ZeroTimeout);
        }
        Ok(())
    }
}

impl Listening for Config {
    fn address(&self) -> (&str, u16) {
        (&self.host, self.port)
    }
}

impl Config {
    /// The server's public base URL, without a trailing slash.
    pub fn base_url(&self) -> String {
        match &self.url {
            Some(url) if !url.trim().is_empty() => url.trim().trim_end_matches('/').to_owned(),
            _ if self.host.contains(':') => format!("http://[{}]:{}", self.host, self.port),
            _ => format!("http://{}:{}", self.host, self.port),
        }
    }

    /// How long a message waits for its reply.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// How long a client has to send a request's headers (at least a second).
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.max(1))
    }

    /// How long a client has to send a request's body (at least a second).
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_secs.max(1))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn a_section_with_one_key_listens_on_loopback_and_advertises_that_address() {
        let config = Config::load(&json!({"enabled": true, "keys": ["k"]})).unwrap();
        assert_eq!((config.host.as_str(), config.port), ("127.0.0.1", 18793));
        assert_eq!(config.base_url(), "http://127.0.0.1:18793");
        let public = Config::load(&json!({"keys": ["k"], "url": "https://me.example/"})).unwrap();
        assert_eq!(public.base_url(), "https://me.example");
    }

    #[test]
    fn no_key_or_an_empty_key_is_refused_on_loopback_too() {
        for section in [json!({}), json!({"keys": []}), json!({"keys": [" "]}), json!({"host": "localhost"})] {
            let error = Config::load(&section).unwrap_err();
            assert!(error.to_string().starts_with("refusing to serve A2A without a key"), "{error}");
        }
        assert!(matches!(Config::load(&json!({"keys": ["k"], "timeoutSecs": 0})), Err(ConfigError::ZeroTimeout)));
    }
}

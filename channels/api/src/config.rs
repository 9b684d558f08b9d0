//! The `channels.api` config section: where to listen, the API key (required, on loopback
//! too; the gateway fills one in when the config has none), the model name to report, and how
//! long a request may wait.

use std::time::Duration;

use oxibot_plugin::chat::{ChannelConfig, SectionError};
use oxibot_plugin::serving::Listening;
use oxibot_plugin::util::non_empty;
use serde::Deserialize;

/// Default address: only this machine can connect.
const DEFAULT_HOST: &str = "127.0.0.1";
/// Default port, next to the WebSocket channel's 18790.
const DEFAULT_PORT: u16 = 18791;
/// Default model name reported to clients.
const DEFAULT_MODEL: &str = "oxibot";
/// Default time a request may wait for its reply.
const DEFAULT_TIMEOUT_SECS: u64 = 300;
/// Default time a client has to send a request's body.
const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// Default time a client has to send a request's headers: short, so a slow client's connection
/// is closed before it holds a slot for long.
const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 5;

/// The channel's settings, read from camelCase or snake_case keys; unknown keys (such as the
/// gateway's `enabled` or `allowFrom`) are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// The address to listen on.
    pub host: String,
    /// The TCP port to listen on.
    pub port: u16,
    /// The key clients present as `Authorization: Bearer`; required (the gateway passes its
    /// generated one when the config sets none).
    #[serde(alias = "api_key", deserialize_with = "non_empty")]
    pub api_key: Option<String>,
    /// The model name reported in `/v1/models` and in every completion.
    pub model: String,
    /// How long a request waits for its reply before it is answered with 504.
    #[serde(alias = "timeout_secs")]
    pub timeout_secs: u64,
    /// How long a client has to send a request's whole body (408 after).
    #[serde(alias = "body_timeout_secs")]
    pub body_timeout_secs: u64,
    /// How long a client has to send a request's headers (the connection is closed after).
    #[serde(alias = "header_timeout_secs")]
    pub header_timeout_secs: u64,
    /// Most connections open at once; when all are taken, the oldest one not being served
    /// makes room for a newcomer.
    #[serde(alias = "max_connections")]
    pub max_connections: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            host: DEFAULT_HOST.to_owned(),
            port: DEFAULT_PORT,
            api_key: None,
            model: DEFAULT_MODEL.to_owned(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            body_timeout_secs: DEFAULT_BODY_TIMEOUT_SECS,
            header_timeout_secs: DEFAULT_HEADER_TIMEOUT_SECS,
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
    /// Without a key any local process, or any web page the user opens, could use the agent.
    #[error(
        "refusing to serve without an API key: set channels.api.apiKey, or start the channel through `oxibot gateway`, which makes one"
    )]
    NoKey,
    /// A zero timeout would answer every request with 504.
    #[error("invalid api config: timeoutSecs must be at least 1")]
    ZeroTimeout,
}

impl ChannelConfig for Config {
    const CHANNEL: &'static str = "api";
    type Error = ConfigError;

    fn check(&self) -> Result<(), ConfigError> {
        if self.api_key.is_none() {
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
    /// How long a request waits for its reply.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// How long a client has to send a request's body (at least a second).
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_secs.max(1))
    }

    /// How long a client has to send a request's headers (at least a second).
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.max(1))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_section_with_only_a_key_listens_on_loopback_as_oxibot_for_five_minutes() {
        assert_eq!(
            Config::load(&json!({"apiKey": "k"})).unwrap(),
            Config {
                host: "127.0.0.1".into(),
                port: 18791,
                api_key: Some("k".into()),
                model: "oxibot".into(),
                timeout_secs: 300,
                body_timeout_secs: 30,
                header_timeout_secs: 5,
                max_connections: 256
            }
        );
    }

    #[test]
    fn camel_case_and_snake_case_keys_are_both_read() {
        let camel = Config::load(
            &json!({"host": "0.0.0.0", "port": 8000, "apiKey": "k", "model": "m", "timeoutSecs": 5, "enabled": true}),
        )
        .unwrap();
        let snake =
            Config::load(&json!({"host": "0.0.0.0", "port": 8000, "api_key": "k", "model": "m", "timeout_secs": 5}))
                .unwrap();
        assert_eq!(camel, snake);
        assert_eq!(camel.api_key.as_deref(), Some("k"));
        assert_eq!(camel.timeout(), Duration::from_secs(5));
    }

    #[test]
    fn no_key_is_refused_on_loopback_too_with_a_clear_message() {
        let error = Config::load(&json!({})).unwrap_err();
        assert!(
            error.to_string().starts_with("refusing to serve without an API key: set channels.api.apiKey"),
            "{error}"
        );
        assert!(Config::load(&json!({"host": "192.168.1.5", "apiKey": ""})).is_err());
        assert!(Config::load(&json!({"host": "localhost"})).is_err());
        assert!(Config::load(&json!({"host": "::1", "apiKey": "k"})).is_ok());
    }

    #[test]
    fn a_zero_timeout_is_refused() {
        assert!(matches!(Config::load(&json!({"timeoutSecs": 0, "apiKey": "k"})), Err(ConfigError::ZeroTimeout)));
    }
}

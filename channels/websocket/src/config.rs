//! The `channels.websocket` config section: where to listen, which path, and the token every
//! client must present, on loopback too (the gateway fills one in when the config has none).

use oxibot_plugin::chat::{ChannelConfig, SectionError};
use oxibot_plugin::serving::Listening;
use oxibot_plugin::util::non_empty;
use serde::Deserialize;

/// Default address: only this machine can connect.
const DEFAULT_HOST: &str = "127.0.0.1";
/// Default port (the gateway's health endpoint has 18790, the api channel 18791).
const DEFAULT_PORT: u16 = 18792;
/// Default path of the WebSocket endpoint.
const DEFAULT_PATH: &str = "/ws";

/// The channel's settings, read from camelCase or snake_case keys; unknown keys (such as the
/// gateway's `enabled` or `allowFrom`) are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// The address to listen on.
    pub host: String,
    /// The TCP port to listen on.
    pub port: u16,
    /// The secret clients present as `?token=` or `Authorization: Bearer`; required (the
    /// gateway passes its generated one when the config sets none).
    #[serde(deserialize_with = "non_empty")]
    pub token: Option<String>,
    /// The HTTP path the WebSocket upgrade is served on.
    pub path: String,
}

impl Default for Config {
    fn default() -> Config {
        Config { host: DEFAULT_HOST.to_owned(), port: DEFAULT_PORT, token: None, path: DEFAULT_PATH.to_owned() }
    }
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// Without a token any local process, or any web page the user opens, could talk to the
    /// agent.
    #[error(
        "refusing to serve without a token: set channels.websocket.token, or start the channel through `oxibot gateway`, which makes one"
    )]
    NoToken,
    /// The path is not an absolute URL path.
    #[error("invalid websocket path {0:?}: it must start with '/'")]
    Path(String),
}

impl ChannelConfig for Config {
    const CHANNEL: &'static str = "websocket";
    type Error = ConfigError;

    fn check(&self) -> Result<(), ConfigError> {
        if !self.path.starts_with('/') {
            return Err(ConfigError::Path(self.path.clone()));
        }
        if self.token.is_none() {
            return Err(ConfigError::NoToken);
        }
        Ok(())
    }
}

impl Listening for Config {
    fn address(&self) -> (&str, u16) {
        (&self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_section_with_only_a_token_serves_slash_ws_on_loopback() {
        let defaults = Config { host: "127.0.0.1".into(), port: 18792, token: Some("t".into()), path: "/ws".into() };
        assert_eq!(Config::load(&json!({"token": "t"})).unwrap(), defaults);
    }

    #[test]
    fn keys_are_read_and_unknown_keys_are_ignored() {
        let config = Config::load(
            &json!({"host": "0.0.0.0", "port": 9000, "token": "s3cret", "path": "/chat", "allowFrom": ["*"]}),
        )
        .unwrap();
        assert_eq!(
            config,
            Config { host: "0.0.0.0".into(), port: 9000, token: Some("s3cret".into()), path: "/chat".into() }
        );
    }

    #[test]
    fn no_token_is_refused_on_loopback_too() {
        for section in [json!({}), json!({"token": ""}), json!({"host": "0.0.0.0"})] {
            let error = Config::load(&section).unwrap_err();
            assert!(error.to_string().contains("without a token"), "{section}: {error}");
        }
    }

    #[test]
    fn a_path_must_start_with_a_slash() {
        assert!(matches!(Config::load(&json!({"path": "ws", "token": "t"})), Err(ConfigError::Path(_))));
    }
}

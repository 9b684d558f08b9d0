//! The `channels.wecom` config section: the AI bot's id and secret, the welcome message, and
//! where the long connection lives, with nanobot's camelCase keys (snake_case accepted too).

use oxibot_plugin::chat::{SectionError, filled, load_section};
use oxibot_plugin::util::non_empty;
use serde::Deserialize;
use serde_json::Value;

/// Where WeCom's AI bot long connection lives unless the config says otherwise.
pub const DEFAULT_WS_URL: &str = "wss://openws.work.weixin.qq.com";

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The AI bot's id (`botId`), sent when subscribing.
    pub bot_id: String,
    /// The AI bot's long-connection secret.
    pub secret: String,
    /// Sent to a user who opens a chat with the bot; empty for none.
    pub welcome_message: String,
    /// The long connection's URL.
    pub ws_url: String,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.wecom.{0} is missing")]
    Missing(&'static str),
    /// The URL is not a WebSocket URL.
    #[error("channels.wecom.wsUrl must start with ws:// or wss://, not {0:?}")]
    NotWebSocket(String),
}

/// The section as written. `enabled` and `allowFrom` (the kernel's) are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default, alias = "bot_id")]
    bot_id: String,
    #[serde(default)]
    secret: String,
    #[serde(default, alias = "welcome_message")]
    welcome_message: String,
    #[serde(default, alias = "ws_url", deserialize_with = "non_empty")]
    ws_url: Option<String>,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("wecom", section)? };
        let ws_url = raw.ws_url.map_or_else(|| DEFAULT_WS_URL.to_owned(), |url| url.trim().to_owned());
        if !(ws_url.starts_with("ws://") || ws_url.starts_with("wss://")) {
            return Err(ConfigError::NotWebSocket(ws_url));
        }
        Ok(Config {
            bot_id: filled(raw.bot_id).ok_or(ConfigError::Missing("botId"))?,
            secret: filled(raw.secret).ok_or(ConfigError::Missing("secret"))?,
            welcome_message: raw.welcome_message.trim().to_owned(),
            ws_url,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credentials_alone_give_the_official_endpoint_and_no_welcome() {
        let config = Config::from_value(&json!({"botId": "bot1", "secret": "s3cret"})).unwrap();
        assert_eq!(config.ws_url, DEFAULT_WS_URL);
        assert_eq!((config.bot_id.as_str(), config.secret.as_str()), ("bot1", "s3cret"));
        assert!(config.welcome_message.is_empty());
    }

    #[test]
    fn snake_case_keys_are_read_like_camel_case_ones() {
        let section = json!({"bot_id": "bot1", "secret": "s", "welcome_message": "hi", "ws_url": "ws://127.0.0.1:9"});
        let config = Config::from_value(&section).unwrap();
        assert_eq!((config.welcome_message.as_str(), config.ws_url.as_str()), ("hi", "ws://127.0.0.1:9"));
    }

    #[test]
    fn missing_or_wrong_keys_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"botId": "b"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.wecom.secret is missing");
        let error = Config::from_value(&json!({"secret": "s", "allowFrom": ["u"]})).unwrap_err();
        assert_eq!(error.to_string(), "channels.wecom.botId is missing");
        let error = Config::from_value(&json!({"botId": "b", "secret": "s", "wsUrl": "http://x"})).unwrap_err();
        assert!(error.to_string().starts_with("channels.wecom.wsUrl"), "{error}");
        let error = Config::from_value(&json!({"botId": "b", "secret": "s", "welcomeMessage": 3})).unwrap_err();
        assert!(error.to_string().starts_with("invalid channels.wecom.welcomeMessage"), "{error}");
    }
}

//! The `channels.dingtalk` config section: the app's credentials, where DingTalk's open API
//! and Stream gateway live, and nanobot's chat settings, with nanobot's camelCase keys
//! (snake_case accepted too) and its defaults.

use std::path::PathBuf;

use oxibot_plugin::chat::{SectionError, expand_tilde, load_section, media_dir};
use oxibot_plugin::util::non_empty;
use serde::Deserialize;
use serde_json::Value;

/// Where DingTalk's open API lives unless the config says otherwise.
pub const DEFAULT_API_BASE: &str = "https://api.dingtalk.com";

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The app's client id (formerly AppKey): opens Stream connections, gets access tokens.
    pub client_id: String,
    /// The app's client secret (formerly AppSecret).
    pub client_secret: String,
    /// The robot that sends replies: `robotCode`, else the client id (the same for an
    /// enterprise app's robot).
    pub robot_code: String,
    /// The open API base URL (tokens, sending, downloads), without a trailing slash.
    pub api_base: String,
    /// Where `/v1.0/gateway/connections/open` lives, without a trailing slash: `gatewayBase`,
    /// else the API base.
    pub gateway_base: String,
    /// Whether each member of a group chat has a session of their own there.
    pub group_user_isolation: bool,
    /// Whether one-to-one chats are refused with a notice (the robot answers in groups only).
    pub disable_private_chat: bool,
    /// Where pictures, files and videos users send are saved.
    pub media_dir: PathBuf,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.dingtalk.{0} is missing")]
    Missing(&'static str),
}

/// The section as written, before checks and defaults. `enabled`, `allowFrom` (the kernel's)
/// and nanobot's media redirect settings (for files it sends, which this channel does not)
/// are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default, alias = "client_id")]
    client_id: String,
    #[serde(default, alias = "client_secret")]
    client_secret: String,
    #[serde(default, alias = "robot_code", deserialize_with = "non_empty")]
    robot_code: Option<String>,
    #[serde(default, alias = "api_base", deserialize_with = "non_empty")]
    api_base: Option<String>,
    #[serde(default, alias = "gateway_base", deserialize_with = "non_empty")]
    gateway_base: Option<String>,
    #[serde(default, alias = "group_user_isolation")]
    group_user_isolation: bool,
    #[serde(default, alias = "disable_private_chat")]
    disable_private_chat: bool,
    #[serde(default, alias = "media_dir", deserialize_with = "non_empty")]
    media_dir: Option<String>,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("dingtalk", section)? };
        let client_id = required(raw.client_id, "clientId")?;
        let client_secret = required(raw.client_secret, "clientSecret")?;
        let api_base = base(raw.api_base).unwrap_or_else(|| DEFAULT_API_BASE.to_owned());
        let gateway_base = base(raw.gateway_base).unwrap_or_else(|| api_base.clone());
        Ok(Config {
            robot_code: raw.robot_code.map_or_else(|| client_id.clone(), |code| code.trim().to_owned()),
            client_id,
            client_secret,
            api_base,
            gateway_base,
            group_user_isolation: raw.group_user_isolation,
            disable_private_chat: raw.disable_private_chat,
            media_dir: raw.media_dir.map_or_else(|| media_dir("dingtalk"), expand_tilde),
        })
    }
}

fn required(value: String, key: &'static str) -> Result<String, ConfigError> {
    let value = value.trim().to_owned();
    if value.is_empty() { Err(ConfigError::Missing(key)) } else { Ok(value) }
}

/// A base URL without surrounding spaces or a trailing slash; blank means unset.
fn base(configured: Option<String>) -> Option<String> {
    let trimmed = configured?.trim().trim_end_matches('/').to_owned();
    (!trimmed.is_empty()).then_some(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credentials_alone_give_nanobots_defaults() {
        let config = Config::from_value(&json!({"clientId": "ding1", "clientSecret": "s3cret"})).unwrap();
        assert_eq!(config.robot_code, "ding1");
        assert_eq!(config.api_base, DEFAULT_API_BASE);
        assert_eq!(config.gateway_base, DEFAULT_API_BASE);
        assert!(!config.group_user_isolation);
        assert!(!config.disable_private_chat);
        assert!(config.media_dir.ends_with("media/dingtalk"), "{}", config.media_dir.display());
    }

    #[test]
    fn snake_case_keys_are_read_like_camel_case_ones() {
        let section = json!({"client_id": "ding1", "client_secret": "s", "robot_code": "robot9", "api_base": "http://127.0.0.1:9/",
                             "gateway_base": "http://127.0.0.1:8", "group_user_isolation": true, "disable_private_chat": true,
                             "media_dir": "/tmp/m"});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.robot_code, "robot9");
        assert_eq!(config.api_base, "http://127.0.0.1:9");
        assert_eq!(config.gateway_base, "http://127.0.0.1:8");
        assert!(config.group_user_isolation && config.disable_private_chat);
        assert_eq!(config.media_dir, PathBuf::from("/tmp/m"));
    }

    #[test]
    fn the_gateway_lives_at_the_api_base_unless_told_otherwise() {
        let config =
            Config::from_value(&json!({"clientId": "c", "clientSecret": "s", "apiBase": "http://127.0.0.1:7"}))
                .unwrap();
        assert_eq!(config.gateway_base, "http://127.0.0.1:7");
    }

    #[test]
    fn missing_credentials_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"clientId": "c"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.dingtalk.clientSecret is missing");
        let error = Config::from_value(&json!({"clientSecret": "s"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.dingtalk.clientId is missing");
        let error = Config::from_value(&json!({"clientId": "c", "clientSecret": "s", "groupUserIsolation": "yes"}))
            .unwrap_err();
        assert!(error.to_string().starts_with("invalid channels.dingtalk.groupUserIsolation"), "{error}");
    }

    #[test]
    fn nanobots_other_keys_are_accepted_and_ignored() {
        let section = json!({"enabled": true, "clientId": "c", "clientSecret": "s", "allowFrom": ["staff1"],
                             "allowRemoteMediaRedirects": false, "remoteMediaRedirectAllowedHosts": []});
        assert!(Config::from_value(&section).is_ok());
    }
}

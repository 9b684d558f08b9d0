//! The `channels.qq` config section: the bot's app id and secret, how replies are written, the
//! "processing" notice, and where QQ's token endpoint and API live, with nanobot's camelCase
//! keys (snake_case accepted too) and its defaults.

use std::path::PathBuf;

use oxibot_plugin::chat::{SectionError, expand_tilde, filled, load_section, media_dir};
use oxibot_plugin::util::non_empty;
use serde::Deserialize;
use serde_json::Value;

/// Where QQ's bot API lives unless the config says otherwise.
pub const DEFAULT_API_BASE: &str = "https://api.sgroup.qq.com";
/// Where access tokens come from unless the config says otherwise.
pub const DEFAULT_TOKEN_URL: &str = "https://bots.qq.com/app/getAppAccessToken";
/// nanobot's notice sent when a message arrives.
pub const DEFAULT_ACK_MESSAGE: &str = "⏳ Processing...";
/// The largest attachment downloaded, as nanobot's `downloadMaxBytes`.
pub const DEFAULT_DOWNLOAD_MAX_BYTES: u64 = 200 * 1024 * 1024;

/// How replies are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MsgFormat {
    /// Text messages (`msg_type` 0): the Markdown as it is.
    Plain,
    /// Markdown messages (`msg_type` 2), which the bot must be allowed to send.
    Markdown,
}

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The bot's app id.
    pub app_id: String,
    /// The bot's app secret (`secret`).
    pub secret: String,
    /// How replies are written.
    pub msg_format: MsgFormat,
    /// Sent as a reply once the kernel has a message; empty for none.
    pub ack_message: String,
    /// The bot API base URL, without a trailing slash.
    pub api_base: String,
    /// The access token endpoint.
    pub token_url: String,
    /// Where attachments users send are saved.
    pub media_dir: PathBuf,
    /// The largest attachment downloaded, in bytes.
    pub download_max_bytes: u64,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.qq.{0} is missing")]
    Missing(&'static str),
}

/// The section as written. `enabled`, `allowFrom` (the kernel's) and `downloadChunkSize` are
/// ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default, alias = "app_id")]
    app_id: String,
    #[serde(default)]
    secret: String,
    #[serde(default = "plain", alias = "msg_format")]
    msg_format: MsgFormat,
    #[serde(default, alias = "ack_message")]
    ack_message: Option<String>,
    #[serde(default, alias = "api_base", deserialize_with = "non_empty")]
    api_base: Option<String>,
    #[serde(default, alias = "token_url", deserialize_with = "non_empty")]
    token_url: Option<String>,
    #[serde(default, alias = "media_dir", deserialize_with = "non_empty")]
    media_dir: Option<String>,
    #[serde(default, alias = "download_max_bytes")]
    download_max_bytes: Option<u64>,
}

fn plain() -> MsgFormat {
    MsgFormat::Plain
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let section = if section.is_null() { &Value::Object(serde_json::Map::new()) } else { section };
        let raw: Raw = load_section("qq", section)?;
        let base = |url: Option<String>, default: &str| {
            url.map(|url| url.trim().trim_end_matches('/').to_owned())
                .filter(|url| !url.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Ok(Config {
            app_id: filled(raw.app_id).ok_or(ConfigError::Missing("appId"))?,
            secret: filled(raw.secret).ok_or(ConfigError::Missing("secret"))?,
            msg_format: raw.msg_format,
            ack_message: raw.ack_message.map_or_else(|| DEFAULT_ACK_MESSAGE.to_owned(), |text| text.trim().to_owned()),
            api_base: base(raw.api_base, DEFAULT_API_BASE),
            token_url: base(raw.token_url, DEFAULT_TOKEN_URL),
            media_dir: raw.media_dir.map_or_else(|| media_dir("qq"), expand_tilde),
            download_max_bytes: raw.download_max_bytes.unwrap_or(DEFAULT_DOWNLOAD_MAX_BYTES),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credentials_alone_give_nanobots_defaults() {
        let config = Config::from_value(&json!({"appId": "102", "secret": "s3cret"})).unwrap();
        assert_eq!(config.msg_format, MsgFormat::Plain);
        assert_eq!(config.ack_message, DEFAULT_ACK_MESSAGE);
        assert_eq!((config.api_base.as_str(), config.token_url.as_str()), (DEFAULT_API_BASE, DEFAULT_TOKEN_URL));
        assert!(config.media_dir.ends_with("media/qq"), "{}", config.media_dir.display());
        assert_eq!(config.download_max_bytes, DEFAULT_DOWNLOAD_MAX_BYTES);
    }

    #[test]
    fn nanobots_own_section_is_read_with_snake_case_keys_too() {
        let section = json!({"enabled": false, "app_id": "102", "secret": "s", "allowFrom": [], "msg_format": "markdown",
                             "ack_message": "", "mediaDir": "/tmp/q", "downloadChunkSize": 262144,
                             "downloadMaxBytes": 1024, "apiBase": "http://127.0.0.1:9/", "tokenUrl": "http://127.0.0.1:8/t"});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.msg_format, MsgFormat::Markdown);
        assert!(config.ack_message.is_empty());
        assert_eq!(
            (config.api_base.as_str(), config.token_url.as_str()),
            ("http://127.0.0.1:9", "http://127.0.0.1:8/t")
        );
        assert_eq!((config.media_dir, config.download_max_bytes), (PathBuf::from("/tmp/q"), 1024));
    }

    #[test]
    fn missing_or_wrong_keys_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"appId": "102"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.qq.secret is missing");
        let error = Config::from_value(&json!({"secret": "s"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.qq.appId is missing");
        let error = Config::from_value(&json!({"appId": "1", "secret": "s", "msgFormat": "html"})).unwrap_err();
        assert!(error.to_string().starts_with("invalid channels.qq.msgFormat"), "{error}");
    }
}

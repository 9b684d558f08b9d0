//! The `channels.discord` config section: keys as nanobot writes them (camelCase), snake_case
//! accepted too, with Discord's defaults.

use std::path::PathBuf;

use oxibot_plugin::chat::{expand_tilde, load_section, media_dir};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::DiscordError;

/// Where the Gateway is when the config does not say.
pub const DEFAULT_GATEWAY_URL: &str = "wss://gateway.discord.gg/?v=10&encoding=json";
/// Where the REST API is when the config does not say.
pub const DEFAULT_API_BASE: &str = "https://discord.com/api/v10";
/// GUILDS (1) + GUILD_MESSAGES (512) + DIRECT_MESSAGES (4096) + MESSAGE_CONTENT (32768).
pub const DEFAULT_INTENTS: u64 = 1 | 1 << 9 | 1 << 12 | 1 << 15;

/// Which guild messages the channel submits. Direct messages always pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Only messages that mention the bot (the mention is stripped).
    #[default]
    Mention,
    /// Every message in every allowed channel.
    Open,
}

/// The channel's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The bot token (without the `Bot ` prefix).
    #[serde(default)]
    pub token: String,
    /// The Gateway's WebSocket URL, with its `v` and `encoding` query.
    #[serde(default = "default_gateway_url", alias = "gateway_url")]
    pub gateway_url: String,
    /// The REST API's base URL, without a trailing slash.
    #[serde(default = "default_api_base", alias = "api_base")]
    pub api_base: String,
    /// The Gateway intents to identify with.
    #[serde(default = "default_intents")]
    pub intents: u64,
    /// Guild channels to listen in; empty means all of them.
    #[serde(default, alias = "allow_channels", deserialize_with = "snowflakes")]
    pub allow_channels: Vec<String>,
    /// Which guild messages are submitted.
    #[serde(default, alias = "group_policy")]
    pub group_policy: GroupPolicy,
    /// Where downloaded attachments go; `None` means the default under the data directory.
    #[serde(default, alias = "media_dir")]
    pub media_dir: Option<PathBuf>,
}

impl Config {
    /// Reads the config section; a missing token is an error.
    pub fn from_value(section: &Value) -> Result<Config, DiscordError> {
        let mut config: Config = load_section("discord", section)?;
        config.token = config.token.trim().trim_start_matches("Bot ").trim().to_owned();
        if config.token.is_empty() {
            return Err(DiscordError::Config("`token` is missing".to_owned()));
        }
        config.api_base = config.api_base.trim_end_matches('/').to_owned();
        Ok(config)
    }

    /// The directory for downloaded attachments: `mediaDir` (with `~` expanded), else
    /// `$OXIBOT_HOME/media/discord`, else `~/.oxibot/media/discord`.
    pub fn media_dir(&self) -> PathBuf {
        match &self.media_dir {
            Some(dir) => expand_tilde(dir),
            None => media_dir("discord"),
        }
    }
}

fn default_gateway_url() -> String {
    DEFAULT_GATEWAY_URL.to_owned()
}

fn default_api_base() -> String {
    DEFAULT_API_BASE.to_owned()
}

fn default_intents() -> u64 {
    DEFAULT_INTENTS
}

/// Ids written as strings or as bare numbers, both read as strings.
fn snowflakes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let values = Option::<Vec<Value>>::deserialize(deserializer)?.unwrap_or_default();
    let id = |value: Value| match value {
        Value::String(text) => Ok(text.trim().to_owned()),
        Value::Number(number) => Ok(number.to_string()),
        other => Err(serde::de::Error::custom(format!("a channel id must be a string or a number, not {other}"))),
    };
    values.into_iter().map(id).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_default_intents_are_guild_and_direct_messages_with_their_content() {
        assert_eq!(DEFAULT_INTENTS, 37377);
    }

    #[test]
    fn a_config_with_only_a_token_takes_discord_defaults() {
        let config = Config::from_value(&json!({"token": "abc", "enabled": true, "allowFrom": ["1"]})).unwrap();
        assert_eq!(config.token, "abc");
        assert_eq!(config.gateway_url, DEFAULT_GATEWAY_URL);
        assert_eq!(config.api_base, DEFAULT_API_BASE);
        assert_eq!(config.intents, DEFAULT_INTENTS);
        assert!(config.allow_channels.is_empty());
        assert_eq!(config.group_policy, GroupPolicy::Mention);
    }

    #[test]
    fn camel_case_and_snake_case_keys_are_both_read() {
        let camel = json!({"token": "t", "gatewayUrl": "ws://g", "apiBase": "http://a/", "allowChannels": ["1", 2], "groupPolicy": "open", "mediaDir": "/m"});
        let snake = json!({"token": "t", "gateway_url": "ws://g", "api_base": "http://a/", "allow_channels": ["1", 2], "group_policy": "open", "media_dir": "/m"});
        for section in [camel, snake] {
            let config = Config::from_value(&section).unwrap();
            assert_eq!(config.gateway_url, "ws://g");
            assert_eq!(config.api_base, "http://a");
            assert_eq!(config.allow_channels, ["1", "2"]);
            assert_eq!(config.group_policy, GroupPolicy::Open);
            assert_eq!(config.media_dir(), PathBuf::from("/m"));
        }
    }

    #[test]
    fn a_missing_token_or_an_unknown_group_policy_is_refused() {
        assert!(Config::from_value(&json!({})).unwrap_err().to_string().contains("token"));
        assert!(Config::from_value(&json!({"token": "t", "groupPolicy": "sometimes"})).is_err());
    }

    #[test]
    fn a_token_written_with_its_bot_prefix_is_used_without_it() {
        assert_eq!(Config::from_value(&json!({"token": "Bot xyz"})).unwrap().token, "xyz");
    }
}

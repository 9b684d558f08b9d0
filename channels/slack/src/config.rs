//! The `channels.slack` config section: tokens, the Web API base and the reply policies, with
//! nanobot's camelCase keys (snake_case accepted too) and its defaults.

pub use oxibot_plugin::chat::GroupPolicy;
use oxibot_plugin::chat::{DEFAULT_REACT_EMOJI, SectionError, emoji_name, load_section};
use serde::Deserialize;
use serde_json::Value;

/// Where the Web API lives unless the config says otherwise.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `xoxb-…`: calls the Web API as the bot.
    pub bot_token: String,
    /// `xapp-…`: opens Socket Mode connections.
    pub app_token: String,
    /// The Web API base URL, without a trailing slash.
    pub api_base: String,
    /// Which channel messages are submitted.
    pub group_policy: GroupPolicy,
    /// Whether a reply to a channel message goes into the message's thread.
    pub reply_in_thread: bool,
    /// Whether each thread of a channel is its own session (`<channel>:<thread_ts>`).
    pub thread_sessions: bool,
    /// Whether direct messages are submitted at all.
    pub dm_enabled: bool,
    /// The reaction added to a message the kernel accepted; `None` adds none.
    pub react_emoji: Option<String>,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required token is absent or empty.
    #[error("channels.slack.{0} is missing")]
    Missing(&'static str),
    /// `groupPolicy` names no known policy.
    #[error("channels.slack.groupPolicy must be \"mention\", \"open\" or \"allowlist\", not {0:?}")]
    UnknownGroupPolicy(String),
}

/// The section as written, before checks and defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default, alias = "bot_token")]
    bot_token: String,
    #[serde(default, alias = "app_token")]
    app_token: String,
    #[serde(default, alias = "api_base")]
    api_base: Option<String>,
    #[serde(default, alias = "group_policy")]
    group_policy: Option<String>,
    #[serde(default, alias = "group_allow_from")]
    group_allow_from: Vec<String>,
    #[serde(default, alias = "reply_in_thread")]
    reply_in_thread: Option<bool>,
    #[serde(default, alias = "thread_sessions")]
    thread_sessions: bool,
    #[serde(default, alias = "react_emoji")]
    react_emoji: Option<String>,
    #[serde(default)]
    dm: RawDm,
}

/// The `dm` subsection (nanobot's `dm.enabled`; its allow list is the kernel's business).
#[derive(Debug, Default, Deserialize)]
struct RawDm {
    #[serde(default)]
    enabled: Option<bool>,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("slack", section)? };
        let bot_token = required(raw.bot_token, "botToken")?;
        let app_token = required(raw.app_token, "appToken")?;
        let api_base =
            raw.api_base.filter(|base| !base.trim().is_empty()).unwrap_or_else(|| DEFAULT_API_BASE.to_owned());
        Ok(Config {
            bot_token,
            app_token,
            api_base: api_base.trim().trim_end_matches('/').to_owned(),
            group_policy: group_policy(raw.group_policy.as_deref(), raw.group_allow_from)?,
            reply_in_thread: raw.reply_in_thread.unwrap_or(true),
            thread_sessions: raw.thread_sessions,
            dm_enabled: raw.dm.enabled.unwrap_or(true),
            react_emoji: emoji_name(raw.react_emoji, DEFAULT_REACT_EMOJI),
        })
    }
}

fn required(token: String, key: &'static str) -> Result<String, ConfigError> {
    let token = token.trim().to_owned();
    if token.is_empty() { Err(ConfigError::Missing(key)) } else { Ok(token) }
}

fn group_policy(name: Option<&str>, allow_from: Vec<String>) -> Result<GroupPolicy, ConfigError> {
    match name.map(str::trim).unwrap_or("mention") {
        "" | "mention" => Ok(GroupPolicy::Mention),
        "open" => Ok(GroupPolicy::Open),
        "allowlist" => Ok(GroupPolicy::Allowlist(allow_from)),
        other => Err(ConfigError::UnknownGroupPolicy(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_alone_give_nanobots_defaults() {
        let config = Config::from_value(&json!({"botToken": "xoxb-1", "appToken": "xapp-1"})).unwrap();
        assert_eq!(config.api_base, DEFAULT_API_BASE);
        assert_eq!(config.group_policy, GroupPolicy::Mention);
        assert!(config.reply_in_thread);
        assert!(!config.thread_sessions);
        assert!(config.dm_enabled);
        assert_eq!(config.react_emoji.as_deref(), Some("eyes"));
    }

    #[test]
    fn snake_case_keys_are_read_like_camel_case_ones() {
        let section = json!({"bot_token": "xoxb-1", "app_token": "xapp-1", "api_base": "http://127.0.0.1:9/api/", "group_policy": "open",
                             "reply_in_thread": false, "thread_sessions": true, "react_emoji": ":thumbsup:", "dm": {"enabled": false}});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.api_base, "http://127.0.0.1:9/api");
        assert_eq!(config.group_policy, GroupPolicy::Open);
        assert!(!config.reply_in_thread);
        assert!(config.thread_sessions);
        assert!(!config.dm_enabled);
        assert_eq!(config.react_emoji.as_deref(), Some("thumbsup"));
    }

    #[test]
    fn an_allowlist_policy_carries_the_allowed_channels_and_an_empty_emoji_adds_no_reaction() {
        let section = json!({"botToken": "b", "appToken": "a", "groupPolicy": "allowlist", "groupAllowFrom": ["C1"], "reactEmoji": ""});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.group_policy, GroupPolicy::Allowlist(vec!["C1".into()]));
        assert_eq!(config.react_emoji, None);
    }

    #[test]
    fn a_missing_token_or_an_unknown_policy_is_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"botToken": "xoxb-1"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.slack.appToken is missing");
        let error = Config::from_value(&json!({})).unwrap_err();
        assert_eq!(error.to_string(), "channels.slack.botToken is missing");
        let error = Config::from_value(&json!({"botToken": "b", "appToken": "a", "groupPolicy": "all"})).unwrap_err();
        assert!(error.to_string().contains("not \"all\""), "{error}");
    }

    #[test]
    fn unknown_keys_such_as_enabled_and_allow_from_are_ignored() {
        let section = json!({"enabled": true, "mode": "socket", "allowFrom": ["U1"], "botToken": "b", "appToken": "a"});
        assert!(Config::from_value(&section).is_ok());
    }
}

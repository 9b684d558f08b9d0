//! The `channels.mattermost` config section: the server, the bot token and the reply policies,
//! with nanobot's camelCase keys (snake_case accepted too) and its defaults.

use std::path::PathBuf;

pub use oxibot_plugin::chat::GroupPolicy;
use oxibot_plugin::chat::{
    DEFAULT_REACT_EMOJI, DmSection, SectionError, emoji_name, expand_tilde, load_section, media_dir,
};
use serde::Deserialize;
use serde_json::Value;

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The server's base URL (`https://chat.example.com`), without a trailing slash; the
    /// WebSocket is `/api/v4/websocket` of the same server.
    pub server_url: String,
    /// The bot account's access token.
    pub token: String,
    /// When set, posts of other teams' channels are left out.
    pub team_id: Option<String>,
    /// Which channel posts outside threads are submitted.
    pub group_policy: GroupPolicy,
    /// Which channel posts inside threads are submitted.
    pub group_policy_in_thread: GroupPolicy,
    /// Whether a reply to a channel post goes into its thread (one session per thread).
    pub reply_in_thread: bool,
    /// Whether streamed replies are shown as they grow (by editing one post).
    pub streaming: bool,
    /// The reaction added to a post the kernel accepted; `None` adds none.
    pub react_emoji: Option<String>,
    /// Whether direct messages are submitted at all.
    pub dm_enabled: bool,
    /// With `dm.policy: "allowlist"`, the user ids whose direct messages are submitted.
    pub dm_allow_from: Option<Vec<String>>,
    /// Where the channel keeps its WebSocket resume point.
    pub media_dir: PathBuf,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.mattermost.{0} is missing")]
    Missing(&'static str),
    /// `serverUrl` is not an http(s) URL.
    #[error("channels.mattermost.serverUrl must start with http:// or https://, not {0:?}")]
    BadServerUrl(String),
    /// A policy key names no known policy.
    #[error("channels.mattermost.{key} must be one of {allowed}, not {value:?}")]
    UnknownPolicy {
        /// The key.
        key: &'static str,
        /// What it may be.
        allowed: &'static str,
        /// What it is.
        value: String,
    },
}

/// The section as written, before checks and defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Raw {
    #[serde(alias = "server_url")]
    server_url: String,
    token: String,
    #[serde(alias = "team_id")]
    team_id: String,
    #[serde(alias = "group_policy")]
    group_policy: Option<String>,
    #[serde(alias = "group_policy_in_thread")]
    group_policy_in_thread: Option<String>,
    #[serde(alias = "group_allow_from")]
    group_allow_from: Vec<String>,
    #[serde(alias = "reply_in_thread")]
    reply_in_thread: Option<bool>,
    streaming: Option<bool>,
    #[serde(alias = "react_emoji")]
    react_emoji: Option<String>,
    #[serde(alias = "media_dir")]
    media_dir: Option<String>,
    dm: DmSection,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("mattermost", section)? };
        let server_url = raw.server_url.trim().trim_end_matches('/').to_owned();
        if server_url.is_empty() {
            return Err(ConfigError::Missing("serverUrl"));
        }
        if !server_url.starts_with("http://") && !server_url.starts_with("https://") {
            return Err(ConfigError::BadServerUrl(server_url));
        }
        let token = raw.token.trim().to_owned();
        if token.is_empty() {
            return Err(ConfigError::Missing("token"));
        }
        let in_channels = group_policy("groupPolicy", raw.group_policy.as_deref(), &raw.group_allow_from)?;
        let in_threads = match raw.group_policy_in_thread.as_deref() {
            Some(name) => group_policy("groupPolicyInThread", Some(name), &raw.group_allow_from)?,
            None => in_channels.clone(),
        };
        let dm_allow_from = match raw.dm.policy.as_deref().map(str::trim) {
            None | Some("") | Some("open") => None,
            Some("allowlist") => Some(raw.dm.allow_from),
            Some(other) => {
                let value = other.to_owned();
                return Err(ConfigError::UnknownPolicy {
                    key: "dm.policy",
                    allowed: "\"open\" or \"allowlist\"",
                    value,
                });
            }
        };
        Ok(Config {
            server_url,
            token,
            team_id: Some(raw.team_id.trim().to_owned()).filter(|team| !team.is_empty()),
            group_policy: in_channels,
            group_policy_in_thread: in_threads,
            reply_in_thread: raw.reply_in_thread.unwrap_or(true),
            streaming: raw.streaming.unwrap_or(true),
            react_emoji: emoji_name(raw.react_emoji, DEFAULT_REACT_EMOJI),
            dm_enabled: raw.dm.enabled.unwrap_or(true),
            dm_allow_from,
            media_dir: raw
                .media_dir
                .filter(|dir| !dir.trim().is_empty())
                .map_or_else(|| media_dir("mattermost"), expand_tilde),
        })
    }

    /// The WebSocket URL: the server's, with `ws`/`wss` for `http`/`https`.
    pub fn websocket_url(&self) -> String {
        let url = match self.server_url.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => format!("ws://{}", self.server_url.trim_start_matches("http://")),
        };
        format!("{url}/api/v4/websocket")
    }
}

fn group_policy(key: &'static str, name: Option<&str>, allow_from: &[String]) -> Result<GroupPolicy, ConfigError> {
    match name.map(str::trim).unwrap_or("mention") {
        "" | "mention" => Ok(GroupPolicy::Mention),
        "open" => Ok(GroupPolicy::Open),
        "allowlist" => Ok(GroupPolicy::Allowlist(allow_from.to_vec())),
        other => Err(ConfigError::UnknownPolicy {
            key,
            allowed: "\"mention\", \"open\" or \"allowlist\"",
            value: other.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_server_and_a_token_alone_give_nanobots_defaults() {
        let config = Config::from_value(&json!({"serverUrl": "https://chat.example.com/", "token": "t"})).unwrap();
        assert_eq!(config.server_url, "https://chat.example.com");
        assert_eq!(config.websocket_url(), "wss://chat.example.com/api/v4/websocket");
        assert_eq!(config.team_id, None);
        assert_eq!(config.group_policy, GroupPolicy::Mention);
        assert_eq!(config.group_policy_in_thread, GroupPolicy::Mention);
        assert!(config.reply_in_thread && config.streaming && config.dm_enabled);
        assert_eq!(config.react_emoji.as_deref(), Some("eyes"));
        assert_eq!(config.dm_allow_from, None);
    }

    #[test]
    fn snake_case_keys_are_read_like_camel_case_ones() {
        let section = json!({"server_url": "http://127.0.0.1:9", "token": "t", "team_id": "T1", "group_policy": "open",
                             "group_policy_in_thread": "mention", "reply_in_thread": false, "streaming": false,
                             "react_emoji": ":+1:", "dm": {"enabled": false, "policy": "allowlist", "allow_from": ["u1"]}});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.websocket_url(), "ws://127.0.0.1:9/api/v4/websocket");
        assert_eq!(config.team_id.as_deref(), Some("T1"));
        assert_eq!(config.group_policy, GroupPolicy::Open);
        assert_eq!(config.group_policy_in_thread, GroupPolicy::Mention);
        assert!(!config.reply_in_thread && !config.streaming && !config.dm_enabled);
        assert_eq!(config.react_emoji.as_deref(), Some("+1"));
        assert_eq!(config.dm_allow_from, Some(vec!["u1".to_owned()]));
    }

    #[test]
    fn the_thread_policy_follows_the_group_policy_unless_set() {
        let section =
            json!({"serverUrl": "http://h", "token": "t", "groupPolicy": "allowlist", "groupAllowFrom": ["c1"]});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.group_policy_in_thread, GroupPolicy::Allowlist(vec!["c1".into()]));
        assert!(config.group_policy.admits("c1", false) && !config.group_policy.admits("c2", true));
    }

    #[test]
    fn missing_or_malformed_keys_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"token": "t"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.mattermost.serverUrl is missing");
        let error = Config::from_value(&json!({"serverUrl": "http://h"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.mattermost.token is missing");
        let error = Config::from_value(&json!({"serverUrl": "chat.example.com", "token": "t"})).unwrap_err();
        assert!(error.to_string().contains("channels.mattermost.serverUrl"), "{error}");
        let error = Config::from_value(&json!({"serverUrl": "http://h", "token": "t", "groupPolicyInThread": "x"}))
            .unwrap_err();
        assert!(error.to_string().starts_with("channels.mattermost.groupPolicyInThread must be"), "{error}");
        let error =
            Config::from_value(&json!({"serverUrl": "http://h", "token": "t", "streaming": "yes"})).unwrap_err();
        assert!(error.to_string().contains("channels.mattermost.streaming"), "{error}");
    }
}

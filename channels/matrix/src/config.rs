//! The `channels.matrix` config section: the homeserver, the account and its access token, and
//! which room messages reach the kernel, with nanobot's camelCase keys (snake_case accepted).

use std::path::PathBuf;

use oxibot_plugin::chat::{SectionError, expand_tilde, load_section, media_dir};
use serde::Deserialize;
use serde_json::Value;

/// The homeserver nanobot uses when the config names none.
pub const DEFAULT_HOMESERVER: &str = "https://matrix.org";

/// Which messages of rooms with more than two members (not direct chats) are submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Every message (nanobot's default for Matrix).
    Open,
    /// Only messages whose `m.mentions` name the bot (or the whole room, with
    /// `allowRoomMentions`).
    Mention,
    /// Every message in the listed rooms, none elsewhere.
    Allowlist(Vec<String>),
}

/// Who may invite the bot into a room (it joins on its own): `allowFrom` of the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inviters {
    /// `"*"`: anyone.
    Anyone,
    /// These user ids (none: the bot joins no room by itself).
    Only(Vec<String>),
}

impl Inviters {
    /// Whether an invite from `user` is followed.
    pub fn allows(&self, user: &str) -> bool {
        match self {
            Inviters::Anyone => true,
            Inviters::Only(users) => users.iter().any(|allowed| allowed == "*" || allowed == user),
        }
    }
}

/// How the bot signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// An access token (with its `deviceId`).
    Token(String),
    /// A password: the channel logs in and keeps the session it gets.
    Password(String),
}

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The homeserver's base URL, without a trailing slash.
    pub homeserver: String,
    /// The bot's user id, `@bot:example.org`.
    pub user_id: String,
    /// How the bot signs in.
    pub credentials: Credentials,
    /// The device the token belongs to (for logs; no end-to-end encryption here).
    pub device_id: String,
    /// Which room messages are submitted.
    pub group_policy: GroupPolicy,
    /// Whether an `@room` mention counts as a mention of the bot.
    pub allow_room_mentions: bool,
    /// Whose invites the bot follows.
    pub inviters: Inviters,
    /// Where the channel keeps files: its sync position.
    pub media_dir: PathBuf,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.matrix.{0} is missing")]
    Missing(&'static str),
    /// `userId` is not of the form `@name:server`.
    #[error("channels.matrix.userId must look like @name:server, not {0:?}")]
    BadUserId(String),
    /// `groupPolicy` names no known policy.
    #[error("channels.matrix.groupPolicy must be \"open\", \"mention\" or \"allowlist\", not {0:?}")]
    UnknownGroupPolicy(String),
}

/// The section as written, before checks and defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Raw {
    homeserver: Option<String>,
    #[serde(alias = "user_id")]
    user_id: String,
    #[serde(alias = "access_token")]
    access_token: String,
    #[serde(alias = "device_id")]
    device_id: String,
    password: String,
    #[serde(alias = "group_policy")]
    group_policy: Option<String>,
    #[serde(alias = "group_allow_from")]
    group_allow_from: Vec<String>,
    #[serde(alias = "allow_room_mentions")]
    allow_room_mentions: bool,
    #[serde(alias = "allow_from")]
    allow_from: Value,
    #[serde(alias = "media_dir")]
    media_dir: Option<String>,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("matrix", section)? };
        let user_id = raw.user_id.trim().to_owned();
        if user_id.is_empty() {
            return Err(ConfigError::Missing("userId"));
        }
        if !user_id.starts_with('@') || !user_id.contains(':') {
            return Err(ConfigError::BadUserId(user_id));
        }
        // nanobot: a password, when given, wins over a token.
        let credentials = match (raw.password.as_str(), raw.access_token.trim()) {
            ("", "") => return Err(ConfigError::Missing("accessToken")),
            ("", token) => Credentials::Token(token.to_owned()),
            (password, _) => Credentials::Password(password.to_owned()),
        };
        let homeserver = non_empty(raw.homeserver).unwrap_or_else(|| DEFAULT_HOMESERVER.to_owned());
        Ok(Config {
            homeserver: homeserver.trim_end_matches('/').to_owned(),
            user_id,
            credentials,
            device_id: raw.device_id.trim().to_owned(),
            group_policy: group_policy(raw.group_policy.as_deref(), raw.group_allow_from)?,
            allow_room_mentions: raw.allow_room_mentions,
            inviters: inviters(&raw.allow_from),
            media_dir: non_empty(raw.media_dir).map_or_else(|| media_dir("matrix"), expand_tilde),
        })
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn group_policy(name: Option<&str>, allow_from: Vec<String>) -> Result<GroupPolicy, ConfigError> {
    match name.map(str::trim).unwrap_or("open") {
        "" | "open" => Ok(GroupPolicy::Open),
        "mention" => Ok(GroupPolicy::Mention),
        "allowlist" => Ok(GroupPolicy::Allowlist(allow_from)),
        other => Err(ConfigError::UnknownGroupPolicy(other.to_owned())),
    }
}

/// `allowFrom` as `"*"` or a list of user ids; anything else allows no inviter.
fn inviters(allow_from: &Value) -> Inviters {
    match allow_from {
        Value::String(text) if text.trim() == "*" => Inviters::Anyone,
        Value::Array(users) => Inviters::Only(users.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        _ => Inviters::Only(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_user_and_a_token_alone_give_nanobots_defaults() {
        let config = Config::from_value(&json!({"userId": "@bot:example.org", "accessToken": "syt_1"})).unwrap();
        assert_eq!(config.homeserver, DEFAULT_HOMESERVER);
        assert_eq!(config.group_policy, GroupPolicy::Open);
        assert!(!config.allow_room_mentions);
        assert_eq!(config.inviters, Inviters::Only(vec![]));
        assert_eq!(config.media_dir, media_dir("matrix"));
    }

    #[test]
    fn snake_case_keys_are_read_like_camel_case_ones() {
        let section = json!({"homeserver": "http://127.0.0.1:9/", "user_id": "@b:h", "access_token": "t", "device_id": "D",
                             "group_policy": "allowlist", "group_allow_from": ["!r:h"], "allow_room_mentions": true,
                             "allow_from": ["@ada:h"], "media_dir": "/tmp/m"});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.homeserver, "http://127.0.0.1:9");
        assert_eq!(config.device_id, "D");
        assert_eq!(config.group_policy, GroupPolicy::Allowlist(vec!["!r:h".into()]));
        assert!(config.allow_room_mentions);
        assert!(config.inviters.allows("@ada:h") && !config.inviters.allows("@eve:h"));
        assert_eq!(config.media_dir, PathBuf::from("/tmp/m"));
    }

    #[test]
    fn a_password_wins_over_a_token_as_in_nanobot() {
        let config = Config::from_value(&json!({"userId": "@b:h", "password": "p", "accessToken": "t"})).unwrap();
        assert_eq!(config.credentials, Credentials::Password("p".into()));
        let config = Config::from_value(&json!({"userId": "@b:h", "accessToken": " t "})).unwrap();
        assert_eq!(config.credentials, Credentials::Token("t".into()));
    }

    #[test]
    fn an_allow_from_star_follows_every_invite() {
        let config = Config::from_value(&json!({"userId": "@b:h", "accessToken": "t", "allowFrom": "*"})).unwrap();
        assert!(config.inviters.allows("@anyone:h"));
    }

    #[test]
    fn missing_or_malformed_keys_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"accessToken": "t"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.matrix.userId is missing");
        let error = Config::from_value(&json!({"userId": "@b:h"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.matrix.accessToken is missing");
        let error = Config::from_value(&json!({"userId": "bot", "accessToken": "t"})).unwrap_err();
        assert!(error.to_string().contains("channels.matrix.userId"), "{error}");
        let error =
            Config::from_value(&json!({"userId": "@b:h", "accessToken": "t", "groupPolicy": "all"})).unwrap_err();
        assert!(error.to_string().contains("groupPolicy") && error.to_string().contains("\"all\""), "{error}");
        let error =
            Config::from_value(&json!({"userId": "@b:h", "accessToken": "t", "allowRoomMentions": "yes"})).unwrap_err();
        assert!(error.to_string().contains("channels.matrix.allowRoomMentions"), "{error}");
    }
}

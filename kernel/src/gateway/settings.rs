//! The gateway's part of `config.json`: `gateway` (`host`, `port`, `token`, `webUi`, `heartbeat`) and `channels.<name>`
//! (`enabled`, `allowFrom`, and whatever else the channel plugin reads), and
//! `channels.deliveryRetryHours`.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::automation::heartbeat::HeartbeatSettings;
use crate::config::Config;

/// Where the health endpoint listens by default (nanobot's gateway port).
pub const DEFAULT_PORT: u16 = 18790;
/// How long a reply is retried by default before it is given up (`channels.deliveryRetryHours`).
pub const DEFAULT_DELIVERY_RETRY_HOURS: f64 = 12.0;
/// The longest `channels.deliveryRetryHours` taken: a week.
const MAX_DELIVERY_RETRY_HOURS: f64 = 168.0;

/// A bad `gateway` or `channels` setting.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct SettingsError {
    /// The key path, e.g. `channels.telegram.allowFrom`.
    key: String,
    /// What is wrong and what was expected.
    problem: String,
}

/// Who may talk to the assistant through one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowFrom {
    /// `"*"`: everyone.
    Everyone,
    /// Exactly these sender ids (or usernames).
    Only(Vec<String>),
    /// No `allowFrom`: unknown senders in direct chats get a pairing code.
    Pairing,
}

/// One enabled channel.
#[derive(Debug, Clone)]
pub struct ChannelSettings {
    /// Its name (`telegram`, …).
    pub name: String,
    /// Access control.
    pub allow_from: AllowFrom,
    /// The whole `channels.<name>` section, handed to the plugin.
    pub raw: Value,
}

/// The gateway's settings.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// The health endpoint's address.
    pub host: String,
    /// The health endpoint's port.
    pub port: u16,
    /// Channels with `enabled: true`, by name.
    pub channels: Vec<ChannelSettings>,
    /// `gateway.heartbeat`.
    pub heartbeat: HeartbeatSettings,
    /// `gateway.token`: the secret the web UI asks for; required off loopback.
    pub token: Option<String>,
    /// `gateway.webUi`: whether the web UI is served under `/` (default true).
    pub web_ui: bool,
    /// `channels.deliveryRetryHours`: how long a reply its channel did not take is retried.
    pub delivery_retry: Duration,
}

impl GatewaySettings {
    /// Reads `gateway` and `channels` from the config's extra keys.
    pub fn from_config(config: &Config) -> Result<GatewaySettings, SettingsError> {
        let gateway = config.extra.get("gateway").cloned().unwrap_or(Value::Null);
        let host = match gateway.get("host") {
            None | Some(Value::Null) => "127.0.0.1".to_owned(),
            Some(Value::String(host)) => host.clone(),
            Some(other) => {
                return Err(error("gateway.host", format!("expected an address like \"127.0.0.1\", got {other}")));
            }
        };
        let port = match gateway.get("port") {
            None | Some(Value::Null) => DEFAULT_PORT,
            Some(value) => value
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| error("gateway.port", format!("expected a port number, got {value}")))?,
        };
        let mut channels = Vec::new();
        let mut delivery_retry = Duration::from_secs_f64(DEFAULT_DELIVERY_RETRY_HOURS * 3600.0);
        if let Some(section) = config.extra.get("channels") {
            let map = section.as_object().ok_or_else(|| error("channels", "expected an object of channel sections"))?;
            if let Some(hours) = map.get("deliveryRetryHours").or_else(|| map.get("delivery_retry_hours")) {
                delivery_retry = retry_window(hours)?;
            }
            for (name, raw) in map {
                if let Some(channel) = channel(name, raw)? {
                    channels.push(channel);
                }
            }
        }
        let heartbeat =
            HeartbeatSettings::from_section(gateway.get("heartbeat")).map_err(|(key, problem)| error(&key, problem))?;
        let token = match gateway.get("token") {
            None | Some(Value::Null) => None,
            Some(Value::String(token)) if token.is_empty() => None,
            Some(Value::String(token)) => Some(token.clone()),
            Some(_) => return Err(error("gateway.token", "expected a string")),
        };
        let web_ui = match gateway.get("webUi").or_else(|| gateway.get("web_ui")) {
            None | Some(Value::Null) => true,
            Some(Value::Bool(on)) => *on,
            Some(other) => return Err(error("gateway.webUi", format!("expected true or false, got {other}"))),
        };
        Ok(GatewaySettings { host, port, channels, heartbeat, token, web_ui, delivery_retry })
    }

    /// The settings of channel `name`, if enabled.
    pub fn channel(&self, name: &str) -> Option<&ChannelSettings> {
        self.channels.iter().find(|c| c.name == name)
    }

    /// What changes for the channels when `edited` replaces these settings.
    pub fn channel_changes(&self, edited: &GatewaySettings) -> ChannelChanges {
        let mut changes = ChannelChanges::default();
        for running in &self.channels {
            match edited.channel(&running.name) {
                None => changes.stopped.push(running.name.clone()),
                Some(new) if without_allow_from(&new.raw) != without_allow_from(&running.raw) => {
                    changes.restarted.push(new.clone());
                }
                Some(new) if new.allow_from != running.allow_from => changes.allow_from.push(new.clone()),
                Some(_) => {}
            }
        }
        changes.started = edited.channels.iter().filter(|c| self.channel(&c.name).is_none()).cloned().collect();
        changes
    }
}

/// How an edited config changes the channels of a running gateway.
#[derive(Debug, Default)]
pub struct ChannelChanges {
    /// Newly enabled: their plugins start.
    pub started: Vec<ChannelSettings>,
    /// Disabled or removed: their plugins stop.
    pub stopped: Vec<String>,
    /// Settings other than `allowFrom` changed: their plugins restart with the new section.
    pub restarted: Vec<ChannelSettings>,
    /// Only `allowFrom` changed: applied to the next message, the plugin keeps running.
    pub allow_from: Vec<ChannelSettings>,
}

impl ChannelChanges {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.started.is_empty() && self.stopped.is_empty() && self.restarted.is_empty() && self.allow_from.is_empty()
    }
}

/// A channel section without its `allowFrom`, which applies without restarting the plugin.
fn without_allow_from(raw: &Value) -> Value {
    let mut raw = raw.clone();
    if let Some(section) = raw.as_object_mut() {
        section.remove("allowFrom");
        section.remove("allow_from");
    }
    raw
}

fn channel(name: &str, raw: &Value) -> Result<Option<ChannelSettings>, SettingsError> {
    let Value::Object(section) = raw else {
        // nanobot keeps a few non-channel keys here (e.g. `sendProgress`): not a channel.
        return Ok(None);
    };
    match section.get("enabled") {
        Some(Value::Bool(true)) => {}
        None | Some(Value::Bool(false)) | Some(Value::Null) => return Ok(None),
        Some(other) => {
            return Err(error(&format!("channels.{name}.enabled"), format!("expected true or false, got {other}")));
        }
    }
    let allow_from = allow_from(name, section)?;
    Ok(Some(ChannelSettings { name: name.to_owned(), allow_from, raw: raw.clone() }))
}

fn allow_from(name: &str, section: &Map<String, Value>) -> Result<AllowFrom, SettingsError> {
    let key = format!("channels.{name}.allowFrom");
    let value = section.get("allowFrom").or_else(|| section.get("allow_from"));
    match value {
        None | Some(Value::Null) => Ok(AllowFrom::Pairing),
        Some(Value::String(s)) if s == "*" => Ok(AllowFrom::Everyone),
        Some(Value::Array(items)) => {
            let ids = items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    other => Err(error(&key, format!("expected sender ids as strings, got {other}"))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if ids.iter().any(|id| id == "*") { AllowFrom::Everyone } else { AllowFrom::Only(ids) })
        }
        Some(other) => Err(error(&key, format!("expected \"*\" or a list of sender ids, got {other}"))),
    }
}

/// `channels.deliveryRetryHours`: hours (fractions taken), more than none, at most a week.
fn retry_window(hours: &Value) -> Result<Duration, SettingsError> {
    match hours.as_f64() {
        Some(hours) if hours > 0.0 && hours <= MAX_DELIVERY_RETRY_HOURS => Ok(Duration::from_secs_f64(hours * 3600.0)),
        _ => Err(error(
            "channels.deliveryRetryHours",
            format!("expected a number of hours above 0 and at most {MAX_DELIVERY_RETRY_HOURS}, got {hours}"),
        )),
    }
}

fn error(key: &str, problem: impl Into<String>) -> SettingsError {
    SettingsError { key: key.to_owned(), problem: problem.into() }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;

    fn settings(config: Value) -> Result<GatewaySettings, SettingsError> {
        GatewaySettings::from_config(&Config::parse(&config.to_string(), Path::new("config.json")).unwrap())
    }

    #[test]
    fn only_enabled_channels_are_started_and_defaults_apply() {
        let s = settings(json!({"channels": {"telegram": {"enabled": true, "token": "t"}, "discord": {"enabled": false}, "sendProgress": true}})).unwrap();
        assert_eq!(s.channels.len(), 1);
        assert_eq!(s.channels[0].name, "telegram");
        assert_eq!(s.channels[0].raw["token"], "t");
        assert_eq!((s.host.as_str(), s.port), ("127.0.0.1", DEFAULT_PORT));
        assert_eq!((s.token.as_deref(), s.web_ui), (None, true));
    }

    #[test]
    fn the_web_ui_token_and_switch_are_read() {
        let s = settings(json!({"gateway": {"token": "s3cret", "webUi": false}})).unwrap();
        assert_eq!((s.token.as_deref(), s.web_ui), (Some("s3cret"), false));
        assert_eq!(settings(json!({"gateway": {"token": ""}})).unwrap().token, None);
    }

    #[test]
    fn allow_from_is_everyone_a_list_or_pairing_when_absent() {
        let s = settings(json!({"channels": {
            "a": {"enabled": true, "allowFrom": "*"},
            "b": {"enabled": true, "allowFrom": ["42", 7]},
            "c": {"enabled": true},
            "d": {"enabled": true, "allow_from": ["*"]}
        }}))
        .unwrap();
        assert_eq!(s.channel("a").unwrap().allow_from, AllowFrom::Everyone);
        assert_eq!(s.channel("b").unwrap().allow_from, AllowFrom::Only(vec!["42".into(), "7".into()]));
        assert_eq!(s.channel("c").unwrap().allow_from, AllowFrom::Pairing);
        assert_eq!(s.channel("d").unwrap().allow_from, AllowFrom::Everyone);
    }

    #[test]
    fn an_edit_starts_stops_and_restarts_exactly_the_channels_it_changes() {
        let running = settings(json!({"channels": {
            "kept": {"enabled": true, "token": "t"},
            "gated": {"enabled": true, "allowFrom": ["1"]},
            "moved": {"enabled": true, "port": 1},
            "dropped": {"enabled": true}
        }}))
        .unwrap();
        let edited = settings(json!({"channels": {
            "kept": {"enabled": true, "token": "t"},
            "gated": {"enabled": true, "allowFrom": ["1", "2"]},
            "moved": {"enabled": true, "port": 2},
            "dropped": {"enabled": false},
            "new": {"enabled": true}
        }}))
        .unwrap();
        let changes = running.channel_changes(&edited);
        let names = |list: &[ChannelSettings]| list.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&changes.started), ["new"]);
        assert_eq!(changes.stopped, ["dropped"]);
        assert_eq!(names(&changes.restarted), ["moved"], "a new port needs a new plugin process");
        assert_eq!(names(&changes.allow_from), ["gated"], "allowFrom alone keeps the plugin running");
        assert!(running.channel_changes(&running).is_empty());
    }

    #[test]
    fn replies_are_retried_for_twelve_hours_unless_delivery_retry_hours_says_otherwise() {
        let default = settings(json!({"channels": {}})).unwrap().delivery_retry;
        assert_eq!(default, Duration::from_secs(12 * 3600));
        let set = settings(json!({"channels": {"deliveryRetryHours": 0.5}})).unwrap();
        assert_eq!(set.delivery_retry, Duration::from_secs(1800));
        assert!(set.channels.is_empty(), "the key is not a channel");
        for bad in [json!(0), json!(-1), json!("2"), json!(1000)] {
            let error = settings(json!({"channels": {"deliveryRetryHours": bad}})).unwrap_err().to_string();
            assert!(error.starts_with("channels.deliveryRetryHours:"), "{error}");
        }
    }

    #[test]
    fn bad_values_name_the_key() {
        let error = settings(json!({"gateway": {"port": "x"}})).unwrap_err().to_string();
        assert!(error.starts_with("gateway.port:"), "{error}");
        let error = settings(json!({"gateway": {"token": 5}})).unwrap_err().to_string();
        assert!(error.starts_with("gateway.token:") && !error.contains('5'), "{error}");
        let error = settings(json!({"gateway": {"webUi": "yes"}})).unwrap_err().to_string();
        assert!(error.starts_with("gateway.webUi:"), "{error}");
        let error = settings(json!({"gateway": {"port": "x"}})).unwrap_err().to_string();
        assert!(error.starts_with("gateway.port:"), "{error}");
        let error =
            settings(json!({"channels": {"slack": {"enabled": true, "allowFrom": 5}}})).unwrap_err().to_string();
        assert!(error.starts_with("channels.slack.allowFrom:"), "{error}");
    }
}

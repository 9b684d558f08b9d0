//! The secrets of the gateway's local surfaces — the web UI, the `api` channel and the
//! `websocket` channel — which ask for one whatever their address, since any local process
//! and any web page the user opens can reach a loopback port.
//!
//! A secret the config sets wins (`gateway.token`, `channels.api.apiKey`,
//! `channels.websocket.token`). Otherwise the gateway makes one the first time a surface needs
//! it and keeps it in `<data dir>/local-secrets.json` (mode 0600, in the data dir that no
//! sandboxed command can read), so it stays the same across restarts. [`fill`] hands them to
//! the settings: the web UI's guard, and the channel sections the plugins are started with.
//! The web UI is entered through one-time login codes instead ([`super::web::login`]).
//! A file that does not parse is moved aside and reported ([`fsutil::parse_state`]), and new
//! secrets are made.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::settings::GatewaySettings;
use crate::fsutil::{self, CorruptFile, StateFileError};

/// The file name inside the data dir.
pub const FILE_NAME: &str = "local-secrets.json";

/// A surface that needs a secret, named as in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The web UI and its JSON API (the gateway's HTTP server).
    WebUi,
    /// The OpenAI-compatible `api` channel.
    Api,
    /// The `websocket` channel.
    Websocket,
    /// `oxibot mcp serve --http`.
    Mcp,
}

impl Surface {
    /// The key in the file.
    pub fn key(self) -> &'static str {
        match self {
            Surface::WebUi => "webUi",
            Surface::Api => "api",
            Surface::Websocket => "websocket",
            Surface::Mcp => "mcp",
        }
    }

    /// A readable prefix, so a key found in a shell history says what it opens.
    fn prefix(self) -> &'static str {
        match self {
            Surface::WebUi => "oxibot-ui-",
            Surface::Api => "oxibot-api-",
            Surface::Websocket => "oxibot-ws-",
            Surface::Mcp => "oxibot-mcp-",
        }
    }
}

/// Why the secrets file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not a JSON object and could not be moved aside.
    #[error("{path}: not a JSON object of secrets ({detail}); delete it to make new ones")]
    Shape {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// No random bytes from the system.
    #[error("the system gave no random bytes for a new secret")]
    Random,
}

/// The secrets file of one data dir; read on every use, so a process never works from a copy
/// another one has changed.
#[derive(Debug, Clone)]
pub struct LocalSecrets {
    path: PathBuf,
}

impl LocalSecrets {
    /// The secrets file in `data_dir`.
    pub fn new(data_dir: &Path) -> LocalSecrets {
        LocalSecrets { path: data_dir.join(FILE_NAME) }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The secret of `surface`, made and saved when there is none yet; `true` when it was
    /// made now (so the caller can show it once).
    pub fn get_or_create(&self, surface: Surface) -> Result<(String, bool), SecretsError> {
        let mut values = self.read()?;
        if let Some(Value::String(secret)) = values.get(surface.key())
            && !secret.is_empty()
        {
            return Ok((secret.clone(), false));
        }
        let secret = format!("{}{}", surface.prefix(), random_hex(24)?);
        values.insert(surface.key().to_owned(), Value::String(secret.clone()));
        self.write(&values)?;
        Ok((secret, true))
    }

    fn read(&self) -> Result<Map<String, Value>, SecretsError> {
        let path = || self.path.display().to_string();
        match fsutil::read_state::<Map<String, Value>>(&self.path) {
            Ok(values) => Ok(values.unwrap_or_default()),
            // Moved aside and reported: new secrets are made in a fresh file.
            Err(StateFileError::Corrupt(CorruptFile::MovedAside { .. })) => Ok(Map::new()),
            Err(StateFileError::Corrupt(corrupt @ CorruptFile::LeftInPlace { .. })) => {
                Err(SecretsError::Shape { path: path(), detail: corrupt.to_string() })
            }
            Err(StateFileError::Read { source, .. }) => Err(SecretsError::Io { path: path(), source }),
        }
    }

    /// Writes the whole file through a private temporary file renamed over it.
    fn write(&self, values: &Map<String, Value>) -> Result<(), SecretsError> {
        let io = |source| SecretsError::Io { path: self.path.display().to_string(), source };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let temporary = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary).map_err(io)?;
        let text = serde_json::to_string_pretty(&Value::Object(values.clone())).unwrap_or_default();
        file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(io)?;
        std::fs::rename(&temporary, &self.path).map_err(io)
    }
}

/// `bytes` random bytes from the system, as hex.
pub fn random_hex(bytes: usize) -> Result<String, SecretsError> {
    use ring::rand::SecureRandom;
    let mut buffer = vec![0u8; bytes];
    ring::rand::SystemRandom::new().fill(&mut buffer).map_err(|_| SecretsError::Random)?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// Which secrets [`fill`] made now, to be shown once.
#[derive(Debug, Default)]
pub struct Filled {
    /// The `api` channel's new key, when it was made now.
    pub new_api_key: Option<String>,
}

/// Gives each surface of `settings` its secret: the web UI's token (when the UI is on) and the
/// key or token of the enabled `api` and `websocket` channels, written into their sections so
/// the plugins start with them and the web UI's chat proxy presents the websocket one.
pub fn fill(settings: &mut GatewaySettings, secrets: &LocalSecrets) -> Result<Filled, SecretsError> {
    let mut filled = Filled::default();
    if settings.web_ui && settings.token.is_none() {
        settings.token = Some(secrets.get_or_create(Surface::WebUi)?.0);
    }
    for channel in &mut settings.channels {
        let (surface, keys): (Surface, &[&str]) = match channel.name.as_str() {
            "api" => (Surface::Api, &["apiKey", "api_key"]),
            "websocket" => (Surface::Websocket, &["token"]),
            _ => continue,
        };
        let set = keys.iter().any(|key| channel.raw.get(*key).and_then(Value::as_str).is_some_and(|s| !s.is_empty()));
        if set {
            continue;
        }
        let (secret, created) = secrets.get_or_create(surface)?;
        if !channel.raw.is_object() {
            channel.raw = Value::Object(Map::new());
        }
        if let Some(section) = channel.raw.as_object_mut() {
            for key in keys {
                section.remove(*key);
            }
            section.insert(keys[0].to_owned(), Value::String(secret.clone()));
        }
        if surface == Surface::Api && created {
            filled.new_api_key = Some(secret);
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::*;
    use crate::config::Config;

    fn scratch(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-local-secrets-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn settings(config: Value) -> GatewaySettings {
        let config = Config::parse(&config.to_string(), Path::new("config.json")).unwrap();
        GatewaySettings::from_config(&config).unwrap()
    }

    #[test]
    fn a_secret_is_made_once_kept_private_and_read_back_the_same() {
        let dir = scratch("once");
        let secrets = LocalSecrets::new(&dir);
        let (first, created) = secrets.get_or_create(Surface::Api).unwrap();
        assert!(created && first.starts_with("oxibot-api-") && first.len() == "oxibot-api-".len() + 48, "{first}");
        assert_eq!(secrets.get_or_create(Surface::Api).unwrap(), (first.clone(), false));
        let (other, _) = secrets.get_or_create(Surface::Websocket).unwrap();
        assert_ne!(other, first);
        let mode = std::fs::metadata(secrets.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fill_gives_the_ui_and_the_local_channels_a_secret_unless_the_config_sets_one() {
        let dir = scratch("fill");
        let secrets = LocalSecrets::new(&dir);
        let mut configured = settings(json!({"gateway": {"token": "mine"}, "channels": {
            "api": {"enabled": true, "apiKey": "sk-mine"}, "websocket": {"enabled": true, "token": "ws-mine"}}}));
        let filled = fill(&mut configured, &secrets).unwrap();
        assert!(filled.new_api_key.is_none());
        assert_eq!(configured.token.as_deref(), Some("mine"));
        assert_eq!(configured.channel("api").unwrap().raw["apiKey"], "sk-mine");
        assert_eq!(configured.channel("websocket").unwrap().raw["token"], "ws-mine");

        let mut generated = settings(json!({"channels": {
            "api": {"enabled": true, "api_key": ""}, "websocket": {"enabled": true}, "telegram": {"enabled": true}}}));
        let filled = fill(&mut generated, &secrets).unwrap();
        let api_key = generated.channel("api").unwrap().raw["apiKey"].as_str().unwrap().to_owned();
        assert_eq!(filled.new_api_key.as_deref(), Some(api_key.as_str()));
        assert!(generated.channel("websocket").unwrap().raw["token"].as_str().unwrap().starts_with("oxibot-ws-"));
        assert!(generated.token.as_deref().unwrap().starts_with("oxibot-ui-"));
        assert!(generated.channel("telegram").unwrap().raw.get("token").is_none());

        let mut again = settings(json!({"channels": {"api": {"enabled": true}}}));
        assert!(fill(&mut again, &secrets).unwrap().new_api_key.is_none(), "the key is shown only when made");
        assert_eq!(again.channel("api").unwrap().raw["apiKey"], api_key.as_str());
        std::fs::remove_dir_all(dir).unwrap();
    }
}

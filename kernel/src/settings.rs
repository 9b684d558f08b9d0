//! [`Settings`]: the config parsed once into the typed sections the kernel reads while it
//! runs — the file as loaded, the `memory` section and the prices. Made at start and again by
//! each config reload; [`crate::services::Services::settings`] hands out the current one, so
//! every reader of a turn (the session actor, the Consolidator, memory, `/status`, the web UI)
//! sees the same settings, and a reload reaches them all at once.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::config::Config;
use crate::config::memory::{RecallSettings, SettingsError};
use crate::usage::{Price, prices};

/// One snapshot of the settings; replaced whole, never edited.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The config file as loaded.
    pub config: Config,
    /// The `memory` section, or what is wrong with it (the kernel then uses the defaults;
    /// the CLI refuses it).
    pub memory: Result<RecallSettings, SettingsError>,
    /// `agents.defaults.pricing`: each model's price, or what is wrong with the section.
    pub pricing: Result<BTreeMap<String, Price>, String>,
}

impl From<Config> for Settings {
    fn from(config: Config) -> Settings {
        Settings::new(config)
    }
}

impl Settings {
    /// Reads the typed sections of `config`.
    pub fn new(config: Config) -> Settings {
        let memory = RecallSettings::from_section(config.extra.get("memory"));
        let pricing = prices(config.agents.defaults.extra.get("pricing"));
        Settings { config, memory, pricing }
    }

    /// The `memory` settings, the defaults when the section is wrong.
    pub fn memory_or_default(&self) -> RecallSettings {
        self.memory.as_ref().cloned().unwrap_or_default()
    }

    /// The prices, none when the section is wrong.
    pub fn prices_or_none(&self) -> BTreeMap<String, Price> {
        self.pricing.as_ref().cloned().unwrap_or_default()
    }

    /// The configured IANA timezone name, if any.
    pub fn timezone(&self) -> Option<&str> {
        self.config.agents.defaults.timezone.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_optional_sections_are_read_once_and_a_wrong_one_is_kept_as_its_error() {
        let text =
            r#"{"memory": {"recallTopK": 5}, "agents": {"defaults": {"pricing": {"m": {"input": 1, "output": 2}}}}}"#;
        let settings = Settings::new(Config::parse(text, Path::new("c.json")).unwrap());
        assert_eq!(settings.memory_or_default().recall_top_k, 5);
        assert_eq!(settings.prices_or_none()["m"].output, 2.0);
        let wrong = Settings::new(Config::parse(r#"{"memory": {"recallTopK": "x"}}"#, Path::new("c.json")).unwrap());
        assert!(wrong.memory.as_ref().unwrap_err().to_string().contains("memory.recallTopK"));
        assert_eq!(wrong.memory_or_default(), RecallSettings::default());
    }
}

/// The settings in force, shared: whoever keeps one (a helper's or an embedding's meter) reads
/// the current settings at each use, so a config reload reaches it.
#[derive(Debug, Clone)]
pub struct SettingsHandle(Arc<RwLock<Arc<Settings>>>);

impl SettingsHandle {
    /// A handle on `settings`, until [`SettingsHandle::replace`].
    pub fn new(settings: Settings) -> SettingsHandle {
        SettingsHandle(Arc::new(RwLock::new(Arc::new(settings))))
    }

    /// The settings in force now.
    pub fn current(&self) -> Arc<Settings> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Puts `settings` in force for every holder of this handle.
    pub fn replace(&self, settings: Settings) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(settings);
    }
}

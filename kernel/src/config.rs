//! `config.json`: nanobot's schema (camelCase keys, snake_case accepted), unknown keys kept.
//!
//! Only the parts the kernel uses so far are typed; everything else is carried in `extra`
//! maps so a nanobot config loads unchanged and nothing is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::paths;
use crate::plugin::{Origin, PluginSpec};

/// A config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid JSON or a value has the wrong type.
    #[error("{path}: invalid value at `{key}`: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Dotted path of the offending key (`.` for the whole document).
        key: String,
        /// What serde expected.
        message: String,
    },
}

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// Agent settings.
    pub agents: AgentsConfig,
    /// Tool settings.
    pub tools: ToolsConfig,
    /// Extra plugin processes to start.
    pub plugins: Vec<PluginEntry>,
    /// Keys this version does not use, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `agents`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentsConfig {
    /// `agents.defaults`.
    pub defaults: AgentDefaults,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `agents.defaults`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentDefaults {
    /// The workspace directory (`~` allowed).
    pub workspace: String,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for AgentDefaults {
    fn default() -> Self {
        AgentDefaults { workspace: "~/.oxibot/workspace".to_owned(), extra: Map::new() }
    }
}

/// `tools`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolsConfig {
    /// Keep tools inside the workspace (on unless set to false).
    #[serde(alias = "restrict_to_workspace")]
    pub restrict_to_workspace: bool,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig { restrict_to_workspace: true, extra: Map::new() }
    }
}

/// One `plugins` entry: an executable to run as a tool plugin.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginEntry {
    /// Name shown in status; defaults to the command's file name.
    #[serde(default)]
    pub name: Option<String>,
    /// The executable (`~` allowed; a bare name is looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Set to false to keep the entry without starting it.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

impl PluginEntry {
    /// The spec the plugin host starts.
    pub fn to_spec(&self) -> PluginSpec {
        let command = paths::expand_tilde(Path::new(&self.command));
        let name = self.name.clone().unwrap_or_else(|| crate::plugin::spec::name_from_command(&command));
        PluginSpec { name, command, args: self.args.clone(), env: self.env.clone(), origin: Origin::Config }
    }
}

impl Config {
    /// Loads `path`; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => return Err(ConfigError::Read { path: path.to_path_buf(), source }),
        };
        Config::parse(&text, path)
    }

    /// Parses config text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| ConfigError::Invalid {
            path: path.to_path_buf(),
            key: error.path().to_string(),
            message: error.inner().to_string(),
        })
    }

    /// The workspace directory with `~` expanded.
    pub fn workspace(&self) -> PathBuf {
        paths::expand_tilde(Path::new(&self.agents.defaults.workspace))
    }

    /// Specs for the enabled `plugins` entries.
    pub fn plugin_specs(&self) -> Vec<PluginSpec> {
        self.plugins.iter().filter(|p| p.enabled).map(PluginEntry::to_spec).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nanobot_config_loads_and_keeps_unknown_keys() {
        let text = r#"{
            "agents": {"defaults": {"workspace": "~/ws", "model": "anthropic/claude-opus-4-5", "maxTokens": 8192}},
            "providers": {"anthropic": {"apiKey": "sk-x"}},
            "tools": {"restrictToWorkspace": false, "exec": {"timeout": 60}}
        }"#;
        let config = Config::parse(text, Path::new("config.json")).unwrap();
        assert_eq!(config.workspace(), paths::home_dir().join("ws"));
        assert!(!config.tools.restrict_to_workspace);
        assert!(config.extra.contains_key("providers"));
        assert_eq!(config.agents.defaults.extra["maxTokens"], 8192);
    }

    #[test]
    fn snake_case_keys_are_accepted() {
        let config = Config::parse(r#"{"tools": {"restrict_to_workspace": false}}"#, Path::new("c.json")).unwrap();
        assert!(!config.tools.restrict_to_workspace);
    }

    #[test]
    fn restriction_is_on_when_not_configured() {
        assert!(Config::parse("{}", Path::new("c.json")).unwrap().tools.restrict_to_workspace);
    }

    #[test]
    fn a_wrong_type_names_the_file_and_the_key() {
        let err = Config::parse(r#"{"plugins": [{"command": 5}]}"#, Path::new("/x/config.json")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/x/config.json"), "{text}");
        assert!(text.contains("plugins[0].command"), "{text}");
    }

    #[test]
    fn plugin_entries_become_specs_named_after_their_command() {
        let config = Config::parse(r#"{"plugins": [{"command": "/opt/oxibot-tool-weather", "env": {"K": "v"}}, {"command": "x", "enabled": false}]}"#, Path::new("c.json")).unwrap();
        let specs = config.plugin_specs();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].name, "weather");
        assert_eq!(specs[0].env["K"], "v");
    }
}

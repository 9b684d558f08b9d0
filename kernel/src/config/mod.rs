//! `config.json`: nanobot's schema (camelCase keys, snake_case accepted), unknown keys kept.
//!
//! Only the parts the kernel uses so far are typed; everything else is carried in `extra`
//! maps so a nanobot config loads unchanged and nothing is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::paths;

pub mod approval;
pub mod cluster;
pub mod fresh;
pub mod memory;
mod unknown_keys;

pub use oxibot_llm::config::ProviderConfig;
pub use unknown_keys::UnknownKey;

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
    /// LLM providers by name (`openai`, `anthropic`, `custom`, …).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Tool settings.
    pub tools: ToolsConfig,
    /// Extra plugin processes to start.
    pub plugins: Vec<PluginEntry>,
    /// Cluster mode over NATS JetStream; `None` (the default): one kernel on one host.
    pub cluster: Option<cluster::ClusterConfig>,
    /// Keys this version does not use, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// Keys no version knows (likely typos), found when the file was parsed.
    #[serde(skip)]
    pub unknown_keys: Vec<UnknownKey>,
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
    /// The model, e.g. `anthropic/claude-opus-4-5` or `gpt-4.1`.
    pub model: String,
    /// The provider name, or `auto` to pick one from the model name.
    pub provider: String,
    /// Most tokens the model may write per reply.
    #[serde(alias = "max_tokens")]
    pub max_tokens: u32,
    /// The model's context window.
    #[serde(alias = "context_window_tokens")]
    pub context_window_tokens: u32,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Most LLM ↔ tool iterations in one turn.
    #[serde(alias = "max_tool_iterations")]
    pub max_tool_iterations: u32,
    /// IANA timezone for the time shown to the model (`UTC` by default).
    pub timezone: Option<String>,
    /// Models tried in order when the model fails for good (after its retries, or at once on
    /// an error retrying cannot fix, such as refused credentials or exhausted quota).
    #[serde(alias = "fallback_models")]
    pub fallback_models: Vec<String>,
    /// Most background helpers (`spawn`) running at once; more wait for a free place.
    #[serde(alias = "max_concurrent_subagents")]
    pub max_concurrent_subagents: usize,
    /// Reasoning effort hint for models that take one.
    #[serde(alias = "reasoning_effort")]
    pub reasoning_effort: Option<String>,
    /// Dream settings (the memory part reads them).
    pub dream: Value,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for AgentDefaults {
    fn default() -> Self {
        AgentDefaults {
            workspace: default_workspace(),
            model: "anthropic/claude-opus-4-5".to_owned(),
            provider: "auto".to_owned(),
            max_tokens: 8192,
            context_window_tokens: 65_536,
            temperature: Some(0.1),
            max_tool_iterations: 40,
            timezone: None,
            max_concurrent_subagents: 3,
            fallback_models: Vec::new(),
            reasoning_effort: None,
            dream: Value::Null,
            extra: Map::new(),
        }
    }
}

/// `~/.oxibot/workspace`, or `$OXIBOT_HOME/workspace` when the data dir is moved.
fn default_workspace() -> String {
    if std::env::var_os(paths::HOME_VAR).is_some_and(|home| !home.is_empty()) {
        paths::data_dir().join("workspace").display().to_string()
    } else {
        "~/.oxibot/workspace".to_owned()
    }
}

/// `tools`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolsConfig {
    /// Keep tools inside the workspace (on unless set to false).
    #[serde(alias = "restrict_to_workspace")]
    pub restrict_to_workspace: bool,
    /// MCP servers by name, each entry as written (each is served by its own bridge plugin,
    /// which reads the entry).
    #[serde(alias = "mcp_servers")]
    pub mcp_servers: BTreeMap<String, Value>,
    /// Which calls run at once, wait for a person's yes, or never run (`tools.approval`).
    pub approval: approval::ApprovalPolicy,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            restrict_to_workspace: true,
            mcp_servers: BTreeMap::new(),
            approval: approval::ApprovalPolicy::default(),
            extra: Map::new(),
        }
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
    /// Paths outside the workspace the plugin may read and write while the workspace is
    /// restricted (its sandbox reaches nothing else there; `~` allowed).
    #[serde(default, alias = "allow_paths")]
    pub allow_paths: Vec<String>,
    /// Tools of the bundled plugins this plugin takes over (e.g. `["exec"]`); without it, a
    /// tool named like a bundled one is refused.
    #[serde(default)]
    pub replaces: Vec<String>,
}

fn enabled_by_default() -> bool {
    true
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

    /// Parses config text; `path` is only used in error messages. `${VAR}` in any string
    /// value is replaced by the environment variable `VAR`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid { path: path.to_path_buf(), key, message };
        let mut raw: Value = {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut deserializer)
                .map_err(|e| invalid(e.path().to_string(), e.inner().to_string()))?
        };
        expand_env(&mut raw, &mut String::new()).map_err(|(key, message)| invalid(key, message))?;
        let unknown = unknown_keys::unknown_keys(&raw);
        let mut config: Config =
            serde_path_to_error::deserialize(raw).map_err(|e| invalid(e.path().to_string(), e.inner().to_string()))?;
        config.unknown_keys = unknown;
        if let Some(cluster) = &config.cluster {
            cluster.validate().map_err(|(key, message)| invalid(key.to_owned(), message))?;
        }
        Ok(config)
    }

    /// The workspace directory with `~` expanded.
    pub fn workspace(&self) -> PathBuf {
        paths::expand_tilde(Path::new(&self.agents.defaults.workspace))
    }

    /// What the LLM client needs of this config: the model choice and the providers.
    pub fn llm(&self) -> oxibot_llm::config::LlmConfig {
        let defaults = &self.agents.defaults;
        oxibot_llm::config::LlmConfig {
            model: defaults.model.clone(),
            provider: defaults.provider.clone(),
            fallback_models: defaults.fallback_models.clone(),
            providers: self.providers.clone(),
        }
    }
}

/// Replaces `${VAR}` in every string of `value`; on a missing variable, returns the key path.
fn expand_env(value: &mut Value, key: &mut String) -> Result<(), (String, String)> {
    match value {
        Value::String(text) if text.contains("${") => {
            *text = expand_text(text).map_err(|var| (key.clone(), format!("environment variable {var} is not set")))?
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = key.len();
                key.push_str(&format!("[{i}]"));
                expand_env(item, key)?;
                key.truncate(len);
            }
        }
        Value::Object(map) => {
            for (name, item) in map.iter_mut() {
                let len = key.len();
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
                expand_env(item, key)?;
                key.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Expands `${VAR}` occurrences in one string; `Err(VAR)` names a variable that is not set.
fn expand_text(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        out.push_str(&std::env::var(name).map_err(|_| name.to_owned())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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
        assert_eq!(config.providers["anthropic"].api_key.as_deref(), Some("sk-x"));
        assert!(config.tools.extra.contains_key("exec"), "unknown keys are kept");
        assert_eq!(config.agents.defaults.max_tokens, 8192);
    }

    #[test]
    fn env_references_expand_and_missing_ones_name_the_key() {
        // PATH is set in every test environment.
        let path_value = std::env::var("PATH").unwrap();
        let config =
            Config::parse(r#"{"providers": {"openai": {"apiKey": "k-${PATH}-x"}}}"#, Path::new("c.json")).unwrap();
        assert_eq!(config.providers["openai"].api_key.as_deref(), Some(format!("k-{path_value}-x").as_str()));
        let err = Config::parse(
            r#"{"providers": {"openai": {"apiKey": "${OXIBOT_SURELY_UNSET_VAR}"}}}"#,
            Path::new("c.json"),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("providers.openai.apiKey") && text.contains("OXIBOT_SURELY_UNSET_VAR"), "{text}");
    }

    #[test]
    fn agent_defaults_take_nanobot_keys_in_either_case() {
        let config = Config::parse(r#"{"agents": {"defaults": {"model": "gpt-4.1", "provider": "openai", "maxTokens": 100, "context_window_tokens": 2000, "maxToolIterations": 3}}}"#, Path::new("c.json")).unwrap();
        let d = &config.agents.defaults;
        assert_eq!(
            (d.model.as_str(), d.provider.as_str(), d.max_tokens, d.context_window_tokens, d.max_tool_iterations),
            ("gpt-4.1", "openai", 100, 2000, 3)
        );
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
}

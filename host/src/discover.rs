//! Finding plugins: bundled `oxibot-tool-*` executables, the plugins directory, config entries;
//! the spec of one bundled `oxibot-channel-*` executable, started only when configured; and the
//! settings handed to the bundled `web` tool.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use oxibot_proto::{ENV_CHANNEL_CONFIG, ENV_TOOL_CONFIG};
use serde_json::{Map, Value};

use super::claims::BUNDLED_TOOLS;
use super::error::ChannelSpecError;
pub use super::spec::{CHANNEL_PREFIX, TOOL_PREFIX};
use super::spec::{Origin, PluginSpec};

/// Where to look for plugins.
#[derive(Debug, Clone, Default)]
pub struct PluginSources {
    /// The directory holding the kernel binary (bundled plugins), if known.
    pub bundled_dir: Option<PathBuf>,
    /// The user's plugins directory (`~/.oxibot/plugins`).
    pub plugin_dir: Option<PathBuf>,
    /// Plugins listed in the config file.
    pub configured: Vec<PluginSpec>,
}

/// Every plugin to start, in precedence order: config entries, then the plugins directory,
/// then bundled plugins. A later plugin with the same name as an earlier one is skipped, so a
/// user's plugin replaces the bundled one of the same name.
pub fn discover(sources: &PluginSources) -> Vec<PluginSpec> {
    let mut found: Vec<PluginSpec> = sources.configured.clone();
    if let Some(dir) = &sources.plugin_dir {
        found.extend(executables(dir, |_| true).into_iter().map(|p| PluginSpec::for_executable(p, Origin::PluginDir)));
    }
    if let Some(dir) = &sources.bundled_dir {
        // The MCP bridge serves only configured servers (see `mcp::mcp_specs`), never on its own.
        let bundled = executables(dir, |name| {
            name.starts_with(TOOL_PREFIX) && !name.contains('.') && name != super::mcp::MCP_BRIDGE
        });
        found.extend(bundled.into_iter().map(|p| PluginSpec::for_executable(p, Origin::Bundled)));
    }
    let mut seen = std::collections::HashSet::new();
    found.retain(|spec| {
        let first = seen.insert(spec.name.clone());
        if !first {
            tracing::debug!(plugin = %spec.name, command = %spec.command.display(), "skipping plugin shadowed by an earlier one of the same name");
        }
        first
    });
    found
}

/// The spec of the bundled channel `oxibot-channel-<name>` in `bundled_dir`, handed its
/// config section as JSON in `OXIBOT_CHANNEL_CONFIG`.
///
/// Channels are not discovered: the gateway builds a spec for each channel enabled in the
/// config. The spec is named `name`, so events and `send` use the channel's own name.
pub fn channel_spec(bundled_dir: &Path, name: &str, config: &Value) -> Result<PluginSpec, ChannelSpecError> {
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(ChannelSpecError::InvalidName(name.to_owned()));
    }
    let command = bundled_dir.join(format!("{CHANNEL_PREFIX}{name}"));
    if !is_executable_file(&command) {
        return Err(ChannelSpecError::NotInstalled { channel: name.to_owned(), path: command.display().to_string() });
    }
    let mut spec = PluginSpec::for_executable(command, Origin::Bundled);
    spec.name = name.to_owned();
    spec.env.insert(ENV_CHANNEL_CONFIG.to_owned(), config.to_string());
    Ok(spec)
}

/// The bundled tool plugins (see [`BUNDLED_TOOLS`]) whose executable is not in `bundled_dir`:
/// the kernel was installed without them (e.g. `oxibot` copied alone), so their tools are gone.
pub fn missing_bundled_tools(bundled_dir: &Path) -> Vec<&'static str> {
    BUNDLED_TOOLS
        .iter()
        .map(|(plugin, _)| *plugin)
        .filter(|name| !is_executable_file(&bundled_dir.join(format!("{TOOL_PREFIX}{name}"))))
        .collect()
}

/// The search providers' key variables, passed to the bundled `web` plugin and no other.
pub const WEB_KEY_VARIABLES: &[&str] = &["BRAVE_API_KEY", "TAVILY_API_KEY", "JINA_API_KEY"];

/// Hands the bundled `web` plugin its settings: `tools.web`, `tools.a2a` and
/// `tools.ssrfWhitelist` of `tools` as JSON (`{"web": …, "a2a": …, "ssrfWhitelist": …}`) in `OXIBOT_TOOL_CONFIG`, and those of
/// [`WEB_KEY_VARIABLES`] that `env` (the kernel's environment) has. Tool plugins otherwise get
/// no config and a scrubbed environment; a user's own `web` plugin gets nothing.
pub fn configure_web(specs: &mut [PluginSpec], tools: &Map<String, Value>, env: impl Fn(&str) -> Option<String>) {
    let mut config = Map::new();
    for (key, names) in
        [("web", &["web"][..]), ("a2a", &["a2a"][..]), ("ssrfWhitelist", &["ssrfWhitelist", "ssrf_whitelist"][..])]
    {
        if let Some(value) = names.iter().find_map(|name| tools.get(*name)).filter(|value| !value.is_null()) {
            config.insert(key.to_owned(), value.clone());
        }
    }
    for spec in specs.iter_mut().filter(|spec| spec.origin == Origin::Bundled && spec.name == "web") {
        spec.env.insert(ENV_TOOL_CONFIG.to_owned(), Value::Object(config.clone()).to_string());
        for name in WEB_KEY_VARIABLES {
            if let Some(value) = env(name) {
                spec.env.insert((*name).to_owned(), value);
            }
        }
    }
}

/// Executable regular files in `dir` whose names pass `filter`, sorted by name.
fn executables(dir: &Path, filter: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(&filter))
        .map(|e| e.path())
        .filter(|p| is_executable_file(p))
        .collect();
    paths.sort();
    paths
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, mode: u32) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-discover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn bundled_plugins_are_executables_with_the_tool_prefix() {
        let dir = temp("bundled");
        touch(&dir.join("oxibot-tool-fs"), 0o755);
        touch(&dir.join("oxibot-tool-fs.d"), 0o644);
        touch(&dir.join("oxibot-tool-notexec"), 0o644);
        touch(&dir.join("oxibot"), 0o755);
        touch(&dir.join("oxibot-tool-mcp"), 0o755);
        let found = discover(&PluginSources { bundled_dir: Some(dir), ..Default::default() });
        let names: Vec<_> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs"]);
    }

    #[test]
    fn missing_bundled_tools_are_named_when_the_kernel_was_installed_alone() {
        let dir = temp("missing-bundled");
        touch(&dir.join("oxibot"), 0o755);
        touch(&dir.join("oxibot-tool-fs"), 0o755);
        touch(&dir.join("oxibot-tool-web"), 0o644);
        assert_eq!(missing_bundled_tools(&dir), ["shell", "web"]);
        touch(&dir.join("oxibot-tool-shell"), 0o755);
        touch(&dir.join("oxibot-tool-web"), 0o755);
        assert!(missing_bundled_tools(&dir).is_empty());
    }

    #[test]
    fn bundled_discovery_does_not_start_channels() {
        let dir = temp("no-channels");
        touch(&dir.join("oxibot-tool-fs"), 0o755);
        touch(&dir.join("oxibot-channel-telegram"), 0o755);
        let found = discover(&PluginSources { bundled_dir: Some(dir), ..Default::default() });
        let names: Vec<_> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs"]);
    }

    #[test]
    fn a_channel_spec_names_the_channel_and_carries_its_config_as_json() {
        let dir = temp("channel-spec");
        touch(&dir.join("oxibot-channel-telegram"), 0o755);
        let spec = channel_spec(&dir, "telegram", &serde_json::json!({"token": "t", "allowFrom": ["1"]})).unwrap();
        assert_eq!(spec.name, "telegram");
        assert_eq!(spec.command, dir.join("oxibot-channel-telegram"));
        assert_eq!(spec.expected_kind(), oxibot_proto::PeerKind::Channel);
        let config: Value = serde_json::from_str(&spec.env[ENV_CHANNEL_CONFIG]).unwrap();
        assert_eq!(config, serde_json::json!({"token": "t", "allowFrom": ["1"]}));
    }

    #[test]
    fn a_channel_spec_fails_for_a_missing_executable_or_a_bad_name() {
        let dir = temp("channel-missing");
        touch(&dir.join("oxibot-channel-mute"), 0o644);
        let missing = channel_spec(&dir, "mute", &Value::Null).unwrap_err();
        assert!(missing.to_string().starts_with("channel 'mute' is not installed"), "{missing}");
        assert!(matches!(channel_spec(&dir, "../fs", &Value::Null), Err(ChannelSpecError::InvalidName(_))));
    }

    #[test]
    fn only_the_bundled_web_plugin_gets_the_web_settings_and_search_keys() {
        let dir = temp("web-config");
        touch(&dir.join("oxibot-tool-web"), 0o755);
        touch(&dir.join("oxibot-tool-fs"), 0o755);
        let mut specs = discover(&PluginSources { bundled_dir: Some(dir), ..Default::default() });
        let tools = serde_json::json!({
            "web": {"search": {"provider": "brave"}},
            "ssrf_whitelist": ["10.0.0.0/8"],
            "exec": {"timeout": 5}
        });
        let env = |name: &str| (name == "BRAVE_API_KEY" || name == "ANTHROPIC_API_KEY").then(|| "secret".to_owned());
        configure_web(&mut specs, tools.as_object().unwrap(), env);
        let web = specs.iter().find(|s| s.name == "web").unwrap();
        let config: Value = serde_json::from_str(&web.env[ENV_TOOL_CONFIG]).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"web": {"search": {"provider": "brave"}}, "ssrfWhitelist": ["10.0.0.0/8"]})
        );
        assert_eq!(web.env.get("BRAVE_API_KEY").map(String::as_str), Some("secret"));
        assert_eq!(web.env.len(), 2, "no other kernel variable: {:?}", web.env);
        let fs = specs.iter().find(|s| s.name == "fs").unwrap();
        assert!(fs.env.is_empty(), "{:?}", fs.env);
    }

    #[test]
    fn user_plugins_shadow_bundled_ones_of_the_same_name() {
        let bundled = temp("shadow-bundled");
        let user = temp("shadow-user");
        touch(&bundled.join("oxibot-tool-fs"), 0o755);
        touch(&user.join("oxibot-tool-fs"), 0o755);
        touch(&user.join("weather.py"), 0o755);
        let found =
            discover(&PluginSources { bundled_dir: Some(bundled), plugin_dir: Some(user.clone()), configured: vec![] });
        assert_eq!(found.len(), 2);
        let fs = found.iter().find(|s| s.name == "fs").unwrap();
        assert_eq!(fs.command, user.join("oxibot-tool-fs"));
        assert!(found.iter().any(|s| s.name == "weather"));
    }
}

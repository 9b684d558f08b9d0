//! Finding plugins: the tool plugins built into the kernel's executable (`oxibot __plugin fs`)
//! and those installed next to it, the plugins directory, config entries; the spec of one bundled channel (`oxibot __channel
//! telegram`), started only when configured; and the settings handed to the bundled `web` tool.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use oxibot_proto::{ENV_CHANNEL_CONFIG, ENV_TOOL_CONFIG};
use serde_json::{Map, Value};

use oxibot_proto::PeerKind;

use super::claims::{BUNDLED_CHANNELS, BUNDLED_TOOLS};
use super::error::ChannelSpecError;
pub use super::spec::{CHANNEL_ARG, CHANNEL_PREFIX, TOOL_ARG, TOOL_PREFIX};
use super::spec::{Origin, PluginSpec};

/// Where to look for plugins.
#[derive(Debug, Clone, Default)]
pub struct PluginSources {
    /// The kernel's own executable, which runs the bundled tool plugins, if known.
    pub kernel: Option<PathBuf>,
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
    if let Some(kernel) = &sources.kernel {
        // The MCP bridge serves only configured servers (see `mcp::mcp_specs`), never on its own.
        found.extend(BUNDLED_TOOLS.iter().map(|(name, _)| PluginSpec::bundled(kernel, &PeerKind::Tool, name)));
        // Tool plugins installed next to the kernel. A file named after a built-in one (left
        // by an older install of separate executables) is shadowed by the built-in.
        let bridge = format!("{TOOL_PREFIX}{}", super::mcp::MCP_BRIDGE);
        let beside = kernel
            .parent()
            .map(|dir| executables(dir, |name| name.starts_with(TOOL_PREFIX) && !name.contains('.') && name != bridge));
        found.extend(beside.into_iter().flatten().map(|p| PluginSpec::for_executable(p, Origin::Bundled)));
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

/// The spec of the bundled channel `name` (one of [`BUNDLED_CHANNELS`]), run by the kernel's
/// executable `kernel` as `kernel __channel <name>`, handed its config section as JSON in
/// `OXIBOT_CHANNEL_CONFIG`.
///
/// Channels are not discovered: the gateway builds a spec for each channel enabled in the
/// config. The spec is named `name`, so events and `send` use the channel's own name. Whether
/// `kernel` was built with the channel is the kernel's to check (`oxibot_kernel::bundled`).
pub fn channel_spec(kernel: &Path, name: &str, config: &Value) -> Result<PluginSpec, ChannelSpecError> {
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(ChannelSpecError::InvalidName(name.to_owned()));
    }
    if !BUNDLED_CHANNELS.contains(&name) {
        return Err(ChannelSpecError::Unknown(name.to_owned()));
    }
    let mut spec = PluginSpec::bundled(kernel, &PeerKind::Channel, name);
    spec.env.insert(ENV_CHANNEL_CONFIG.to_owned(), config.to_string());
    Ok(spec)
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

    /// A fresh directory, removed again when the test ends.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl std::ops::Deref for Scratch {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    fn temp(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("oxibot-discover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    const KERNEL: &str = "/opt/oxibot/oxibot";

    #[test]
    fn the_bundled_tool_plugins_are_run_by_the_kernel_executable_and_no_channel_or_bridge_is() {
        let found = discover(&PluginSources { kernel: Some(PathBuf::from(KERNEL)), ..Default::default() });
        let lines: Vec<_> = found.iter().map(|s| (s.name.as_str(), s.command_line(), s.origin)).collect();
        assert_eq!(
            lines,
            [
                ("fs", format!("{KERNEL} __plugin fs"), Origin::Bundled),
                ("shell", format!("{KERNEL} __plugin shell"), Origin::Bundled),
                ("web", format!("{KERNEL} __plugin web"), Origin::Bundled),
            ]
        );
    }

    #[test]
    fn tool_executables_next_to_the_kernel_are_found_and_a_leftover_of_a_built_in_one_is_shadowed() {
        let dir = temp("beside");
        for (file, mode) in [
            ("oxibot", 0o755),
            ("oxibot-tool-fs", 0o755),
            ("oxibot-tool-fs.d", 0o644),
            ("oxibot-tool-notexec", 0o644),
            ("oxibot-tool-mcp", 0o755),
            ("oxibot-tool-weather", 0o755),
            ("oxibot-channel-telegram", 0o755),
        ] {
            touch(&dir.join(file), mode);
        }
        let kernel = dir.join("oxibot");
        let found = discover(&PluginSources { kernel: Some(kernel.clone()), ..Default::default() });
        let names: Vec<_> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs", "shell", "web", "weather"]);
        assert_eq!(found[0].command_line(), format!("{} __plugin fs", kernel.display()));
        assert_eq!(found[3].command, dir.join("oxibot-tool-weather"));
    }

    #[test]
    fn a_channel_spec_names_the_channel_and_carries_its_config_as_json() {
        let spec = channel_spec(Path::new(KERNEL), "telegram", &serde_json::json!({"token": "t", "allowFrom": ["1"]}))
            .unwrap();
        assert_eq!(spec.name, "telegram");
        assert_eq!(spec.command_line(), format!("{KERNEL} __channel telegram"));
        assert_eq!(spec.expected_kind(), oxibot_proto::PeerKind::Channel);
        let config: Value = serde_json::from_str(&spec.env[ENV_CHANNEL_CONFIG]).unwrap();
        assert_eq!(config, serde_json::json!({"token": "t", "allowFrom": ["1"]}));
    }

    #[test]
    fn a_channel_spec_fails_for_an_unknown_channel_or_a_bad_name() {
        let unknown = channel_spec(Path::new(KERNEL), "mute", &Value::Null).unwrap_err();
        assert!(unknown.to_string().starts_with("channel 'mute' is not one oxibot has"), "{unknown}");
        assert!(unknown.to_string().contains("telegram"), "{unknown}");
        assert!(matches!(
            channel_spec(Path::new(KERNEL), "../fs", &Value::Null),
            Err(ChannelSpecError::InvalidName(_))
        ));
    }

    #[test]
    fn only_the_bundled_web_plugin_gets_the_web_settings_and_search_keys() {
        let mut specs = discover(&PluginSources { kernel: Some(PathBuf::from(KERNEL)), ..Default::default() });
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
        let user = temp("shadow-user");
        touch(&user.join("oxibot-tool-fs"), 0o755);
        touch(&user.join("weather.py"), 0o755);
        let kernel = Some(PathBuf::from(KERNEL));
        let found = discover(&PluginSources { kernel, plugin_dir: Some(user.to_path_buf()), configured: vec![] });
        assert_eq!(found.len(), 4);
        let fs = found.iter().find(|s| s.name == "fs").unwrap();
        assert_eq!(fs.command, user.join("oxibot-tool-fs"));
        assert!(found.iter().any(|s| s.name == "weather"));
    }
}

//! The plugin specs the config asks for: each enabled `plugins` entry, and one MCP bridge per
//! `tools.mcpServers` entry. Kept out of `config` so the description of the file knows
//! nothing of how plugins are spawned and confined.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::{Config, PluginEntry};
use crate::paths;
use crate::plugin::mcp::McpServerConfig;
use crate::plugin::spec::Confinement;
use crate::plugin::{Origin, PluginSpec};

/// Specs for the enabled `plugins` entries.
pub fn plugin_specs(config: &Config) -> Vec<PluginSpec> {
    config.plugins.iter().filter(|p| p.enabled).map(entry_spec).collect()
}

/// Specs for the `tools.mcpServers` entries: the bridge built into the kernel's executable
/// `kernel`, once per server.
pub fn mcp_specs(config: &Config, kernel: &Path) -> Vec<PluginSpec> {
    let servers: BTreeMap<String, McpServerConfig> = config
        .tools
        .mcp_servers
        .iter()
        .map(|(name, entry)| (name.clone(), McpServerConfig::new(entry.clone())))
        .collect();
    crate::plugin::mcp::mcp_specs(kernel, &servers)
}

/// The spec the plugin host starts for one `plugins` entry.
pub fn entry_spec(entry: &PluginEntry) -> PluginSpec {
    let command = paths::expand_tilde(Path::new(&entry.command));
    let name = entry.name.clone().unwrap_or_else(|| crate::plugin::spec::name_from_command(&command));
    let allow_paths = entry.allow_paths.iter().map(|path| paths::expand_tilde(Path::new(path))).collect();
    PluginSpec {
        name,
        command,
        args: entry.args.clone(),
        env: entry.env.clone(),
        origin: Origin::Config,
        confinement: Confinement { workspace: None, allow_paths, programs: Vec::new() },
        replaces: entry.replaces.clone(),
        startup_timeout: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_entries_become_specs_named_after_their_command() {
        let config = Config::parse(r#"{"plugins": [{"command": "/opt/oxibot-tool-weather", "env": {"K": "v"}}, {"command": "x", "enabled": false}]}"#, Path::new("c.json")).unwrap();
        let specs = plugin_specs(&config);
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].name, "weather");
        assert_eq!(specs[0].env["K"], "v");
    }

    #[test]
    fn each_mcp_server_entry_becomes_a_bridge_spec() {
        let config =
            Config::parse(r#"{"tools": {"mcpServers": {"files": {"command": "python3"}}}}"#, Path::new("c.json"))
                .unwrap();
        let specs = mcp_specs(&config, Path::new("/opt/oxibot"));
        assert_eq!(specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["mcp-files"]);
    }
}

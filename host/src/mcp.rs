//! `tools.mcpServers`: nanobot's MCP server entries, and the spec of the bridge plugin
//! (`oxibot __plugin mcp`) that serves one of them.
//!
//! Each server runs as its own plugin process named `mcp-<server>`, so one server crashing or
//! hanging is isolated, supervised and restarted like any plugin. The kernel reads of an entry
//! only what decides how the bridge is started and confined (`command`, `args`, `env.PATH`,
//! `cwd`, `allowPaths`) and hands the bridge the entry unchanged in `OXIBOT_MCP_CONFIG`: the
//! bridge alone validates it (its errors name the key, `tools.mcpServers.<name>.toolTimeout`)
//! and does the MCP talking, so a key this kernel does not know still reaches it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oxibot_proto::{ENV_MCP_CONFIG, ENV_MCP_SERVER, ENV_MEDIA_DIR, PeerKind};
use serde::Deserialize;
use serde_json::Value;

use super::spec::{Origin, PluginSpec, Program};

/// Prefix of the plugin name of an MCP server's bridge.
pub const MCP_PLUGIN_PREFIX: &str = "mcp-";

/// How long a bridge may take to start: its server is started and initialized before the
/// handshake, and an `npx`- or `uvx`-launched server may first have to be fetched.
pub const MCP_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The name of the bridge among the plugins built into the kernel (`oxibot __plugin mcp`).
pub const MCP_BRIDGE: &str = "mcp";

/// One `tools.mcpServers.<name>` entry, kept as the user wrote it.
///
/// The accessors read leniently (a key of the wrong type reads as absent): the bridge, which
/// gets the whole entry, is the one that refuses it with the key's name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct McpServerConfig {
    /// The entry's JSON.
    entry: Value,
}

impl McpServerConfig {
    /// The entry `entry`, as written in the config.
    pub fn new(entry: Value) -> McpServerConfig {
        McpServerConfig { entry }
    }

    /// The entry as written.
    pub fn raw(&self) -> &Value {
        &self.entry
    }

    /// A string-valued key, under either of its spellings.
    fn string(&self, names: &[&str]) -> Option<&str> {
        names.iter().find_map(|name| self.entry.get(*name)?.as_str())
    }

    /// The strings of an array-valued key, under either of its spellings.
    fn strings(&self, names: &[&str]) -> Vec<String> {
        let array = names.iter().find_map(|name| self.entry.get(*name)?.as_array());
        array.into_iter().flatten().filter_map(|item| item.as_str().map(str::to_owned)).collect()
    }

    /// The stdio server's program, when the entry names one.
    pub fn command(&self) -> Option<&str> {
        self.string(&["command"]).filter(|command| !command.is_empty())
    }

    /// The stdio server's arguments.
    pub fn args(&self) -> Vec<String> {
        self.strings(&["args"])
    }

    /// The `PATH` the entry's `env` gives its server, if any.
    pub fn search_path(&self) -> Option<&str> {
        self.entry.get("env")?.get("PATH")?.as_str()
    }

    /// The server's working directory with `~` expanded.
    pub fn cwd(&self) -> Option<PathBuf> {
        let cwd = self.string(&["cwd"]).filter(|dir| !dir.is_empty())?;
        Some(crate::paths::expand_tilde(Path::new(cwd)))
    }

    /// `allowPaths` with `~` expanded: paths outside the workspace the bridge and its server may
    /// read and write while the workspace is restricted, as for a `plugins` entry.
    pub fn allow_paths(&self) -> Vec<PathBuf> {
        let paths = self.strings(&["allowPaths", "allow_paths"]);
        paths.iter().map(|path| crate::paths::expand_tilde(Path::new(path))).collect()
    }

    /// The server program the bridge starts, for its sandbox.
    fn program(&self) -> Option<Program> {
        let command = crate::paths::expand_tilde(Path::new(self.command()?));
        let search_path = self.search_path().map(OsString::from).or_else(|| std::env::var_os("PATH"));
        Some(Program { command, args: self.args(), search_path, cwd: self.cwd() })
    }
}

/// The plugin name of server `server`: `mcp-` plus the name with every character outside
/// `[A-Za-z0-9_-]` replaced by `_`.
pub fn plugin_name(server: &str) -> String {
    let clean: String =
        server.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    format!("{MCP_PLUGIN_PREFIX}{clean}")
}

/// One bridge spec per server (in name order), each running `kernel __plugin mcp` (`kernel`
/// is the kernel's own executable) with the server's name in `OXIBOT_MCP_SERVER`, its entry as written in `OXIBOT_MCP_CONFIG`
/// and `<data dir>/media/mcp-<server>` in `OXIBOT_MEDIA_DIR`. While confined, the bridge may
/// also run its server's program (see `Confinement::programs`) and write its media directory.
pub fn mcp_specs(kernel: &Path, servers: &BTreeMap<String, McpServerConfig>) -> Vec<PluginSpec> {
    let mut specs = Vec::new();
    for (server, config) in servers {
        let mut spec =
            PluginSpec { origin: Origin::Config, ..PluginSpec::bundled(kernel, &PeerKind::Tool, MCP_BRIDGE) };
        spec.name = plugin_name(server);
        spec.startup_timeout = Some(MCP_STARTUP_TIMEOUT);
        spec.confinement.allow_paths = config.allow_paths().into_iter().chain(config.cwd()).collect();
        spec.confinement.programs = config.program().into_iter().collect();
        let media = crate::paths::data_dir().join("media").join(&spec.name);
        spec.env.insert(ENV_MCP_SERVER.to_owned(), server.clone());
        spec.env.insert(ENV_MCP_CONFIG.to_owned(), config.raw().to_string());
        spec.env.insert(ENV_MEDIA_DIR.to_owned(), media.display().to_string());
        specs.push(spec);
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn servers(value: Value) -> BTreeMap<String, McpServerConfig> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_bridge_gets_the_entry_exactly_as_written_unknown_keys_included() {
        let entry = json!({"command": "python3", "args": ["s.py"], "toolTimeout": "soon", "futureKey": {"a": 1}});
        let specs = mcp_specs(Path::new("/opt/oxibot/oxibot"), &servers(json!({"files": entry})));
        let forwarded: Value = serde_json::from_str(&specs[0].env[ENV_MCP_CONFIG]).unwrap();
        assert_eq!(forwarded, entry);
        assert_eq!(specs[0].env[ENV_MCP_SERVER], "files");
    }

    #[test]
    fn each_server_becomes_a_bridge_spec_with_its_paths_and_media_dir() {
        let specs = mcp_specs(
            Path::new("/opt/oxibot/oxibot"),
            &servers(json!({
                "files": {"command": "python3", "args": ["s.py"], "env": {"PATH": "/srv/bin"}},
                "my.web": {"url": "http://127.0.0.1:1/mcp", "allowPaths": ["/srv/a"], "cwd": "/srv/b"},
                "broken": {"command": 7},
            })),
        );
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mcp-broken", "mcp-files", "mcp-my_web"], "the bridge, not the kernel, refuses an entry");
        assert_eq!(specs[1].command_line(), "/opt/oxibot/oxibot __plugin mcp");
        let program = &specs[1].confinement.programs[0];
        assert_eq!(
            (program.command.as_path(), program.args.as_slice()),
            (Path::new("python3"), &["s.py".to_owned()][..])
        );
        assert_eq!(program.search_path, Some(OsString::from("/srv/bin")));
        assert!(specs[0].confinement.programs.is_empty() && specs[2].confinement.programs.is_empty());
        assert_eq!(specs[2].confinement.allow_paths, [Path::new("/srv/a"), Path::new("/srv/b")]);
        let media = crate::paths::data_dir().join("media/mcp-my_web");
        assert_eq!(specs[2].env[ENV_MEDIA_DIR], media.display().to_string());
    }

    #[test]
    fn snake_case_allow_paths_and_a_tilde_cwd_are_read() {
        let config: McpServerConfig =
            serde_json::from_value(json!({"allow_paths": ["~/data"], "cwd": "~/srv"})).unwrap();
        let home = crate::paths::home_dir();
        assert_eq!(config.allow_paths(), [home.join("data")]);
        assert_eq!(config.cwd(), Some(home.join("srv")));
    }
}

//! `tools.mcpServers`: nanobot's MCP server entries, and the spec of the bridge plugin
//! (`oxibot-tool-mcp`) that serves one of them.
//!
//! Each server runs as its own plugin process named `mcp-<server>`, so one server crashing or
//! hanging is isolated, supervised and restarted like any plugin. The kernel only validates an
//! entry and resolves its transport; the bridge does the MCP talking.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use oxibot_proto::ENV_MCP_CONFIG;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::spec::{Origin, PluginSpec, TOOL_PREFIX};

/// Prefix of the plugin name of an MCP server's bridge.
pub const MCP_PLUGIN_PREFIX: &str = "mcp-";

/// How long a bridge may take to start: its server is started and initialized before the
/// handshake, and an `npx`- or `uvx`-launched server may first have to be fetched.
pub const MCP_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The bridge executable's name, without the directory.
pub const MCP_BRIDGE: &str = "oxibot-tool-mcp";

/// How the bridge reaches an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio,
    /// The legacy HTTP+SSE transport.
    Sse,
    /// Streamable HTTP at one URL.
    #[serde(alias = "streamable_http", alias = "http")]
    StreamableHttp,
}

impl McpTransport {
    /// The name used in config and in the bridge's config.
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Stdio => "stdio",
            McpTransport::Sse => "sse",
            McpTransport::StreamableHttp => "streamableHttp",
        }
    }
}

/// One `tools.mcpServers.<name>` entry (camelCase keys, snake_case accepted, unknown keys kept).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct McpServerConfig {
    /// The transport; inferred from `command` (stdio) or `url` (streamable HTTP, or SSE when
    /// the URL ends in `/sse`) when absent.
    #[serde(rename = "type")]
    pub transport: Option<McpTransport>,
    /// The server program (stdio).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables for it.
    pub env: BTreeMap<String, String>,
    /// Its working directory (`~` allowed).
    pub cwd: Option<String>,
    /// The server's URL (HTTP transports).
    pub url: String,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Seconds one tool call may take (30 when absent).
    #[serde(alias = "tool_timeout")]
    pub tool_timeout: Option<u64>,
    /// The server's tools to expose, by their MCP name or their oxibot name; `["*"]` or absent
    /// exposes all.
    #[serde(alias = "enabled_tools")]
    pub enabled_tools: Option<Vec<String>>,
    /// Paths outside the workspace the bridge and its server may read and write while the
    /// workspace is restricted, as for a `plugins` entry (`~` allowed; `cwd` is added).
    #[serde(alias = "allow_paths")]
    pub allow_paths: Vec<String>,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl McpServerConfig {
    /// The transport, given or inferred; `None` when the entry has neither `command` nor `url`.
    pub fn resolved_transport(&self) -> Option<McpTransport> {
        if let Some(transport) = self.transport {
            return Some(transport);
        }
        if !self.command.is_empty() {
            return Some(McpTransport::Stdio);
        }
        if self.url.is_empty() {
            return None;
        }
        let sse = self.url.trim_end_matches('/').ends_with("/sse");
        Some(if sse { McpTransport::Sse } else { McpTransport::StreamableHttp })
    }

    /// The JSON handed to the bridge: the entry with its transport resolved, `cwd` expanded,
    /// and the server's name, all keys camelCase.
    pub fn bridge_config(&self, server: &str) -> Value {
        let cwd = self.cwd.as_ref().map(|dir| crate::paths::expand_tilde(Path::new(dir)).display().to_string());
        json!({
            "name": server,
            "type": self.resolved_transport().map(McpTransport::as_str),
            "command": self.command,
            "args": self.args,
            "env": self.env,
            "cwd": cwd,
            "url": self.url,
            "headers": self.headers,
            "toolTimeout": self.tool_timeout,
            "enabledTools": self.enabled_tools,
        })
    }
}

/// The plugin name of server `server`: `mcp-` plus the name with every character outside
/// `[A-Za-z0-9_-]` replaced by `_`.
pub fn plugin_name(server: &str) -> String {
    let clean: String =
        server.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    format!("{MCP_PLUGIN_PREFIX}{clean}")
}

/// One bridge spec per server (in name order), each running `bundled_dir/oxibot-tool-mcp`
/// with the server's config as JSON in `OXIBOT_MCP_CONFIG`. An entry with neither `command`
/// nor `url` is skipped with a warning.
pub fn mcp_specs(bundled_dir: &Path, servers: &BTreeMap<String, McpServerConfig>) -> Vec<PluginSpec> {
    debug_assert!(MCP_BRIDGE.starts_with(TOOL_PREFIX));
    let mut specs = Vec::new();
    for (server, config) in servers {
        if config.resolved_transport().is_none() {
            tracing::warn!(%server, "tools.mcpServers entry has neither command nor url; not started");
            continue;
        }
        let mut spec = PluginSpec::for_executable(bundled_dir.join(MCP_BRIDGE), Origin::Config);
        spec.name = plugin_name(server);
        spec.startup_timeout = Some(MCP_STARTUP_TIMEOUT);
        let paths = config.allow_paths.iter().chain(config.cwd.as_ref());
        spec.confinement.allow_paths = paths.map(|path| crate::paths::expand_tilde(Path::new(path))).collect();
        spec.env.insert(ENV_MCP_CONFIG.to_owned(), config.bridge_config(server).to_string());
        specs.push(spec);
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(value: Value) -> McpServerConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_transport_is_inferred_from_command_or_url() {
        assert_eq!(entry(json!({"command": "npx"})).resolved_transport(), Some(McpTransport::Stdio));
        assert_eq!(entry(json!({"url": "http://h/mcp"})).resolved_transport(), Some(McpTransport::StreamableHttp));
        assert_eq!(entry(json!({"url": "http://h/sse"})).resolved_transport(), Some(McpTransport::Sse));
        assert_eq!(entry(json!({"type": "sse", "url": "http://h/x"})).resolved_transport(), Some(McpTransport::Sse));
        assert_eq!(entry(json!({})).resolved_transport(), None);
    }

    #[test]
    fn snake_case_keys_are_accepted_and_unknown_keys_kept() {
        let config = entry(json!({"command": "x", "tool_timeout": 5, "enabled_tools": ["a"], "note": 1}));
        assert_eq!(config.tool_timeout, Some(5));
        assert_eq!(config.enabled_tools, Some(vec!["a".to_owned()]));
        assert_eq!(config.extra["note"], json!(1));
    }

    #[test]
    fn each_server_becomes_a_bridge_spec_carrying_its_config() {
        let servers: BTreeMap<String, McpServerConfig> = serde_json::from_value(json!({
            "files": {"command": "python3", "args": ["s.py"], "toolTimeout": 7},
            "my.web": {"url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "k"}, "allowPaths": ["/srv/a"], "cwd": "/srv/b"},
            "broken": {},
        }))
        .unwrap();
        let specs = mcp_specs(Path::new("/opt/oxibot"), &servers);
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mcp-files", "mcp-my_web"]);
        assert_eq!(specs[0].command, Path::new("/opt/oxibot/oxibot-tool-mcp"));
        let config: Value = serde_json::from_str(&specs[0].env[ENV_MCP_CONFIG]).unwrap();
        assert_eq!(config["name"], "files");
        assert_eq!(config["type"], "stdio");
        assert_eq!(config["args"], json!(["s.py"]));
        assert_eq!(config["toolTimeout"], 7);
        let config: Value = serde_json::from_str(&specs[1].env[ENV_MCP_CONFIG]).unwrap();
        assert_eq!(config["type"], "streamableHttp");
        assert_eq!(config["headers"], json!({"X-Key": "k"}));
        assert_eq!(specs[1].confinement.allow_paths, [Path::new("/srv/a"), Path::new("/srv/b")]);
    }
}

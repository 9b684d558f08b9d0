//! The one MCP server this bridge serves: its name (`OXIBOT_MCP_SERVER`) and its
//! `tools.mcpServers` entry exactly as the user wrote it (`OXIBOT_MCP_CONFIG`), validated here
//! with errors that name the key (`tools.mcpServers.<name>.toolTimeout: …`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use oxibot_proto::{ENV_MCP_CONFIG, ENV_MCP_SERVER};
use serde::Deserialize;
use serde_json::Value;

/// Seconds a tool call may take when the config gives no `toolTimeout`.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 30;

/// The keys an entry may have; the bridge warns about any other and ignores it. `allowPaths`
/// is the kernel's (it shapes the sandbox).
const KNOWN_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "toolTimeout",
    "tool_timeout",
    "enabledTools",
    "enabled_tools",
    "allowPaths",
    "allow_paths",
];

/// Why the bridge cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The bridge was not started for a configured server.
    #[error("{variable} is not set; MCP servers are configured in config.json under tools.mcpServers")]
    Missing {
        /// The variable that is missing.
        variable: &'static str,
    },
    /// `OXIBOT_MCP_CONFIG` is not JSON.
    #[error("{ENV_MCP_CONFIG} is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// A key of the entry holds a value of the wrong shape.
    #[error("{key}: {message}")]
    Invalid {
        /// The key's path from the top of the config, e.g. `tools.mcpServers.files.toolTimeout`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

/// How to reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio,
    /// The legacy HTTP+SSE transport: a `GET` event stream that names the endpoint to `POST`
    /// requests to, with responses coming back on the stream.
    Sse,
    /// Streamable HTTP at one URL.
    #[serde(alias = "streamable_http", alias = "http")]
    StreamableHttp,
}

impl Transport {
    /// The config name of the transport.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Sse => "sse",
            Transport::StreamableHttp => "streamableHttp",
        }
    }
}

/// The keys of one `tools.mcpServers` entry (camelCase keys, snake_case accepted).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Entry {
    #[serde(rename = "type")]
    transport: Option<Transport>,
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: String,
    headers: BTreeMap<String, String>,
    #[serde(alias = "tool_timeout")]
    tool_timeout: Option<u64>,
    #[serde(alias = "enabled_tools")]
    enabled_tools: Option<Vec<String>>,
    #[serde(alias = "allow_paths")]
    #[allow(dead_code, reason = "read by the kernel; parsed here so a bad value is named")]
    allow_paths: Vec<String>,
}

/// One server's validated config.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The server's name in `tools.mcpServers`.
    pub name: String,
    /// The transport, given or inferred from `command` or `url`.
    pub transport: Transport,
    /// The server program (stdio).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables for it.
    pub env: BTreeMap<String, String>,
    /// Its working directory, `~` expanded.
    pub cwd: Option<PathBuf>,
    /// The server's URL (HTTP transports).
    pub url: String,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Seconds one tool call may take.
    pub tool_timeout: Option<u64>,
    /// Tools to expose (MCP or oxibot names); absent or `["*"]` exposes all.
    pub enabled_tools: Option<Vec<String>>,
    /// Keys of the entry this version does not read, as full paths.
    pub ignored_keys: Vec<String>,
}

impl ServerConfig {
    /// Reads the server's name and entry from the environment the kernel set.
    pub fn from_env() -> Result<ServerConfig, ConfigError> {
        let var = |variable| std::env::var(variable).map_err(|_| ConfigError::Missing { variable });
        ServerConfig::parse(&var(ENV_MCP_SERVER)?, &var(ENV_MCP_CONFIG)?)
    }

    /// Validates the entry `text` of server `name`.
    pub fn parse(name: &str, text: &str) -> Result<ServerConfig, ConfigError> {
        let prefix = format!("tools.mcpServers.{name}");
        let invalid = |key: String, message: String| ConfigError::Invalid { key, message };
        let value: Value = serde_json::from_str(text).map_err(ConfigError::NotJson)?;
        let Value::Object(map) = &value else {
            return Err(invalid(prefix, format!("expected an object with `command` or `url`, found {value}")));
        };
        let ignored_keys =
            map.keys().filter(|key| !KNOWN_KEYS.contains(&key.as_str())).map(|key| format!("{prefix}.{key}")).collect();
        let entry: Entry = serde_path_to_error::deserialize(&value)
            .map_err(|e| invalid(format!("{prefix}.{}", e.path()), e.inner().to_string()))?;
        let transport = match entry.transport {
            Some(transport) => transport,
            None if !entry.command.is_empty() => Transport::Stdio,
            None if entry.url.trim_end_matches('/').ends_with("/sse") => Transport::Sse,
            None if !entry.url.is_empty() => Transport::StreamableHttp,
            None => return Err(invalid(prefix, "needs `command` (a stdio server) or `url` (an HTTP server)".into())),
        };
        let needed = match transport {
            Transport::Stdio if entry.command.is_empty() => Some("command"),
            Transport::Sse | Transport::StreamableHttp if entry.url.is_empty() => Some("url"),
            _ => None,
        };
        if let Some(key) = needed {
            return Err(invalid(format!("{prefix}.{key}"), format!("transport {} needs it", transport.as_str())));
        }
        let cwd = entry.cwd.filter(|dir| !dir.is_empty()).map(oxibot_plugin::chat::expand_tilde);
        Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            command: entry.command,
            args: entry.args,
            env: entry.env,
            cwd,
            url: entry.url,
            headers: entry.headers,
            tool_timeout: entry.tool_timeout,
            enabled_tools: entry.enabled_tools,
            ignored_keys,
        })
    }

    /// How long one tool call may take.
    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs(self.tool_timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT_SECS).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdio_entry_parses_with_snake_case_keys() {
        let config =
            ServerConfig::parse("f", r#"{"command":"python3","tool_timeout":3,"enabled_tools":["a"]}"#).unwrap();
        assert_eq!(config.transport, Transport::Stdio);
        assert_eq!(config.tool_timeout(), Duration::from_secs(3));
        assert_eq!(config.enabled_tools, Some(vec!["a".to_owned()]));
    }

    #[test]
    fn the_transport_is_inferred_from_command_or_url() {
        let transport = |text: &str| ServerConfig::parse("f", text).unwrap().transport;
        assert_eq!(transport(r#"{"url":"http://h/mcp"}"#), Transport::StreamableHttp);
        assert_eq!(transport(r#"{"url":"http://h/sse/"}"#), Transport::Sse);
        assert_eq!(transport(r#"{"type":"sse","url":"http://h/events"}"#), Transport::Sse);
        assert_eq!(transport(r#"{"type":"streamable_http","url":"http://h/sse"}"#), Transport::StreamableHttp);
    }

    #[test]
    fn the_timeout_defaults_to_thirty_seconds() {
        let config = ServerConfig::parse("f", r#"{"url":"http://127.0.0.1:1/mcp"}"#).unwrap();
        assert_eq!(config.tool_timeout(), Duration::from_secs(30));
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_by_its_key() {
        let error = ServerConfig::parse("files", r#"{"command":"x","toolTimeout":"soon"}"#).unwrap_err();
        assert!(error.to_string().starts_with("tools.mcpServers.files.toolTimeout: invalid type"), "{error}");
        let error = ServerConfig::parse("files", r#"{"command":"x","headers":{"A":1}}"#).unwrap_err();
        assert!(error.to_string().starts_with("tools.mcpServers.files.headers.A: "), "{error}");
        let error = ServerConfig::parse("files", r#"{"command":"x","type":"pigeon"}"#).unwrap_err();
        assert!(error.to_string().starts_with("tools.mcpServers.files.type: unknown variant"), "{error}");
    }

    #[test]
    fn an_entry_without_what_its_transport_needs_is_refused() {
        let error = ServerConfig::parse("f", r#"{"type":"stdio"}"#).unwrap_err();
        assert_eq!(error.to_string(), "tools.mcpServers.f.command: transport stdio needs it");
        let error = ServerConfig::parse("f", r#"{}"#).unwrap_err();
        assert_eq!(error.to_string(), "tools.mcpServers.f: needs `command` (a stdio server) or `url` (an HTTP server)");
        assert!(ServerConfig::parse("f", "[]").unwrap_err().to_string().starts_with("tools.mcpServers.f: expected"));
    }

    #[test]
    fn unknown_keys_are_listed_not_refused() {
        let config = ServerConfig::parse("f", r#"{"command":"x","allowPaths":["/a"],"retries":3}"#).unwrap();
        assert_eq!(config.ignored_keys, ["tools.mcpServers.f.retries"]);
    }
}

//! The one MCP server this bridge serves, as the kernel hands it over in `OXIBOT_MCP_CONFIG`.

use std::collections::BTreeMap;
use std::time::Duration;

use oxibot_proto::ENV_MCP_CONFIG;
use serde::Deserialize;

/// Seconds a tool call may take when the config gives no `toolTimeout`.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 30;

/// Why the bridge cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `OXIBOT_MCP_CONFIG` is not set: the bridge was not started for a configured server.
    #[error("{ENV_MCP_CONFIG} is not set; MCP servers are configured in config.json under tools.mcpServers")]
    Missing,
    /// The config is not valid JSON of the expected shape.
    #[error("the MCP server config in {ENV_MCP_CONFIG} is invalid: {0}")]
    Invalid(#[from] serde_json::Error),
    /// The transport needs a key the entry does not have.
    #[error("MCP server '{server}': transport {transport} needs `{key}`")]
    MissingKey {
        /// The server's name.
        server: String,
        /// The transport.
        transport: &'static str,
        /// The key it needs.
        key: &'static str,
    },
}

/// How to reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio,
    /// The legacy HTTP+SSE transport. rmcp has no client for it, so the streamable HTTP client
    /// is tried at the URL: servers that speak both transports work, SSE-only servers do not.
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

/// One `tools.mcpServers` entry plus its name (camelCase keys, snake_case accepted).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServerConfig {
    /// The server's name in `tools.mcpServers`.
    pub name: String,
    /// The transport; inferred from `command` or `url` when absent.
    #[serde(rename = "type")]
    pub transport: Option<Transport>,
    /// The server program (stdio).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables for it.
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<String>,
    /// The server's URL (HTTP transports).
    pub url: String,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Seconds one tool call may take.
    #[serde(alias = "tool_timeout")]
    pub tool_timeout: Option<u64>,
    /// Tools to expose (MCP or oxibot names); absent or `["*"]` exposes all.
    #[serde(alias = "enabled_tools")]
    pub enabled_tools: Option<Vec<String>>,
}

impl ServerConfig {
    /// Reads the config from `OXIBOT_MCP_CONFIG`.
    pub fn from_env() -> Result<ServerConfig, ConfigError> {
        let text = std::env::var(ENV_MCP_CONFIG).map_err(|_| ConfigError::Missing)?;
        ServerConfig::parse(&text)
    }

    /// Parses and checks config JSON.
    pub fn parse(text: &str) -> Result<ServerConfig, ConfigError> {
        let config: ServerConfig = serde_json::from_str(text)?;
        config.check()?;
        Ok(config)
    }

    /// The transport, given or inferred.
    pub fn transport(&self) -> Transport {
        match self.transport {
            Some(transport) => transport,
            None if !self.command.is_empty() => Transport::Stdio,
            None if self.url.trim_end_matches('/').ends_with("/sse") => Transport::Sse,
            None => Transport::StreamableHttp,
        }
    }

    /// How long one tool call may take.
    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs(self.tool_timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT_SECS).max(1))
    }

    fn check(&self) -> Result<(), ConfigError> {
        let transport = self.transport();
        let missing = |key| ConfigError::MissingKey { server: self.name.clone(), transport: transport.as_str(), key };
        match transport {
            Transport::Stdio if self.command.is_empty() => Err(missing("command")),
            Transport::Sse | Transport::StreamableHttp if self.url.is_empty() => Err(missing("url")),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdio_entry_parses_with_snake_case_keys() {
        let config =
            ServerConfig::parse(r#"{"name":"f","command":"python3","tool_timeout":3,"enabled_tools":["a"]}"#).unwrap();
        assert_eq!(config.transport(), Transport::Stdio);
        assert_eq!(config.tool_timeout(), Duration::from_secs(3));
        assert_eq!(config.enabled_tools, Some(vec!["a".to_owned()]));
    }

    #[test]
    fn the_timeout_defaults_to_thirty_seconds() {
        let config = ServerConfig::parse(r#"{"name":"f","url":"http://127.0.0.1:1/mcp"}"#).unwrap();
        assert_eq!(config.transport(), Transport::StreamableHttp);
        assert_eq!(config.tool_timeout(), Duration::from_secs(30));
    }

    #[test]
    fn an_entry_without_what_its_transport_needs_is_refused() {
        let error = ServerConfig::parse(r#"{"name":"f","type":"stdio"}"#).unwrap_err();
        assert_eq!(error.to_string(), "MCP server 'f': transport stdio needs `command`");
    }
}

//! The connection to the MCP server: connecting over its transport, listing its tools, calling
//! one with a timeout, and noticing when the server goes away.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use oxibot_plugin::{Tool, ToolError};
use rmcp::model::{CallToolRequestParams, ClientConfig, JsonObject, MetaObject, ProtocolVersion, RequestMetaObject};

/// The `_meta` key of a `tools/call` request that carries the kernel's idempotency key of the
/// call (the same for every attempt of one call).
pub const IDEMPOTENCY_META_KEY: &str = "oxibot/idempotencyKey";
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, RunningService};
use rmcp::transport::IntoTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ServiceError, ServiceExt};
use serde_json::Value;

use crate::config::{ServerConfig, Transport};
use crate::media::MediaDir;
use crate::sse::{SseError, SseTransport};
use crate::{naming, render, schema};

/// Variables of the bridge's own environment its server must not inherit: the plugin socket's
/// one-time token and the server's config (which may hold headers' secrets).
const WITHHELD_FROM_SERVER: &[&str] = &[
    oxibot_proto::ENV_SOCKET,
    oxibot_proto::ENV_TOKEN,
    oxibot_proto::ENV_MCP_CONFIG,
    oxibot_proto::ENV_MCP_SERVER,
    oxibot_proto::ENV_MEDIA_DIR,
];

/// The MCP revisions the bridge offers to `server/discover`, newest first: 2026-07-28 (no
/// `initialize`) where the server has it; else the `initialize` handshake offers
/// [`HANDSHAKE_REVISION`], and its answer (down to 2024-11-05) is what the connection speaks.
pub const OFFERED_REVISIONS: [ProtocolVersion; 5] = [
    ProtocolVersion::V_2026_07_28,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

/// The revision the `initialize` handshake offers when the server has no `server/discover`.
pub const HANDSHAKE_REVISION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The client as it introduces itself in the `initialize` handshake: offering
/// [`HANDSHAKE_REVISION`].
fn handshake_client() -> ClientConfig {
    let mut info = ClientConfig::default();
    info.protocol_version = HANDSHAKE_REVISION;
    info
}

/// Connects through a transport from `connect`: first with `server/discover` (2026-07-28),
/// waiting as long as the server takes to start; a server that does not know it (a JSON-RPC
/// error) or offers no revision of that era gets a new connection and the `initialize`
/// handshake, whose answer is the revision spoken.
async fn negotiate<T, E, A>(
    server: &str,
    mut connect: impl FnMut() -> Result<T, BridgeError>,
) -> Result<RunningService<RoleClient, ClientConfig>, BridgeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let init_error =
        |error: ClientInitializeError| BridgeError::Initialize { server: server.to_owned(), reason: error.to_string() };
    let discover = ClientLifecycleMode::Discover { preferred_versions: OFFERED_REVISIONS.to_vec() };
    match handshake_client().serve_with_lifecycle(connect()?, discover).await {
        Ok(service) => Ok(service),
        Err(ClientInitializeError::JsonRpcError(_) | ClientInitializeError::NoCompatibleProtocolVersion { .. }) => {
            handshake_client().serve(connect()?).await.map_err(init_error)
        }
        Err(error) => Err(init_error(error)),
    }
}

/// The stdio server's process, started now (without the bridge's own variables).
fn child_process(config: &ServerConfig) -> Result<TokioChildProcess, BridgeError> {
    let mut command = tokio::process::Command::new(&config.command);
    for variable in WITHHELD_FROM_SERVER {
        command.env_remove(variable);
    }
    command.args(&config.args).envs(&config.env);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    TokioChildProcess::new(command).map_err(|source| BridgeError::Spawn {
        server: config.name.clone(),
        command: config.command.clone(),
        source,
    })
}

/// Seconds the kernel waits beyond `toolTimeout` before it treats the bridge as hung, so the
/// bridge's own, clearer timeout error comes first.
const KERNEL_TIMEOUT_MARGIN_SECS: u64 = 5;

/// Why the bridge could not reach the server.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The server program could not be started.
    #[error("MCP server '{server}': cannot start `{command}`: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A configured header is not a valid HTTP header.
    #[error("MCP server '{server}': invalid header `{header}`")]
    Header {
        /// The server's name.
        server: String,
        /// The header's name.
        header: String,
    },
    /// The legacy SSE stream could not be opened.
    #[error("MCP server '{server}': {source}")]
    Sse {
        /// The server's name.
        server: String,
        /// What went wrong.
        source: SseError,
    },
    /// The MCP handshake failed.
    #[error("MCP server '{server}': initialization failed: {reason}")]
    Initialize {
        /// The server's name.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// Listing the tools failed.
    #[error("MCP server '{server}': cannot list tools: {source}")]
    ListTools {
        /// The server's name.
        server: String,
        /// The client's error.
        source: ServiceError,
    },
}

/// One exposed tool: its MCP name and the spec the kernel sees.
#[derive(Debug, Clone)]
pub struct BridgedTool {
    /// The tool's name on the MCP server.
    pub mcp_name: String,
    /// The oxibot tool (name `mcp_<server>_<tool>`, normalised schema).
    pub tool: Tool,
    /// The oxibot name.
    pub name: String,
}

/// A connected server.
pub struct Bridge {
    /// The server's config.
    config: ServerConfig,
    /// The running client; taken by [`Bridge::watch`].
    service: Option<RunningService<RoleClient, ClientConfig>>,
    /// Handle to send requests through.
    peer: Peer<RoleClient>,
    /// Set once the connection has ended, so calls after it fail with that cause.
    closed: Arc<AtomicBool>,
}

impl Bridge {
    /// Connects to the server and negotiates the newest revision both speak
    /// ([`OFFERED_REVISIONS`]; the legacy HTTP+SSE transport predates `server/discover` and
    /// runs the `initialize` handshake only).
    pub async fn connect(config: ServerConfig) -> Result<Bridge, BridgeError> {
        let server = config.name.clone();
        let service = match config.transport {
            Transport::Stdio => negotiate(&server, || child_process(&config)).await?,
            Transport::Sse => {
                let headers = http_headers(&config)?;
                let transport = SseTransport::connect(reqwest::Client::new(), &config.url, headers)
                    .await
                    .map_err(|source| BridgeError::Sse { server: server.clone(), source })?;
                handshake_client()
                    .serve(transport)
                    .await
                    .map_err(|e| BridgeError::Initialize { server: server.clone(), reason: e.to_string() })?
            }
            Transport::StreamableHttp => {
                let headers: std::collections::HashMap<_, _> =
                    http_headers(&config)?.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                negotiate(&server, || {
                    let settings = StreamableHttpClientTransportConfig::with_uri(config.url.clone())
                        .custom_headers(headers.clone());
                    Ok(StreamableHttpClientTransport::with_client(reqwest::Client::new(), settings))
                })
                .await?
            }
        };
        let peer = service.peer().clone();
        Ok(Bridge { config, service: Some(service), peer, closed: Arc::default() })
    }

    /// The MCP revision the connection speaks (negotiated at connect; the legacy HTTP+SSE
    /// transport uses the `initialize` handshake alone).
    pub fn revision(&self) -> String {
        self.peer.peer_info().map_or_else(|| "unknown".to_owned(), |info| info.protocol_version.to_string())
    }

    /// The server's tools that `enabledTools` lets through, as oxibot tools.
    pub async fn tools(&self) -> Result<Vec<BridgedTool>, BridgeError> {
        let server = &self.config.name;
        let listed = self
            .peer
            .list_all_tools()
            .await
            .map_err(|source| BridgeError::ListTools { server: server.clone(), source })?;
        let timeout = self.config.tool_timeout().as_secs() + KERNEL_TIMEOUT_MARGIN_SECS;
        let mut tools = Vec::new();
        for listed in listed {
            let mcp_name = listed.name.to_string();
            let name = naming::tool_name(server, &mcp_name);
            if !naming::is_enabled(self.config.enabled_tools.as_deref(), &mcp_name, &name) {
                continue;
            }
            let description = listed.description.as_deref().or(listed.title.as_deref()).unwrap_or(&mcp_name);
            let description = format!("{description} (MCP server '{server}')");
            let parameters = schema::normalise(&Value::Object((*listed.input_schema).clone()));
            let mut tool = Tool::new(name.clone(), description, parameters).timeout_secs(timeout);
            if listed.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true) {
                tool = tool.read_only();
            }
            tools.push(BridgedTool { mcp_name, tool, name });
        }
        Ok(tools)
    }

    /// A handle that calls tools on this server, saving images of results to `media`.
    pub fn caller(&self, media: MediaDir) -> Caller {
        Caller {
            server: Arc::from(self.config.name.as_str()),
            peer: self.peer.clone(),
            timeout: self.config.tool_timeout(),
            closed: self.closed.clone(),
            media: Arc::new(media),
        }
    }

    /// Waits until the connection ends (the server exited, crashed or hung up) and returns a
    /// description of why.
    pub async fn watch(mut self) -> String {
        let Some(service) = self.service.take() else { return "the connection was already closed".to_owned() };
        let reason = match service.waiting().await {
            Ok(reason) => format!("{reason:?}"),
            Err(error) => error.to_string(),
        };
        self.closed.store(true, Ordering::SeqCst);
        reason
    }
}

/// Calls tools on the server; cheap to clone into every handler.
#[derive(Clone)]
pub struct Caller {
    /// The server's name, for error messages.
    server: Arc<str>,
    /// Handle to send requests through.
    peer: Peer<RoleClient>,
    /// How long one call may take.
    timeout: std::time::Duration,
    /// Set once the connection has ended.
    closed: Arc<AtomicBool>,
    /// Where images and other binary content of results are saved.
    media: Arc<MediaDir>,
}

impl Caller {
    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Calls MCP tool `tool` with `arguments`; the result's text, or an error the model can read.
    /// The kernel's idempotency key of the call, when it has one, goes in the request's
    /// `_meta` as [`IDEMPOTENCY_META_KEY`], so a server that can de-duplicate does.
    pub async fn call(&self, tool: &str, arguments: Value, idempotency_key: Option<&str>) -> Result<String, ToolError> {
        let server = &self.server;
        if self.closed.load(Ordering::SeqCst) {
            return Err(ToolError::new(format!("MCP server '{server}' has stopped; it is being restarted, try again")));
        }
        let arguments: JsonObject = match arguments {
            Value::Object(map) => map,
            Value::Null => JsonObject::new(),
            other => return Err(ToolError::new(format!("invalid arguments: expected an object, got {other}"))),
        };
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        if let Some(key) = idempotency_key {
            let mut meta = JsonObject::new();
            meta.insert(IDEMPOTENCY_META_KEY.to_owned(), Value::String(key.to_owned()));
            params.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        let outcome = tokio::time::timeout(self.timeout, self.peer.call_tool(params)).await;
        let result = match outcome {
            Err(_) => {
                let secs = self.timeout.as_secs();
                return Err(ToolError::new(format!(
                    "MCP tool '{tool}' on server '{server}' timed out after {secs} s (toolTimeout)"
                )));
            }
            Ok(Err(error)) => return Err(call_error(server, tool, &error)),
            Ok(Ok(result)) => result,
        };
        let result = serde_json::to_value(&result)
            .map_err(|e| ToolError::new(format!("MCP server '{server}' sent a result that cannot be read: {e}")))?;
        let name = naming::tool_name(server, tool);
        let text = render::render(&result, &self.media, &name);
        if render::is_error(&result) { Err(ToolError::new(text)) } else { Ok(text) }
    }
}

/// The model-readable error for a failed call.
fn call_error(server: &str, tool: &str, error: &ServiceError) -> ToolError {
    match error {
        ServiceError::McpError(error) => {
            ToolError::new(format!("MCP tool '{tool}' on server '{server}' failed: {}", error.message))
        }
        ServiceError::TransportClosed | ServiceError::TransportSend(_) | ServiceError::Cancelled { .. } => {
            ToolError::new(format!(
                "MCP server '{server}' went away during the call to '{tool}' ({error}); it is being restarted, try again"
            ))
        }
        other => ToolError::new(format!("MCP tool '{tool}' on server '{server}' failed: {other}")),
    }
}

/// The configured headers as HTTP headers.
fn http_headers(config: &ServerConfig) -> Result<reqwest::header::HeaderMap, BridgeError> {
    let invalid = |header: &str| BridgeError::Header { server: config.name.clone(), header: header.to_owned() };
    config
        .headers
        .iter()
        .map(|(name, value)| {
            let header_name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid(name))?;
            let header_value = reqwest::header::HeaderValue::from_str(value).map_err(|_| invalid(name))?;
            Ok((header_name, header_value))
        })
        .collect()
}

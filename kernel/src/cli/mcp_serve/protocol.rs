//! The server side of the Model Context Protocol, as much as `oxibot mcp serve` offers: JSON-RPC
//! 2.0 messages in, answers out, with no transport and nothing about oxibot in it.
//!
//! One message is one JSON object (a batch, which the 2025-03-26 revision allowed and later
//! ones dropped, is refused as an invalid request). A request has an `id` and gets exactly one
//! answer; a notification (no `id`) and a client's response get none. The methods:
//! - `initialize`: the client names the revision it wants; the server answers with that one
//!   when it speaks it ([`SUPPORTED_REVISIONS`]), else with its newest, and the client decides
//!   whether to go on. Its capabilities are `tools` and `resources`, neither with change
//!   notifications.
//! - `ping` → `{}`; `notifications/initialized` and every other notification are taken in.
//! - `tools/list`, `tools/call`, `resources/list`, `resources/read`: passed to a [`Backend`].
//! - anything else, `server/discover` (the 2026-07-28 handshake-less start) included, is
//!   `-32601` method not found, which tells a client trying that revision to fall back to
//!   `initialize`.
//!
//! Errors follow JSON-RPC: `-32700` for text that is not JSON (with a `null` id), `-32600`
//! for JSON that is not a request, `-32601` for an unknown method, `-32602` for bad params (an
//! unknown tool among them), `-32002` for an unknown resource, `-32603` when the backend
//! failed. A tool that ran and failed is not a protocol error: its result says `isError`.

use serde_json::{Map, Value, json};

/// The revisions `initialize` accepts, newest first.
pub const SUPPORTED_REVISIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC: the text is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON is not a request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the params are wrong.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: no resource with that URI.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error: its code and a message a person can read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// One of the codes above.
    pub code: i64,
    /// What went wrong.
    pub message: String,
}

impl RpcError {
    /// An error with `code`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into() }
    }

    /// Bad params.
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }
}

/// What a tool call gave: text for the client, and whether it is the tool's error.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The text.
    pub text: String,
    /// The tool ran and failed (the model reads the text; not a protocol error).
    pub is_error: bool,
}

/// What the server offers: its tools and resources, answered in MCP's shapes.
pub trait Backend {
    /// The `serverInfo` name.
    fn name(&self) -> &str;
    /// The `tools` of `tools/list`.
    fn tools(&self) -> Vec<Value>;
    /// Runs tool `name`; `Err` for an unknown tool or bad arguments.
    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutcome, RpcError>;
    /// The `resources` of `resources/list`.
    fn resources(&self) -> Result<Vec<Value>, RpcError>;
    /// The `contents` of `resources/read` for `uri`.
    fn read_resource(&self, uri: &str) -> Result<Vec<Value>, RpcError>;
}

/// Answers one message (the text of one JSON-RPC message); `None` when it needs no answer.
pub async fn answer(backend: &impl Backend, text: &str) -> Option<Value> {
    let message: Value = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(error) => {
            return Some(error_reply(Value::Null, &RpcError::new(PARSE_ERROR, format!("parse error: {error}"))));
        }
    };
    answer_value(backend, message).await
}

/// Answers one parsed message; `None` when it needs no answer.
pub async fn answer_value(backend: &impl Backend, message: Value) -> Option<Value> {
    let Value::Object(mut message) = message else {
        let why = "invalid request: expected one JSON-RPC message as an object (batches are not supported)";
        return Some(error_reply(Value::Null, &RpcError::new(INVALID_REQUEST, why)));
    };
    let id = message.remove("id");
    let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
    let (Some(id), Some(method)) = (id.clone(), method) else {
        // A notification, or a response to a request this server never sends: no answer. A
        // message with an id but no method is not a request.
        return match id {
            Some(id) if !message.contains_key("result") && !message.contains_key("error") => {
                Some(error_reply(id, &RpcError::new(INVALID_REQUEST, "invalid request: no \"method\"")))
            }
            _ => None,
        };
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(error_reply(id, &RpcError::new(INVALID_REQUEST, "invalid request: \"jsonrpc\" must be \"2.0\"")));
    }
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Some(error_reply(id, &RpcError::invalid_params("\"params\" must be an object"))),
    };
    Some(match dispatch(backend, &method, params).await {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => error_reply(id, &error),
    })
}

/// The error answer to request `id`.
pub fn error_reply(id: Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}})
}

/// The revision to answer a client asking for `requested` with.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    SUPPORTED_REVISIONS.iter().find(|revision| Some(**revision) == requested).unwrap_or(&SUPPORTED_REVISIONS[0])
}

async fn dispatch(backend: &impl Backend, method: &str, params: Map<String, Value>) -> Result<Value, RpcError> {
    match method {
        "initialize" => Ok(initialize(backend, &params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": backend.tools()})),
        "tools/call" => {
            let name = string_param(&params, "name")?;
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(arguments)) => arguments.clone(),
                Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be an object")),
            };
            let outcome = backend.call_tool(name, arguments).await?;
            Ok(json!({"content": [{"type": "text", "text": outcome.text}], "isError": outcome.is_error}))
        }
        "resources/list" => Ok(json!({"resources": backend.resources()?})),
        "resources/read" => Ok(json!({"contents": backend.read_resource(string_param(&params, "uri")?)?})),
        other => Err(RpcError::new(METHOD_NOT_FOUND, format!("method not found: {other}"))),
    }
}

fn initialize(backend: &impl Backend, params: &Map<String, Value>) -> Value {
    let revision = negotiate(params.get("protocolVersion").and_then(Value::as_str));
    json!({
        "protocolVersion": revision,
        "capabilities": {"tools": {"listChanged": false}, "resources": {"subscribe": false, "listChanged": false}},
        "serverInfo": {"name": backend.name(), "version": env!("OXIBOT_VERSION")},
        "instructions": "Talk to the oxibot assistant with the `chat` tool, search its memory with `memory_search`; \
            its sessions are resources.",
    })
}

/// The text param `name`, required.
fn string_param<'a>(params: &'a Map<String, Value>, name: &str) -> Result<&'a str, RpcError> {
    params
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("\"{name}\" must be a string")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    struct Echo;

    impl Backend for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn tools(&self) -> Vec<Value> {
            vec![json!({"name": "echo"})]
        }
        async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutcome, RpcError> {
            match name {
                "echo" => Ok(ToolOutcome { text: Value::Object(arguments).to_string(), is_error: false }),
                _ => Err(RpcError::invalid_params(format!("unknown tool: {name}"))),
            }
        }
        fn resources(&self) -> Result<Vec<Value>, RpcError> {
            Ok(Vec::new())
        }
        fn read_resource(&self, uri: &str) -> Result<Vec<Value>, RpcError> {
            Err(RpcError::new(RESOURCE_NOT_FOUND, format!("no resource {uri}")))
        }
    }

    fn ask(text: &str) -> Option<Value> {
        futures_util::FutureExt::now_or_never(answer(&Echo, text)).unwrap()
    }

    #[test]
    fn initialize_echoes_a_known_revision_and_offers_the_newest_otherwise() {
        let reply = ask(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#);
        assert_eq!(reply.unwrap()["result"]["protocolVersion"], "2025-03-26");
        let reply = ask(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01"}}"#);
        assert_eq!(reply.unwrap()["result"]["protocolVersion"], SUPPORTED_REVISIONS[0]);
    }

    #[test]
    fn notifications_and_responses_get_no_answer() {
        assert_eq!(ask(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(ask(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), None);
    }

    #[test]
    fn broken_messages_get_json_rpc_errors() {
        assert_eq!(ask("{not json").unwrap()["error"]["code"], PARSE_ERROR);
        assert_eq!(ask("{not json").unwrap()["id"], Value::Null);
        assert_eq!(ask(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap()["error"]["code"], INVALID_REQUEST);
        assert_eq!(ask(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).unwrap()["error"]["code"], INVALID_REQUEST);
        assert_eq!(
            ask(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#).unwrap()["error"]["code"],
            METHOD_NOT_FOUND
        );
        let unknown = ask(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"nope"}}"#).unwrap();
        assert_eq!((unknown["id"].as_str(), unknown["error"]["code"].as_i64()), (Some("a"), Some(INVALID_PARAMS)));
    }

    #[test]
    fn a_tool_call_answers_with_text_content() {
        let reply =
            ask(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}"#);
        let result = &reply.unwrap()["result"];
        assert_eq!(result["content"][0]["text"], r#"{"a":1}"#);
        assert_eq!(result["isError"], false);
    }
}

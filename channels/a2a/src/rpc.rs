//! JSON-RPC 2.0 as A2A uses it: the request envelope, the methods this server answers (the
//! v1.0 names the official SDK sends, `SendMessage`, `SendStreamingMessage`, `GetTask`,
//! `CancelTask`, and the older slash names as aliases), and error objects with A2A's codes.

use serde_json::{Value, json};

/// A method this server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `SendMessage` (`message/send`): run a turn, answer with its task.
    Send,
    /// `SendStreamingMessage` (`message/stream`): run a turn, stream its task's events.
    Stream,
    /// `GetTask` (`tasks/get`).
    GetTask,
    /// `CancelTask` (`tasks/cancel`): `/stop` in the task's session.
    CancelTask,
}

impl Method {
    /// The method a request names, if this server has it.
    pub fn parse(name: &str) -> Option<Method> {
        match name {
            "SendMessage" | "message/send" => Some(Method::Send),
            "SendStreamingMessage" | "message/stream" => Some(Method::Stream),
            "GetTask" | "tasks/get" => Some(Method::GetTask),
            "CancelTask" | "tasks/cancel" => Some(Method::CancelTask),
            _ => None,
        }
    }
}

/// One JSON-RPC request.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    /// The id to answer with (`null` when absent).
    pub id: Value,
    /// The method's name as sent.
    pub method: String,
    /// The parameters (`{}` when absent).
    pub params: Value,
}

/// A failed call: its JSON-RPC error code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// The body is not JSON.
    #[error("parse error: {0}")]
    Parse(String),
    /// Not a JSON-RPC 2.0 request object.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// No such method.
    #[error("method not found: {0} (this server answers SendMessage, SendStreamingMessage, GetTask, CancelTask)")]
    MethodNotFound(String),
    /// The parameters are not what the method takes.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// No task with that id (or it was forgotten).
    #[error("task not found: {0}")]
    TaskNotFound(String),
    /// The task already ended.
    #[error("task {id} cannot be canceled: it is already {state}")]
    NotCancelable {
        /// The task.
        id: String,
        /// Its final state.
        state: &'static str,
    },
    /// The kernel did not take the message, or the channel is stopping.
    #[error("internal error: {0}")]
    Internal(String),
}

impl RpcError {
    /// The error's JSON-RPC code (A2A's codes for its own errors).
    pub fn code(&self) -> i64 {
        match self {
            RpcError::Parse(_) => -32700,
            RpcError::InvalidRequest(_) => -32600,
            RpcError::MethodNotFound(_) => -32601,
            RpcError::InvalidParams(_) => -32602,
            RpcError::Internal(_) => -32603,
            RpcError::TaskNotFound(_) => -32001,
            RpcError::NotCancelable { .. } => -32002,
        }
    }
}

/// Reads a request body as one JSON-RPC request.
pub fn parse_request(body: &[u8]) -> Result<RpcRequest, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| (Value::Null, RpcError::Parse(e.to_string())))?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |why: &str| (id.clone(), RpcError::InvalidRequest(why.to_owned()));
    if !value.is_object() {
        return Err(invalid("the body must be one JSON-RPC request object (batches are not served)"));
    }
    if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    let method = value.get("method").and_then(Value::as_str).ok_or_else(|| invalid("\"method\" is missing"))?;
    let params = value.get("params").cloned().unwrap_or_else(|| json!({}));
    Ok(RpcRequest { id, method: method.to_owned(), params })
}

/// A successful response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.code(), "message": error.to_string()}})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_v1_names_and_the_older_slash_names_reach_the_same_methods() {
        assert_eq!(Method::parse("SendMessage"), Method::parse("message/send"));
        assert_eq!(Method::parse("SendStreamingMessage"), Some(Method::Stream));
        assert_eq!(Method::parse("tasks/cancel"), Some(Method::CancelTask));
        assert_eq!(Method::parse("ListTasks"), None);
    }

    #[test]
    fn a_request_must_be_a_json_rpc_2_object_with_a_method() {
        let ok = parse_request(br#"{"jsonrpc":"2.0","id":"1","method":"GetTask","params":{"id":"t"}}"#).unwrap();
        assert_eq!((ok.id, ok.method.as_str(), ok.params), (json!("1"), "GetTask", json!({"id": "t"})));
        assert_eq!(parse_request(b"nope").unwrap_err().1.code(), -32700);
        assert_eq!(
            parse_request(br#"{"id":1,"method":"GetTask"}"#).unwrap_err(),
            (json!(1), RpcError::InvalidRequest("\"jsonrpc\" must be \"2.0\"".into()))
        );
        assert_eq!(parse_request(br#"[]"#).unwrap_err().1.code(), -32600);
    }

    #[test]
    fn errors_carry_a2as_codes() {
        let body = error(&json!(7), &RpcError::TaskNotFound("t".into()));
        assert_eq!(body, json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "task not found: t"}}));
    }
}

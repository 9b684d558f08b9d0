//! The A2A v1.0 objects this server reads and writes, in their JSON form (protobuf field
//! names in camelCase, enums as their full names): the message a client sends, task states,
//! tasks, the events of a stream, and the agent card.

use serde_json::{Value, json};

use crate::config::Config;
use crate::rpc::RpcError;

/// Where the JSON-RPC endpoint is, below the base URL.
pub const RPC_PATH: &str = "/a2a";
/// Where the agent card is.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The protocol version the card announces.
pub const PROTOCOL_VERSION: &str = "1.0";

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Accepted, its turn not started.
    Submitted,
    /// Its turn runs.
    Working,
    /// Answered.
    Completed,
    /// Stopped by `CancelTask`.
    Canceled,
    /// No answer came in time, or the kernel refused the message.
    Failed,
}

impl TaskState {
    /// The state's name on the wire.
    pub fn wire_name(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Failed => "TASK_STATE_FAILED",
        }
    }

    /// Whether the task can change no more.
    pub fn is_final(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Canceled | TaskState::Failed)
    }

    /// How an error message names the state.
    pub fn word(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
        }
    }
}

/// What `SendMessage` brings.
#[derive(Debug, Clone, PartialEq)]
pub struct SendParams {
    /// The text of the message's text parts, joined by newlines.
    pub text: String,
    /// The conversation it continues, if the client named one.
    pub context_id: Option<String>,
    /// The message as sent, kept as the task's history.
    pub message: Value,
    /// Whether the client wants the task back at once rather than when it ends.
    pub return_immediately: bool,
}

/// Longest context id accepted.
const MAX_CONTEXT_LEN: usize = 128;

/// Reads `SendMessage`'s parameters: a message with at least one text part.
pub fn send_params(params: &Value) -> Result<SendParams, RpcError> {
    let invalid = |why: &str| RpcError::InvalidParams(why.to_owned());
    let message = params.get("message").filter(|m| m.is_object()).ok_or_else(|| invalid("\"message\" is missing"))?;
    let parts =
        message.get("parts").and_then(Value::as_array).ok_or_else(|| invalid("the message has no \"parts\""))?;
    // v1.0 parts are `{"text": …}`; the older `{"kind": "text", "text": …}` reads the same.
    let texts: Vec<&str> = parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect();
    let text = texts.join("\n");
    if text.trim().is_empty() {
        return Err(invalid("the message has no text part: send at least one part with \"text\""));
    }
    let context_id = match message.get("contextId").and_then(Value::as_str) {
        None | Some("") => None,
        Some(id) if id.len() <= MAX_CONTEXT_LEN && !id.chars().any(char::is_control) => Some(id.to_owned()),
        Some(_) => return Err(invalid("contextId must be 1 to 128 printable characters")),
    };
    let configuration = params.get("configuration");
    let immediately = configuration.and_then(|c| c.get("returnImmediately")).and_then(Value::as_bool);
    let not_blocking = configuration.and_then(|c| c.get("blocking")).and_then(Value::as_bool).map(|b| !b);
    let return_immediately = immediately.or(not_blocking).unwrap_or(false);
    Ok(SendParams { text, context_id, message: message.clone(), return_immediately })
}

/// Reads the task id of `GetTask` and `CancelTask`.
pub fn task_id(params: &Value) -> Result<String, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| RpcError::InvalidParams("\"id\" (the task's id) is missing".to_owned()))
}

/// The agent's message carrying `text` in a task.
pub fn agent_message(task_id: &str, context_id: &str, text: &str) -> Value {
    json!({
        "messageId": format!("{task_id}-reply"),
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}]
    })
}

/// The artifact carrying the reply, or the piece of it a stream adds.
pub fn reply_artifact(task_id: &str, text: &str) -> Value {
    json!({"artifactId": format!("{task_id}-reply"), "name": "reply", "parts": [{"text": text}]})
}

/// A stream event adding `text` to the reply's artifact.
pub fn artifact_update(task_id: &str, context_id: &str, text: &str, append: bool) -> Value {
    json!({"artifactUpdate": {
        "taskId": task_id,
        "contextId": context_id,
        "artifact": reply_artifact(task_id, text),
        "append": append,
        "lastChunk": false
    }})
}

/// A stream event saying the task is now in `state` (with the agent's message when given).
pub fn status_update(task_id: &str, context_id: &str, state: TaskState, message: Option<Value>) -> Value {
    let mut status = json!({"state": state.wire_name()});
    if let Some(message) = message {
        status["message"] = message;
    }
    json!({"statusUpdate": {"taskId": task_id, "contextId": context_id, "status": status}})
}

/// The agent card: who the agent is, where its JSON-RPC endpoint is, that it streams, and that
/// every call needs a bearer key.
pub fn agent_card(config: &Config) -> Value {
    json!({
        "name": config.name,
        "description": config.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{}{RPC_PATH}", config.base_url()),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION
        }],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "one of the keys in channels.a2a.keys"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "chat",
            "name": "Chat",
            "description": "Talk to the assistant; one contextId is one conversation with its own history.",
            "tags": ["assistant", "chat"]
        }]
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_v1_message_gives_its_text_parts_and_context() {
        let params = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c1",
            "parts": [{"text": "hello"}, {"url": "http://x"}, {"text": "there"}]}});
        let send = send_params(&params).unwrap();
        assert_eq!(
            (send.text.as_str(), send.context_id.as_deref(), send.return_immediately),
            ("hello\nthere", Some("c1"), false)
        );
        let older = json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "hi"}]}, "configuration": {"blocking": false}});
        let send = send_params(&older).unwrap();
        assert_eq!((send.text.as_str(), send.context_id, send.return_immediately), ("hi", None, true));
    }

    #[test]
    fn a_message_without_text_or_with_a_bad_context_is_refused() {
        assert!(send_params(&json!({})).is_err());
        assert!(send_params(&json!({"message": {"parts": [{"url": "http://x"}]}})).is_err());
        let long = "c".repeat(129);
        assert!(send_params(&json!({"message": {"contextId": long, "parts": [{"text": "x"}]}})).is_err());
    }

    #[test]
    fn the_card_points_at_the_json_rpc_endpoint_and_asks_for_a_bearer_key() {
        let config = Config { keys: vec!["k".into()], ..Config::default() };
        let card = agent_card(&config);
        assert_eq!(card["supportedInterfaces"][0]["url"], "http://127.0.0.1:18793/a2a");
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert!(!card.to_string().contains("\"k\""), "the card never shows a key");
    }
}

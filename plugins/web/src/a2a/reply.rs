//! Reading a remote agent's answer to `SendMessage`: a JSON-RPC error, a task (its state,
//! its artifacts' text, else its status message's), or a message.

use serde_json::Value;

/// What the remote agent answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteReply {
    /// The text of its answer.
    pub text: String,
    /// The conversation to name to continue it.
    pub context_id: Option<String>,
    /// The task's state (`completed`, `working`, …), none for a plain message.
    pub state: Option<String>,
}

/// Reads a JSON-RPC response to `SendMessage`; `Err` carries the agent's error as text.
pub fn read(response: &Value) -> Result<RemoteReply, String> {
    if let Some(error) = response.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
        return Err(format!("error {code}: {message}"));
    }
    let result = response.get("result").ok_or("the answer has neither result nor error")?;
    if let Some(task) = result.get("task").or_else(|| result.get("id").is_some().then_some(result)) {
        let artifacts = task.get("artifacts").and_then(Value::as_array).into_iter().flatten();
        let mut text = artifacts.map(|artifact| parts_text(artifact.get("parts"))).collect::<Vec<_>>().join("\n");
        if text.is_empty() {
            text = parts_text(task.get("status").and_then(|status| status.get("message")).and_then(|m| m.get("parts")));
        }
        let state = task.get("status").and_then(|status| status.get("state")).and_then(Value::as_str).map(state_word);
        return Ok(RemoteReply { text, context_id: string(task, "contextId"), state });
    }
    let message = result.get("message").unwrap_or(result);
    Ok(RemoteReply { text: parts_text(message.get("parts")), context_id: string(message, "contextId"), state: None })
}

/// The text parts of a list of parts, joined.
fn parts_text(parts: Option<&Value>) -> String {
    let parts = parts.and_then(Value::as_array).into_iter().flatten();
    parts.filter_map(|part| part.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("")
}

fn string(object: &Value, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// `TASK_STATE_INPUT_REQUIRED` (v1.0) or `input-required` (older) as `input required`.
fn state_word(state: &str) -> String {
    state.trim_start_matches("TASK_STATE_").to_ascii_lowercase().replace(['_', '-'], " ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_task_gives_its_artifacts_text_else_its_status_message() {
        let task = json!({"result": {"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"parts": [{"text": "He"}, {"text": "llo"}]}]}}});
        let reply = read(&task).unwrap();
        assert_eq!(
            reply,
            RemoteReply { text: "Hello".into(), context_id: Some("c".into()), state: Some("completed".into()) }
        );
        let asking = json!({"result": {"task": {"id": "t", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"parts": [{"text": "Which city?"}]}}}}});
        assert_eq!(read(&asking).unwrap().text, "Which city?");
        assert_eq!(read(&asking).unwrap().state.as_deref(), Some("input required"));
    }

    #[test]
    fn a_message_gives_its_text_and_an_error_its_code_and_message() {
        let message = json!({"result": {"message": {"contextId": "c", "parts": [{"text": "hi"}]}}});
        assert_eq!(read(&message).unwrap().text, "hi");
        let error = json!({"error": {"code": -32601, "message": "method not found"}});
        assert_eq!(read(&error).unwrap_err(), "error -32601: method not found");
    }
}

//! The JSON shapes of OpenAI's Responses API that the channel answers with: the `response`
//! object, its one output message, and the streaming events around them.

use serde_json::{Value, json};

use crate::usage::TokenUsage;

/// Identifies one response and its output message across its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseId {
    /// `resp_…`.
    pub id: String,
    /// `msg_…`, the id of the assistant message in `output`.
    pub item_id: String,
    /// When the response was created (seconds since the epoch).
    pub created_at: u64,
    /// The model name reported.
    pub model: String,
}

/// How far a response got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still being written.
    InProgress,
    /// Done.
    Completed,
    /// Ended by an error.
    Failed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }
}

impl ResponseId {
    /// The `response` object: no output while in progress, the message once there is text.
    pub fn response(&self, status: Status, text: Option<&str>, usage: Option<&TokenUsage>) -> Value {
        let output: Vec<Value> = text.map(|text| self.message(Status::Completed, Some(text))).into_iter().collect();
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status.as_str(),
            "error": null,
            "incomplete_details": null,
            "instructions": null,
            "max_output_tokens": null,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "store": false,
            "temperature": null,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": null,
            "truncation": "disabled",
            "usage": usage.map(TokenUsage::responses),
            "metadata": {}
        })
    }

    /// The assistant's output message; without text, an empty one being written.
    pub fn message(&self, status: Status, text: Option<&str>) -> Value {
        let content: Vec<Value> = text.map(output_text).into_iter().collect();
        json!({"type": "message", "id": self.item_id, "status": status.as_str(), "role": "assistant", "content": content})
    }

    /// The fields every event about the message's text shares.
    pub fn text_location(&self) -> Value {
        json!({"item_id": self.item_id, "output_index": 0, "content_index": 0})
    }
}

/// One `output_text` content part.
pub fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// `fields` with the event's `type` and `sequence_number` added.
pub fn event(kind: &str, sequence_number: u64, fields: Value) -> Value {
    let mut event = json!({"type": kind, "sequence_number": sequence_number});
    if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
        event.extend(fields);
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> ResponseId {
        ResponseId { id: "resp_1".into(), item_id: "msg_1".into(), created_at: 7, model: "oxibot".into() }
    }

    #[test]
    fn a_completed_response_holds_one_assistant_message_and_the_usage() {
        let usage = TokenUsage { prompt: 12, completion: 5, cached: 3 };
        let response = id().response(Status::Completed, Some("Hi"), Some(&usage));
        assert_eq!(response["object"], "response");
        assert_eq!(response["status"], "completed");
        assert_eq!(
            response["output"],
            json!([{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hi", "annotations": [], "logprobs": []}]}])
        );
        assert_eq!(response["usage"]["input_tokens"], 12);
        assert_eq!(response["usage"]["input_tokens_details"]["cached_tokens"], 3);
        assert_eq!(response["usage"]["total_tokens"], 17);
    }

    #[test]
    fn a_response_in_progress_has_no_output_and_no_usage_yet() {
        let response = id().response(Status::InProgress, None, None);
        assert_eq!(response["output"], json!([]));
        assert!(response["usage"].is_null());
    }

    #[test]
    fn events_carry_their_type_and_sequence_number_next_to_their_fields() {
        let delta = event("response.output_text.delta", 4, json!({"delta": "He", "item_id": "msg_1"}));
        assert_eq!(
            delta,
            json!({"type": "response.output_text.delta", "sequence_number": 4, "delta": "He", "item_id": "msg_1"})
        );
    }
}

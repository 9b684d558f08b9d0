//! The JSON shapes of OpenAI's Chat Completions API that the channel answers with:
//! completions, stream chunks, the model list, errors, and server-sent events.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::usage::TokenUsage;

/// Seconds since the Unix epoch, as OpenAI's `created` fields.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or_default()
}

/// Identifies one completion across its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionId {
    /// `chatcmpl-…`.
    pub id: String,
    /// When the completion was created.
    pub created: u64,
    /// The model name reported.
    pub model: String,
}

impl CompletionId {
    /// A whole (non-streamed) completion with `content` as the assistant's message.
    pub fn completion(&self, content: &str, usage: &TokenUsage) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage.chat()
        })
    }

    /// The first chunk of a stream: the assistant's role.
    pub fn role_chunk(&self) -> Value {
        self.chunk(json!({"role": "assistant"}), None)
    }

    /// A chunk adding `text` to the assistant's message.
    pub fn content_chunk(&self, text: &str) -> Value {
        self.chunk(json!({"content": text}), None)
    }

    /// The last chunk of a stream, with its finish reason.
    pub fn stop_chunk(&self) -> Value {
        self.chunk(json!({}), Some("stop"))
    }

    /// The chunk a stream ends with when the client asked for `stream_options.include_usage`:
    /// no choices, the usage.
    pub fn usage_chunk(&self, usage: &TokenUsage) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage.chat()
        })
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        })
    }
}

/// The answer to `GET /v1/models`: the one model this server offers.
pub fn model_list(model: &str, created: u64) -> Value {
    json!({"object": "list", "data": [{"id": model, "object": "model", "created": created, "owned_by": "oxibot"}]})
}

/// An error body as OpenAI writes it.
pub fn error(message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// One server-sent event carrying `data`.
pub fn sse_event(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// One server-sent event named `name` (as the Responses API sends them) carrying `data`.
pub fn named_sse_event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The event that ends a stream.
pub const SSE_DONE: &str = "data: [DONE]\n\n";

/// The text of a final reply that the streamed deltas did not carry yet: the part after what
/// was sent, or nothing when the reply does not continue what was sent (it cannot be unsent).
pub fn missing_suffix<'a>(sent: &str, full: &'a str) -> Option<&'a str> {
    full.strip_prefix(sent).filter(|rest| !rest.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> CompletionId {
        CompletionId { id: "chatcmpl-1".into(), created: 7, model: "oxibot".into() }
    }

    #[test]
    fn a_completion_has_the_openai_shape_with_the_turns_token_counts() {
        let expected = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 7, "model": "oxibot",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17, "prompt_tokens_details": {"cached_tokens": 3}}
        });
        assert_eq!(id().completion("Hi", &TokenUsage { prompt: 12, completion: 5, cached: 3 }), expected);
        let chunk = id().usage_chunk(&TokenUsage { prompt: 1, completion: 2, cached: 0 });
        assert_eq!(chunk["choices"], json!([]));
        assert_eq!(chunk["usage"]["total_tokens"], 3);
    }

    #[test]
    fn chunks_carry_role_then_content_then_the_finish_reason() {
        assert_eq!(id().role_chunk()["choices"][0]["delta"], json!({"role": "assistant"}));
        assert_eq!(
            id().content_chunk("He")["choices"][0],
            json!({"index": 0, "delta": {"content": "He"}, "finish_reason": null})
        );
        assert_eq!(id().stop_chunk()["choices"][0], json!({"index": 0, "delta": {}, "finish_reason": "stop"}));
        assert_eq!(id().stop_chunk()["object"], "chat.completion.chunk");
    }

    #[test]
    fn the_missing_suffix_is_what_the_deltas_did_not_send() {
        assert_eq!(missing_suffix("", "Hello"), Some("Hello"));
        assert_eq!(missing_suffix("Hel", "Hello"), Some("lo"));
        assert_eq!(missing_suffix("Hello", "Hello"), None);
        assert_eq!(missing_suffix("Bye", "Hello"), None);
    }

    #[test]
    fn events_are_data_lines_followed_by_a_blank_line() {
        assert_eq!(sse_event("{}"), "data: {}\n\n");
        assert_eq!(SSE_DONE, "data: [DONE]\n\n");
        assert_eq!(model_list("m", 1)["data"][0]["owned_by"], "oxibot");
        assert_eq!(error("bad", "invalid_request_error", Some("messages"), None)["error"]["param"], "messages");
    }
}

//! Reading a Responses API request (`POST /v1/responses`): which session it belongs to, the
//! one message it brings (the last user input; the kernel keeps the history), and whether to
//! stream.

use serde::Deserialize;
use serde_json::Value;

use crate::request::{DEFAULT_SESSION, RequestError, checked_session, content_text};

/// What the channel takes from a Responses API request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponsesRequest {
    /// The session (the kernel's chat id): `session_id`, else the `X-Session-Id` header, else
    /// `conversation` (its id), else `user`, else [`DEFAULT_SESSION`].
    pub session_id: String,
    /// The text of the last user input.
    pub text: String,
    /// Whether the client asked for server-sent events.
    pub stream: bool,
}

/// The fields read from the body; everything else (`model`, `instructions`, `tools`,
/// `previous_response_id`, `store`, …) is accepted and ignored.
#[derive(Deserialize)]
struct RawRequest {
    input: Value,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    conversation: Option<Value>,
    #[serde(default)]
    user: Option<String>,
}

impl ResponsesRequest {
    /// Reads a request body; `session_header` is the `X-Session-Id` header, if any.
    pub fn parse(body: &[u8], session_header: Option<&str>) -> Result<ResponsesRequest, RequestError> {
        let raw: RawRequest = serde_json::from_slice(body).map_err(|e| RequestError::Body(e.to_string()))?;
        let conversation = raw.conversation.as_ref().and_then(|c| c.as_str().or_else(|| c.get("id")?.as_str()));
        let session_id = raw
            .session_id
            .as_deref()
            .or(session_header)
            .or(conversation)
            .or(raw.user.as_deref())
            .unwrap_or(DEFAULT_SESSION);
        let session_id = checked_session(session_id)?;
        let text = last_user_text(&raw.input).ok_or(RequestError::NoUserInput)?;
        Ok(ResponsesRequest { session_id, text, stream: raw.stream.unwrap_or(false) })
    }
}

/// The text of `input`: the string itself, or the last user message of a list of items
/// (`{"role": "user", "content": "…" | [{"type": "input_text", "text": "…"}, …]}`).
fn last_user_text(input: &Value) -> Option<String> {
    let text = match input {
        Value::String(text) => text.clone(),
        Value::Array(items) => {
            let is_user_message = |item: &&Value| {
                item.get("role").and_then(Value::as_str) == Some("user")
                    && item.get("type").and_then(Value::as_str).is_none_or(|kind| kind == "message")
            };
            content_text(items.iter().rev().find(is_user_message)?.get("content")?)
        }
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn parse(body: Value, header: Option<&str>) -> Result<ResponsesRequest, RequestError> {
        ResponsesRequest::parse(body.to_string().as_bytes(), header)
    }

    #[test]
    fn a_plain_string_input_is_the_message() {
        let request = parse(json!({"model": "gpt-5", "input": "What is 2+2?", "instructions": "Be brief."}), None);
        assert_eq!(
            request.unwrap(),
            ResponsesRequest { session_id: "default".into(), text: "What is 2+2?".into(), stream: false }
        );
    }

    #[test]
    fn the_last_user_item_of_a_list_is_the_message_and_its_input_text_parts_are_joined() {
        let body = json!({"stream": true, "input": [
            {"role": "developer", "content": "Be brief."},
            {"type": "message", "role": "user", "content": "first"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "reply"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look at"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                {"type": "input_text", "text": "this"}
            ]},
            {"type": "function_call_output", "call_id": "c1", "output": "ignored"}
        ]});
        let request = parse(body, None).unwrap();
        assert_eq!(request.text, "look at\nthis");
        assert!(request.stream);
    }

    #[test]
    fn the_session_comes_from_the_body_the_header_the_conversation_then_the_user() {
        let input = "x";
        assert_eq!(parse(json!({"input": input, "session_id": "s", "user": "u"}), Some("h")).unwrap().session_id, "s");
        assert_eq!(
            parse(json!({"input": input, "conversation": "conv_1", "user": "u"}), Some("h")).unwrap().session_id,
            "h"
        );
        assert_eq!(
            parse(json!({"input": input, "conversation": {"id": "conv_1"}, "user": "u"}), None).unwrap().session_id,
            "conv_1"
        );
        assert_eq!(parse(json!({"input": input, "user": "u"}), None).unwrap().session_id, "u");
    }

    #[test]
    fn a_request_without_user_text_is_refused() {
        assert_eq!(parse(json!({"input": "  "}), None), Err(RequestError::NoUserInput));
        assert_eq!(
            parse(json!({"input": [{"role": "assistant", "content": "hi"}]}), None),
            Err(RequestError::NoUserInput)
        );
        assert!(matches!(parse(json!({"messages": []}), None), Err(RequestError::Body(_))));
        assert_eq!(RequestError::NoUserInput.param(), Some("input"));
    }
}

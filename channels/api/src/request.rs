//! Reading an OpenAI chat-completion request: which session it belongs to, the one message it
//! brings (the last user message; the kernel keeps the history), and whether to stream.

use serde::Deserialize;
use serde_json::Value;

/// The session used when a request names none.
pub const DEFAULT_SESSION: &str = "default";
/// Longest session id accepted.
const MAX_SESSION_LEN: usize = 128;

/// What the channel takes from a chat-completion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRequest {
    /// The session (the kernel's chat id): `session_id`, else the `X-Session-Id` header, else
    /// `user`, else [`DEFAULT_SESSION`].
    pub session_id: String,
    /// The text of the last user message.
    pub text: String,
    /// Whether the client asked for server-sent events.
    pub stream: bool,
    /// Whether a stream should end with a chunk carrying the usage
    /// (`stream_options.include_usage`).
    pub include_usage: bool,
}

/// Why a request cannot be served; the text goes back in an OpenAI-style error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Not JSON, or not the shape of a chat-completion request.
    #[error("invalid request body: {0}")]
    Body(String),
    /// No message with role `user`, or the last one has no text.
    #[error("the request has no user message with text: send at least one message with role \"user\"")]
    NoUserMessage,
    /// A Responses API request whose `input` has no user text.
    #[error("the request has no user input with text: send `input` as text or with a message of role \"user\"")]
    NoUserInput,
    /// The session id cannot be used.
    #[error("invalid session id: it must be 1 to {MAX_SESSION_LEN} printable characters")]
    BadSession,
}

impl RequestError {
    /// The request field the error is about, as OpenAI's `param`.
    pub fn param(&self) -> Option<&'static str> {
        match self {
            RequestError::Body(_) => None,
            RequestError::NoUserMessage => Some("messages"),
            RequestError::NoUserInput => Some("input"),
            RequestError::BadSession => Some("session_id"),
        }
    }
}

/// The fields read from the body; everything else (`model`, `temperature`, `max_tokens`,
/// `tools`, …) is accepted and ignored.
#[derive(Deserialize)]
struct RawRequest {
    messages: Vec<RawMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
struct RawMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

impl ChatRequest {
    /// Reads a request body; `session_header` is the `X-Session-Id` header, if any.
    pub fn parse(body: &[u8], session_header: Option<&str>) -> Result<ChatRequest, RequestError> {
        let raw: RawRequest = serde_json::from_slice(body).map_err(|e| RequestError::Body(e.to_string()))?;
        let session_id =
            raw.session_id.as_deref().or(session_header).or(raw.user.as_deref()).unwrap_or(DEFAULT_SESSION);
        let session_id = checked_session(session_id)?;
        let last_user =
            raw.messages.iter().rev().find(|message| message.role == "user").ok_or(RequestError::NoUserMessage)?;
        let text = content_text(&last_user.content);
        if text.trim().is_empty() {
            return Err(RequestError::NoUserMessage);
        }
        let include_usage = raw.stream_options.and_then(|options| options.include_usage).unwrap_or(false);
        Ok(ChatRequest { session_id, text, stream: raw.stream.unwrap_or(false), include_usage })
    }
}

/// The session id, trimmed, if it is usable.
pub fn checked_session(session_id: &str) -> Result<String, RequestError> {
    let trimmed = session_id.trim();
    let usable = !trimmed.is_empty() && trimmed.len() <= MAX_SESSION_LEN && !trimmed.chars().any(char::is_control);
    usable.then(|| trimmed.to_owned()).ok_or(RequestError::BadSession)
}

/// The text of a message's `content`: a string, or the `text` parts of a list joined by
/// newlines (image and audio parts are left out).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(part_text).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn part_text(part: &Value) -> Option<&str> {
    match part {
        Value::String(text) => Some(text),
        // `text` in Chat Completions, `input_text` in the Responses API.
        Value::Object(fields)
            if fields.get("type").and_then(Value::as_str).is_none_or(|kind| matches!(kind, "text" | "input_text")) =>
        {
            fields.get("text")?.as_str()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn parse(body: Value, header: Option<&str>) -> Result<ChatRequest, RequestError> {
        ChatRequest::parse(body.to_string().as_bytes(), header)
    }

    #[test]
    fn the_last_user_message_is_the_one_taken() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": "second"},
            {"role": "assistant", "content": "an answer the client made up"}
        ]});
        let request = parse(body, None).unwrap();
        assert_eq!(
            request,
            ChatRequest { session_id: "default".into(), text: "second".into(), stream: false, include_usage: false }
        );
    }

    #[test]
    fn a_standard_openai_body_with_system_message_and_sampling_options_is_accepted() {
        let body = json!({
            "model": "gpt-4o", "temperature": 0.2, "max_tokens": 256, "top_p": 1, "n": 1,
            "presence_penalty": 0, "stop": null, "stream": true, "stream_options": {"include_usage": true},
            "tools": [], "user": "u-1",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi", "name": "al"}]
        });
        let request = parse(body, None).unwrap();
        assert_eq!(
            request,
            ChatRequest { session_id: "u-1".into(), text: "hi".into(), stream: true, include_usage: true }
        );
    }

    #[test]
    fn content_parts_give_their_text_parts_joined_by_newlines() {
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look at"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "this"}
        ]}]});
        assert_eq!(parse(body, None).unwrap().text, "look at\nthis");
    }

    #[test]
    fn the_session_comes_from_the_body_then_the_header_then_the_user_field() {
        let all = json!({"session_id": "s-body", "user": "u", "messages": [{"role": "user", "content": "x"}]});
        assert_eq!(parse(all, Some("s-header")).unwrap().session_id, "s-body");
        let no_session = json!({"user": "u", "messages": [{"role": "user", "content": "x"}]});
        assert_eq!(parse(no_session.clone(), Some("s-header")).unwrap().session_id, "s-header");
        assert_eq!(parse(no_session, None).unwrap().session_id, "u");
    }

    #[test]
    fn a_request_without_a_user_message_with_text_is_refused() {
        let none = json!({"messages": [{"role": "system", "content": "Be brief."}]});
        assert_eq!(parse(none, None), Err(RequestError::NoUserMessage));
        let empty = json!({"messages": [{"role": "user", "content": "  "}]});
        assert_eq!(parse(empty, None), Err(RequestError::NoUserMessage));
        let images_only =
            json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]});
        assert_eq!(parse(images_only, None), Err(RequestError::NoUserMessage));
        assert_eq!(parse(json!({"messages": []}), None).unwrap_err().param(), Some("messages"));
    }

    #[test]
    fn a_body_that_is_not_a_chat_request_is_refused() {
        assert!(matches!(ChatRequest::parse(b"not json", None), Err(RequestError::Body(_))));
        assert!(matches!(parse(json!({"prompt": "x"}), None), Err(RequestError::Body(_))));
    }

    #[test]
    fn an_empty_or_overlong_session_is_refused() {
        let body = |session: &str| json!({"session_id": session, "messages": [{"role": "user", "content": "x"}]});
        assert_eq!(parse(body(" "), None), Err(RequestError::BadSession));
        assert_eq!(parse(body(&"s".repeat(129)), None), Err(RequestError::BadSession));
        assert_eq!(parse(body(" padded "), None).unwrap().session_id, "padded");
    }
}

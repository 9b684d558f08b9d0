//! Chat messages as the kernel keeps them: OpenAI chat format, which is also the line format
//! of nanobot's session files (`role`, `content`, `tool_calls`, `tool_call_id`, `name`,
//! `reasoning_content`, plus a `timestamp`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id, echoed in the tool result's `tool_call_id`.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".to_owned()
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, possibly malformed.
    pub arguments: String,
}

impl ToolCall {
    /// A function call with the given id, name and raw argument text.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall { name: name.into(), arguments: arguments.into() },
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Text, or an array of content parts (images, …) kept as JSON; `null` for an assistant
    /// message that only calls tools.
    #[serde(default)]
    pub content: Value,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool result: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The model's reasoning text, kept so it can be replayed to providers that want it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Anthropic thinking blocks (with signatures), replayed verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_blocks: Option<Value>,
    /// When it was written, ISO 8601 local time (as nanobot writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Fields this version does not know, kept so a session file round-trips.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The session-file field that marks a message the kernel wrote (see
/// [`ChatMessage::from_kernel`]); never sent to a model.
pub const KERNEL_TEXT: &str = "_kernel_text";

/// How the kernel's own texts begin (a loop-guard stop or note, the iteration cap, the
/// empty-reply fallback), so such a line archived before messages carried [`KERNEL_TEXT`] can
/// still be told apart from the conversation.
pub const KERNEL_OPENINGS: [&str; 5] = [
    "I stopped: I kept repeating",
    "I stopped after",
    "Not run again:",
    "Not run: this",
    "I'm sorry, I couldn't come up with a reply",
];

/// `messages` as a [`crate::ChatRequest`] holds them, each shared.
pub fn shared(messages: impl IntoIterator<Item = ChatMessage>) -> Vec<Arc<ChatMessage>> {
    messages.into_iter().map(Arc::new).collect()
}

/// Whether `line` carries one of the kernel's own texts ([`KERNEL_OPENINGS`]).
pub fn is_kernel_line(line: &str) -> bool {
    KERNEL_OPENINGS.iter().any(|opening| line.contains(opening))
}

impl ChatMessage {
    /// A message with text content.
    pub fn text(role: Role, text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: Value::String(text.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning_content: None,
            thinking_blocks: None,
            timestamp: None,
            extra: Map::new(),
        }
    }

    /// A tool result answering `call`.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>) -> ChatMessage {
        let mut message = ChatMessage::text(Role::Tool, content);
        message.tool_call_id = Some(call.id.clone());
        message.name = Some(call.function.name.clone());
        message
    }

    /// A copy for a request to the model: without the timestamp and the unknown fields, which
    /// no wire format sends (and which would only make the copy dearer).
    pub fn for_request(&self) -> ChatMessage {
        ChatMessage {
            role: self.role,
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            name: self.name.clone(),
            reasoning_content: self.reasoning_content.clone(),
            thinking_blocks: self.thinking_blocks.clone(),
            timestamp: None,
            extra: Map::new(),
        }
    }

    /// Marks this message as written by the kernel, not the model or the user (a loop-guard
    /// stop or note, an error, a fallback answer): the session file keeps the mark in the
    /// additive field [`KERNEL_TEXT`], and memory leaves such texts out of summaries and recall.
    pub fn from_kernel(mut self) -> ChatMessage {
        self.extra.insert(KERNEL_TEXT.to_owned(), Value::Bool(true));
        self
    }

    /// Whether the kernel wrote this message (see [`ChatMessage::from_kernel`]).
    pub fn is_from_kernel(&self) -> bool {
        self.extra.get(KERNEL_TEXT).and_then(Value::as_bool).unwrap_or(false)
    }

    /// The content as text (parts joined), or an empty string.
    pub fn text_content(&self) -> String {
        match &self.content {
            Value::String(text) => text.clone(),
            Value::Array(parts) => {
                parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
            }
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_nanobot_session_line_round_trips_with_unknown_fields_kept() {
        let line = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}], "timestamp": "2026-01-02T03:04:05.123456", "reasoning_content": "hmm", "custom": 1});
        let message: ChatMessage = serde_json::from_value(line.clone()).unwrap();
        assert_eq!(message.tool_calls[0].function.name, "read_file");
        assert_eq!(serde_json::to_value(&message).unwrap(), line);
    }
}

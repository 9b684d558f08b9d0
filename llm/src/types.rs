//! What goes into a chat request and what comes back, independent of the wire format.

use std::sync::Arc;

use oxibot_proto::ToolSpec;
use serde_json::Value;

use crate::message::{ChatMessage, ToolCall};

/// One call to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model as configured, e.g. `anthropic/claude-opus-4-5`; the provider decides what
    /// it sends on the wire (see `Provider::wire_model`).
    pub model: String,
    /// The conversation in OpenAI chat format; the first message is the system prompt. Shared:
    /// a session's replayed history goes into each request without a copy, and the encoder's
    /// conversation cache knows a message it has encoded by its address; whoever changes a
    /// message copies it first (`Arc::make_mut`).
    pub messages: Vec<Arc<ChatMessage>>,
    /// Tools the model may call; shared, since every call of every turn offers the same list.
    pub tools: Arc<[ToolSpec]>,
    /// Most tokens the model may write.
    pub max_tokens: u32,
    /// Sampling temperature; `None` leaves the provider's default.
    pub temperature: Option<f64>,
    /// Reasoning effort (`low`, `medium`, `high`, `adaptive`, `none`) for models that take one.
    pub reasoning_effort: Option<String>,
}

/// A piece of a streamed reply, delivered as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// Text of the answer.
    Text(String),
    /// Text of the model's reasoning (reasoning_content, or Anthropic thinking).
    Reasoning(String),
    /// A retry after partial output was streamed: the consumer must discard what it showed.
    Restart,
}

/// Token counts of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Output tokens spent on reasoning (counted in `completion_tokens` too), where the
    /// provider reports them.
    pub reasoning_tokens: u64,
}

/// The model's complete reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    /// The answer text, if any.
    pub content: Option<String>,
    /// Tools the model wants to call, with argument text as the model wrote it.
    pub tool_calls: Vec<ToolCall>,
    /// The model's reasoning text, kept so it can be replayed.
    pub reasoning_content: Option<String>,
    /// Anthropic thinking blocks with their signatures, replayed verbatim on the next turn.
    pub thinking_blocks: Option<Value>,
    /// Why the model stopped, in OpenAI words (`stop`, `tool_calls`, `length`, …).
    pub finish_reason: Option<String>,
    /// Token counts.
    pub usage: Usage,
    /// The model the provider says answered (its reply's `model`), which may differ from the
    /// one asked for (an alias resolved, a router's choice); `None` when the reply names none.
    pub model: Option<String>,
}

/// Collects text and reasoning of one reply while forwarding each piece to the consumer.
pub(crate) struct Collector<'a> {
    /// The consumer's callback, or `None` when not streaming.
    on_event: Option<&'a mut (dyn FnMut(StreamEvent) + Send)>,
    /// The answer text so far.
    pub(crate) text: String,
    /// The reasoning text so far.
    pub(crate) reasoning: String,
}

impl<'a> Collector<'a> {
    /// A collector forwarding to `on_event` (pass `None` to only collect).
    pub(crate) fn new(on_event: Option<&'a mut (dyn FnMut(StreamEvent) + Send)>) -> Collector<'a> {
        Collector { on_event, text: String::new(), reasoning: String::new() }
    }

    /// Adds answer text.
    pub(crate) fn text(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        self.text.push_str(piece);
        if let Some(on_event) = self.on_event.as_mut() {
            on_event(StreamEvent::Text(piece.to_owned()));
        }
    }

    /// Adds reasoning text.
    pub(crate) fn reasoning(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        self.reasoning.push_str(piece);
        if let Some(on_event) = self.on_event.as_mut() {
            on_event(StreamEvent::Reasoning(piece.to_owned()));
        }
    }

    /// The collected text, `None` when empty.
    pub(crate) fn take_text(&mut self) -> Option<String> {
        non_empty(std::mem::take(&mut self.text))
    }

    /// The collected reasoning, `None` when empty.
    pub(crate) fn take_reasoning(&mut self) -> Option<String> {
        non_empty(std::mem::take(&mut self.reasoning))
    }
}

/// A reply the server sent in one piece although streaming was asked for: the consumer still
/// gets its reasoning and text as stream events.
pub(crate) fn replay_as_stream(reply: &mut ChatResponse, on_event: &mut (dyn FnMut(StreamEvent) + Send)) {
    let mut collector = Collector::new(Some(on_event));
    collector.reasoning(reply.reasoning_content.as_deref().unwrap_or_default());
    collector.text(reply.content.as_deref().unwrap_or_default());
    reply.content = collector.take_text();
}

/// `Some(text)` unless it is empty.
pub(crate) fn non_empty(text: String) -> Option<String> {
    if text.is_empty() { None } else { Some(text) }
}

/// A fresh tool call id for a provider that sent none (or sent one twice); unique within
/// the process, and only `[A-Za-z0-9_]` so every provider accepts it on replay.
pub(crate) fn generated_call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default();
    format!("call_{stamp:x}{n:04x}")
}

/// Gives every call an id, replacing missing and repeated ones (some providers reuse one
/// id for parallel calls), and `{}` for empty argument text.
pub(crate) fn finish_tool_calls(calls: &mut [ToolCall]) {
    let mut seen = std::collections::HashSet::new();
    for call in calls {
        if call.id.is_empty() || !seen.insert(call.id.clone()) {
            call.id = generated_call_id();
            seen.insert(call.id.clone());
        }
        if call.function.arguments.trim().is_empty() {
            call.function.arguments = "{}".to_owned();
        }
    }
}

/// The text of a content value: a string, or the `text` of each part of an array.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

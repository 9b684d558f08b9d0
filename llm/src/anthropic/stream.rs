//! Assembles a streamed Anthropic message from its events: content blocks opened, grown by
//! deltas (text, thinking, signatures, tool input JSON) and closed; usage and stop reason
//! from `message_start` and `message_delta`; the end at `message_stop`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::event::{Delta, Event};
use super::usage::{AnthropicUsage, finish_reason};
use crate::error::ProviderError;
use crate::message::ToolCall;
use crate::transport::parse_typed;
use crate::types::{ChatResponse, Collector, finish_tool_calls};

/// One content block as it grows.
enum Block {
    /// Answer text (also collected, in order, by the collector).
    Text,
    /// A tool call whose input arrives as JSON text in pieces.
    ToolUse { id: String, name: String, input: String },
    /// Reasoning with the signature that lets it be replayed.
    Thinking { thinking: String, signature: String },
    /// Anything else (`redacted_thinking`, …), kept as it came.
    Other(Value),
}

/// The state of one streamed message.
pub(crate) struct EventReader<'a> {
    /// Text and reasoning so far, forwarded to the consumer as they come.
    collector: Collector<'a>,
    /// Content blocks by index.
    blocks: BTreeMap<u64, Block>,
    /// The stop reason from `message_delta`.
    stop_reason: Option<String>,
    /// Token counts so far.
    usage: AnthropicUsage,
    /// Registry name, for errors inside the stream.
    provider: String,
    /// The model `message_start` names.
    model: Option<String>,
}

impl<'a> EventReader<'a> {
    /// A reader at the start of a message.
    pub(crate) fn new(collector: Collector<'a>, provider: &str) -> EventReader<'a> {
        EventReader {
            collector,
            blocks: BTreeMap::new(),
            stop_reason: None,
            usage: AnthropicUsage::default(),
            provider: provider.to_owned(),
            model: None,
        }
    }

    /// Takes one event's data; returns `true` at `message_stop`. The event is read into
    /// borrowed, typed fields (no JSON tree for the many deltas), and an event that is not
    /// JSON of that shape is an error naming what came.
    pub(crate) fn on_event(&mut self, data: &str) -> Result<bool, ProviderError> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        let event: Event<'_> = parse_typed(data.as_bytes(), "stream event")?;
        let index = event.index.unwrap_or(0);
        match event.kind.as_deref().unwrap_or_default() {
            "message_start" => {
                let (usage, model) = event.message.map(|message| (message.usage, message.model)).unwrap_or_default();
                self.usage = self.usage.merged(usage.as_ref().unwrap_or(&Value::Null));
                self.model = model.filter(|model| !model.is_empty());
            }
            "content_block_start" => self.start_block(index, &event.content_block.unwrap_or(Value::Null)),
            "content_block_delta" => {
                if let Some(delta) = event.delta {
                    self.on_delta(index, &delta);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|delta| delta.stop_reason) {
                    self.stop_reason = Some(reason.into_owned());
                }
                self.usage = self.usage.merged(event.usage.as_ref().unwrap_or(&Value::Null));
            }
            "message_stop" => return Ok(true),
            "error" => {
                let error = event.error.unwrap_or(Value::Null);
                return Err(ProviderError::from_error_object(&error, &self.provider));
            }
            // `ping`, `content_block_stop` and event types added later carry nothing needed.
            _ => {}
        }
        Ok(false)
    }

    fn start_block(&mut self, index: u64, block: &Value) {
        let text = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
        let started = match block["type"].as_str() {
            Some("text") => {
                self.collector.text(&text("text"));
                Block::Text
            }
            Some("tool_use") => {
                // The input is normally `{}` here and arrives as JSON deltas.
                let input = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string)
                    .unwrap_or_default();
                Block::ToolUse { id: text("id"), name: text("name"), input }
            }
            Some("thinking") => {
                self.collector.reasoning(&text("thinking"));
                Block::Thinking { thinking: text("thinking"), signature: text("signature") }
            }
            _ => Block::Other(block.clone()),
        };
        self.blocks.insert(index, started);
    }

    fn on_delta(&mut self, index: u64, delta: &Delta<'_>) {
        match (delta.kind.as_deref().unwrap_or_default(), self.blocks.get_mut(&index)) {
            ("text_delta", _) => self.collector.text(piece(&delta.text)),
            ("thinking_delta", Some(Block::Thinking { thinking, .. })) => {
                thinking.push_str(piece(&delta.thinking));
                self.collector.reasoning(piece(&delta.thinking));
            }
            ("thinking_delta", _) => self.collector.reasoning(piece(&delta.thinking)),
            ("signature_delta", Some(Block::Thinking { signature, .. })) => signature.push_str(piece(&delta.signature)),
            ("input_json_delta", Some(Block::ToolUse { input, .. })) => input.push_str(piece(&delta.partial_json)),
            _ => {}
        }
    }

    /// The assembled reply. A stream that ended without `message_stop` and without a stop
    /// reason was cut.
    pub(crate) fn finish(mut self, done: bool) -> Result<ChatResponse, ProviderError> {
        if !done && self.stop_reason.is_none() {
            return Err(ProviderError::StreamCut("the stream ended before message_stop".into()));
        }
        let (mut tool_calls, mut thinking_blocks) = (Vec::new(), Vec::new());
        for block in std::mem::take(&mut self.blocks).into_values() {
            match block {
                Block::Text => {}
                Block::ToolUse { id, name, input } => tool_calls.push(ToolCall::new(id, name, input)),
                Block::Thinking { thinking, signature } => {
                    thinking_blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}))
                }
                Block::Other(block) => {
                    thinking_blocks.extend(matches!(block["type"].as_str(), Some("redacted_thinking")).then_some(block))
                }
            }
        }
        finish_tool_calls(&mut tool_calls);
        Ok(ChatResponse {
            content: self.collector.take_text(),
            tool_calls,
            reasoning_content: self.collector.take_reasoning(),
            thinking_blocks: if thinking_blocks.is_empty() { None } else { Some(Value::Array(thinking_blocks)) },
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage.into(),
            model: self.model,
        })
    }
}

/// A delta's text field, empty when absent.
fn piece<'a>(field: &'a Option<Cow<'_, str>>) -> &'a str {
    field.as_deref().unwrap_or_default()
}

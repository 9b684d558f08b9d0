//! Assembles a streamed Chat Completions reply from its `data:` chunks: text and reasoning
//! deltas, tool calls pieced together by index, the finish reason and the usage chunk.

use std::collections::BTreeMap;

use serde_json::Value;

use super::usage::parse_usage;
use crate::error::ProviderError;
use crate::message::ToolCall;
use crate::transport::parse_json;
use crate::types::{ChatResponse, Collector, Usage, finish_tool_calls, text_of};

/// The state of one streamed reply.
pub(crate) struct ChunkReader<'a> {
    /// Text and reasoning so far, forwarded to the consumer as they come.
    collector: Collector<'a>,
    /// Tool calls by their `index`, filled in piece by piece.
    calls: BTreeMap<u64, ToolCall>,
    /// The last finish reason seen.
    finish_reason: Option<String>,
    /// The usage chunk, if one came.
    usage: Usage,
    /// Registry name, for errors inside the stream.
    provider: String,
    /// The model the chunks name (the first that names one).
    model: Option<String>,
}

impl<'a> ChunkReader<'a> {
    /// A reader at the start of a reply.
    pub(crate) fn new(collector: Collector<'a>, provider: &str) -> ChunkReader<'a> {
        ChunkReader {
            collector,
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: Usage::default(),
            provider: provider.to_owned(),
            model: None,
        }
    }

    /// Takes one event's data; returns `true` at `[DONE]`.
    pub(crate) fn on_event(&mut self, data: &str) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk = parse_json(data.as_bytes(), "stream chunk")?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(ProviderError::from_error_object(error, &self.provider));
        }
        if self.model.is_none() {
            self.model = super::reply_model(&chunk);
        }
        if chunk.get("usage").is_some_and(Value::is_object) {
            self.usage = parse_usage(&chunk["usage"]);
        }
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            self.on_choice(choice);
        }
        Ok(false)
    }

    fn on_choice(&mut self, choice: &Value) {
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        let reasoning = delta.get("reasoning_content").filter(|v| !v.is_null()).or_else(|| delta.get("reasoning"));
        self.collector.reasoning(&reasoning.map(text_of).unwrap_or_default());
        self.collector.text(&text_of(&delta["content"]));
        for (position, piece) in delta["tool_calls"].as_array().into_iter().flatten().enumerate() {
            self.on_tool_call_piece(position as u64, piece);
        }
    }

    /// The first piece of a call brings its id and name; later ones add argument text.
    fn on_tool_call_piece(&mut self, position: u64, piece: &Value) {
        let index = piece["index"].as_u64().unwrap_or(position);
        let call = self.calls.entry(index).or_insert_with(|| ToolCall::new("", "", ""));
        if let Some(id) = piece["id"].as_str().filter(|id| !id.is_empty()) {
            call.id = id.to_owned();
        }
        let function = &piece["function"];
        if let Some(name) = function["name"].as_str().filter(|name| !name.is_empty()) {
            call.function.name = name.to_owned();
        }
        if let Some(arguments) = function["arguments"].as_str() {
            call.function.arguments.push_str(arguments);
        }
    }

    /// The assembled reply. A stream that ended without `[DONE]` and without a finish reason
    /// was cut.
    pub(crate) fn finish(mut self, done: bool) -> Result<ChatResponse, ProviderError> {
        if !done && self.finish_reason.is_none() {
            return Err(ProviderError::StreamCut("the stream ended before [DONE] and without a finish reason".into()));
        }
        let mut tool_calls: Vec<ToolCall> = std::mem::take(&mut self.calls).into_values().collect();
        finish_tool_calls(&mut tool_calls);
        Ok(ChatResponse {
            content: self.collector.take_text(),
            tool_calls,
            reasoning_content: self.collector.take_reasoning(),
            thinking_blocks: None,
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model,
        })
    }
}

//! Assembles a streamed Chat Completions reply from its `data:` chunks: text and reasoning
//! deltas, tool calls pieced together by index, the finish reason and the usage chunk.

use std::collections::BTreeMap;

use super::chunk::{Choice, Chunk, Text, ToolCallPiece};
use super::usage::parse_usage;
use crate::error::ProviderError;
use crate::message::ToolCall;
use crate::transport::parse_typed;
use crate::types::{ChatResponse, Collector, Usage, finish_tool_calls};

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

    /// Takes one event's data; returns `true` at `[DONE]`. The chunk is read into borrowed,
    /// typed fields (no JSON tree), and a chunk that is not JSON of that shape is an error
    /// naming what came.
    pub(crate) fn on_event(&mut self, data: &str) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk<'_> = parse_typed(data.as_bytes(), "stream chunk")?;
        if let Some(error) = chunk.error {
            return Err(ProviderError::from_error_object(&error, &self.provider));
        }
        if self.model.is_none() {
            self.model = chunk.model.as_deref().map(str::trim).filter(|model| !model.is_empty()).map(str::to_owned);
        }
        if let Some(usage) = chunk.usage.as_ref().filter(|usage| usage.is_object()) {
            self.usage = parse_usage(usage);
        }
        if let Some(choice) = chunk.choices.and_then(|choices| choices.into_iter().next()) {
            self.on_choice(choice);
        }
        Ok(false)
    }

    fn on_choice(&mut self, choice: Choice<'_>) {
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason.into_owned());
        }
        let Some(delta) = choice.delta else { return };
        let reasoning = delta.reasoning_content.or(delta.reasoning);
        self.collector.reasoning(reasoning.as_ref().map(Text::as_str).unwrap_or_default());
        self.collector.text(delta.content.as_ref().map(Text::as_str).unwrap_or_default());
        for (position, piece) in delta.tool_calls.into_iter().flatten().enumerate() {
            self.on_tool_call_piece(position as u64, piece);
        }
    }

    /// The first piece of a call brings its id and name; later ones add argument text.
    fn on_tool_call_piece(&mut self, position: u64, piece: ToolCallPiece<'_>) {
        let index = piece.index.unwrap_or(position);
        let call = self.calls.entry(index).or_insert_with(|| ToolCall::new("", "", ""));
        if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
            call.id = id.into_owned();
        }
        let Some(function) = piece.function else { return };
        if let Some(name) = function.name.filter(|name| !name.is_empty()) {
            call.function.name = name.into_owned();
        }
        if let Some(arguments) = function.arguments {
            call.function.arguments.push_str(&arguments);
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

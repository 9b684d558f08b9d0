//! Anthropic Messages (`POST {apiBase}/v1/messages`): the request body with prompt-cache
//! markers and thinking settings, and the reply whether it comes whole or streamed.

use serde_json::{Value, json};

mod convert;
mod event;
mod stream;
mod usage;

use crate::error::{ProviderError, shorten};
use crate::message::ToolCall;
use crate::registry::Resolution;
use crate::transport::{Transport, is_event_stream};
use crate::types::{ChatRequest, ChatResponse, Collector, StreamEvent, finish_tool_calls, non_empty, replay_as_stream};
use convert::{convert, mark_cache_points};
use stream::EventReader;
use usage::{AnthropicUsage, finish_reason};

/// The API version every request declares.
const API_VERSION: &str = "2023-06-01";

/// A client for one Anthropic Messages endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Anthropic {
    /// HTTP with `x-api-key`, `anthropic-version` and extra headers.
    transport: Transport,
    /// `{apiBase}/v1/messages`.
    url: String,
    /// Registry name, for errors.
    provider: String,
}

impl Anthropic {
    /// A client for the resolved provider.
    pub(crate) fn new(resolution: &Resolution) -> Result<Anthropic, ProviderError> {
        let mut headers = vec![("anthropic-version".to_owned(), API_VERSION.to_owned())];
        headers.extend(resolution.api_key.iter().map(|key| ("x-api-key".to_owned(), key.clone())));
        headers.extend(resolution.extra_headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        let transport = Transport::new(&resolution.name, &resolution.api_base, &resolution.key_hint, &headers)?;
        Ok(Anthropic { transport, url: messages_url(&resolution.api_base), provider: resolution.name.clone() })
    }

    /// The transport, to adjust its timeouts.
    pub(crate) fn transport_mut(&mut self) -> &mut Transport {
        &mut self.transport
    }

    /// One attempt: sends the request and reads the reply, streaming pieces to `on_event`.
    pub(crate) async fn send(
        &self,
        request: &ChatRequest,
        model: &str,
        stream: bool,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        let body = request_body(request, model, stream);
        let response = self.transport.post(&self.url, &body).await?;
        if stream && is_event_stream(&response) {
            let mut reader = EventReader::new(Collector::new(Some(on_event)), &self.provider);
            let done = self.transport.read_sse(response, |event| reader.on_event(event.data)).await?;
            return reader.finish(done);
        }
        let json = self.transport.read_json(response).await?;
        let mut reply = parse_message(&json, &self.provider)?;
        if stream {
            replay_as_stream(&mut reply, on_event);
        }
        Ok(reply)
    }
}

/// The messages endpoint. Like Anthropic's SDK, the base is the host (`https://api.anthropic.com`)
/// and `/v1` is added; a base that already ends in `/v1` is accepted as well.
fn messages_url(api_base: &str) -> String {
    let base = api_base.trim_end_matches('/');
    if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") }
}

/// The JSON body for `request`.
pub(crate) fn request_body(request: &ChatRequest, model: &str, stream: bool) -> Value {
    let mut converted = convert(&request.messages);
    let mut tools: Vec<Value> = request.tools.iter().map(tool_definition).collect();
    mark_cache_points(&mut converted.system, &mut converted.messages, &mut tools);
    let max_tokens = request.max_tokens.max(1);
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": converted.messages, "stream": stream});
    if !converted.system.is_empty() {
        body["system"] = Value::Array(converted.system);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!({"type": "auto"});
    }
    match thinking(request.reasoning_effort.as_deref(), max_tokens) {
        Some((thinking, max_tokens)) => {
            // Anthropic accepts only the default temperature while the model thinks.
            body["thinking"] = thinking;
            body["max_tokens"] = json!(max_tokens);
        }
        None => {
            if let Some(temperature) = request.temperature {
                body["temperature"] = json!(temperature);
            }
        }
    }
    body
}

/// A tool definition in Anthropic's shape.
fn tool_definition(tool: &oxibot_proto::ToolSpec) -> Value {
    let schema =
        if tool.parameters.is_object() { tool.parameters.clone() } else { json!({"type": "object", "properties": {}}) };
    let mut definition = json!({"name": tool.name, "input_schema": schema});
    if !tool.description.is_empty() {
        definition["description"] = json!(tool.description);
    }
    definition
}

/// The `thinking` setting and the raised `max_tokens` for a reasoning effort, as nanobot
/// maps them: `adaptive` lets the model decide; low, medium and high get a token budget
/// (1024, 4096, and at least 8192) on top of the answer's tokens.
fn thinking(effort: Option<&str>, max_tokens: u32) -> Option<(Value, u32)> {
    let effort = effort?.trim().to_lowercase();
    let budget = match effort.as_str() {
        "" | "none" => return None,
        "adaptive" => return Some((json!({"type": "adaptive"}), max_tokens)),
        "low" | "minimal" => 1024,
        "high" => max_tokens.max(8192),
        _ => 4096,
    };
    Some((json!({"type": "enabled", "budget_tokens": budget}), max_tokens.max(budget + 4096)))
}

/// Reads a complete (non-streamed) message.
pub(crate) fn parse_message(json: &Value, provider: &str) -> Result<ChatResponse, ProviderError> {
    if json["type"] == "error" || json.get("error").is_some_and(|e| !e.is_null()) {
        return Err(ProviderError::from_error_object(&json["error"], provider));
    }
    let Some(blocks) = json["content"].as_array() else {
        return Err(ProviderError::Malformed(format!(
            "reply has no content blocks: {}",
            shorten(&json.to_string(), 200)
        )));
    };
    let (mut text, mut reasoning, mut tool_calls, mut thinking_blocks) =
        (String::new(), String::new(), Vec::new(), Vec::new());
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => tool_calls.push(ToolCall::new(
                block["id"].as_str().unwrap_or_default(),
                block["name"].as_str().unwrap_or_default(),
                block["input"].to_string(),
            )),
            Some("thinking") => {
                reasoning.push_str(block["thinking"].as_str().unwrap_or_default());
                thinking_blocks.push(block.clone());
            }
            Some("redacted_thinking") => thinking_blocks.push(block.clone()),
            _ => {}
        }
    }
    finish_tool_calls(&mut tool_calls);
    Ok(ChatResponse {
        content: non_empty(text),
        tool_calls,
        reasoning_content: non_empty(reasoning),
        thinking_blocks: if thinking_blocks.is_empty() { None } else { Some(Value::Array(thinking_blocks)) },
        finish_reason: json["stop_reason"].as_str().map(finish_reason),
        usage: AnthropicUsage::default().merged(&json["usage"]).into(),
        model: json["model"].as_str().filter(|model| !model.is_empty()).map(str::to_owned),
    })
}

#[cfg(test)]
mod tests;

//! OpenAI Chat Completions (`POST {apiBase}/chat/completions`), which most providers speak:
//! the request body, and the reply whether it comes whole or streamed.

use std::sync::Arc;

use serde_json::Value;

mod body;
mod chunk;
mod history;
mod prefix;
mod stream;
mod usage;

use crate::error::{ProviderError, shorten};
use crate::message::ToolCall;
use crate::registry::Resolution;
use crate::transport::{Transport, is_event_stream};
use crate::types::{
    ChatRequest, ChatResponse, Collector, StreamEvent, finish_tool_calls, non_empty, replay_as_stream, text_of,
};
use history::{Conversation, HistoryCache};
use prefix::PrefixCache;
use stream::ChunkReader;
use usage::parse_usage;

/// A client for one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub(crate) struct OpenAiCompatible {
    /// HTTP with the bearer key and extra headers.
    transport: Transport,
    /// `{apiBase}/chat/completions`.
    url: String,
    /// Registry name; some request fields depend on it.
    provider: String,
    /// The system prompts and tool list of recent requests, already encoded.
    prefixes: Arc<PrefixCache>,
    /// The other messages of recent conversations' last requests, already encoded.
    histories: Arc<HistoryCache>,
}

impl OpenAiCompatible {
    /// A client for the resolved provider.
    pub(crate) fn new(resolution: &Resolution) -> Result<OpenAiCompatible, ProviderError> {
        let mut headers: Vec<(String, String)> =
            resolution.api_key.iter().map(|key| ("authorization".to_owned(), format!("Bearer {key}"))).collect();
        headers.extend(resolution.extra_headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        let transport = Transport::new(&resolution.name, &resolution.api_base, &resolution.key_hint, &headers)?;
        let url = format!("{}/chat/completions", resolution.api_base.trim_end_matches('/'));
        Ok(OpenAiCompatible {
            transport,
            url,
            provider: resolution.name.clone(),
            prefixes: Arc::default(),
            histories: Arc::default(),
        })
    }

    /// The transport, to adjust its timeouts.
    pub(crate) fn transport_mut(&mut self) -> &mut Transport {
        &mut self.transport
    }

    /// One attempt: sends the request (of conversation `session`, whose last request's
    /// encoding is reused) and reads the reply, streaming pieces to `on_event`.
    pub(crate) async fn send(
        &self,
        request: &ChatRequest,
        session: Option<&str>,
        model: &str,
        stream: bool,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        let body = self.body(request, session, model, stream)?;
        let response = self.transport.post_bytes(&self.url, body).await?;
        if stream && is_event_stream(&response) {
            let mut reader = ChunkReader::new(Collector::new(Some(on_event)), &self.provider);
            let done = self.transport.read_sse(response, |event| reader.on_event(event.data)).await?;
            return reader.finish(done);
        }
        let json = self.transport.read_json(response).await?;
        let mut reply = parse_response(&json, &self.provider)?;
        if stream {
            replay_as_stream(&mut reply, on_event);
        }
        Ok(reply)
    }
}

impl OpenAiCompatible {
    /// The body of `request`, with what the caches hold of it; the encoding of `session`'s
    /// messages is kept for its next request.
    fn body(
        &self,
        request: &ChatRequest,
        session: Option<&str>,
        model: &str,
        stream: bool,
    ) -> Result<Vec<u8>, ProviderError> {
        let prefixes = Some(&*self.prefixes);
        let Some(key) = session else {
            return encode_request(request, None, model, stream, &self.provider, prefixes);
        };
        let mut conversation = self.histories.take(key);
        let body = encode_request(request, Some(&mut conversation), model, stream, &self.provider, prefixes)?;
        self.histories.put(key, conversation);
        Ok(body)
    }
}

/// The JSON body for `request`, encoded afresh.
#[cfg(test)]
pub(crate) fn request_body(
    request: &ChatRequest,
    model: &str,
    stream: bool,
    provider: &str,
) -> Result<Vec<u8>, ProviderError> {
    encode_request(request, None, model, stream, provider, None)
}

/// The JSON body for `request`, with the system prompt and tools from `prefixes` and the other
/// messages from `conversation` when they hold them.
fn encode_request(
    request: &ChatRequest,
    conversation: Option<&mut Conversation>,
    model: &str,
    stream: bool,
    provider: &str,
    prefixes: Option<&PrefixCache>,
) -> Result<Vec<u8>, ProviderError> {
    let effort = request.reasoning_effort.as_deref().map(str::to_lowercase).filter(|e| !e.is_empty());
    let settings = body::Settings {
        model,
        stream,
        completion_tokens_key: wants_max_completion_tokens(provider, model),
        temperature: request.temperature.filter(|_| accepts_temperature(model, effort.as_deref())),
        // `none` means off; `adaptive` is Anthropic's word and has no Chat Completions equivalent.
        reasoning_effort: effort.as_deref().filter(|e| *e != "none" && *e != "adaptive"),
    };
    // Room for the messages (the system prompt above all) and the tools, so the body is
    // written without growing its buffer.
    let messages: usize = request.messages.iter().map(|m| m.content.as_str().map_or(256, str::len) + 128).sum();
    let mut out = Vec::with_capacity(messages + 16 * 1024);
    let (_, rest) = body::split_system(&request.messages);
    let encoded = conversation
        .map(|conversation| conversation.encode(rest))
        .transpose()
        .map_err(|e| ProviderError::Malformed(format!("cannot encode the request: {e}")))?;
    body::write_body(&mut out, request, encoded, &settings, prefixes)
        .map_err(|e| ProviderError::Malformed(format!("cannot encode the request: {e}")))?;
    Ok(out)
}

/// The model id without any `vendor/` prefix, lowercased.
fn slug(model: &str) -> String {
    model.rsplit('/').next().unwrap_or(model).to_lowercase()
}

/// Whether the model is an OpenAI reasoning model (`o1`, `o3-mini`, `o4-mini`, `gpt-5…`).
fn is_reasoning_model(model: &str) -> bool {
    let slug = slug(model);
    slug.contains("gpt-5")
        || ["o1", "o3", "o4"].iter().any(|family| slug == *family || slug.starts_with(&format!("{family}-")))
}

/// OpenAI's newer models take `max_completion_tokens` and reject `max_tokens`.
fn wants_max_completion_tokens(provider: &str, model: &str) -> bool {
    provider == "openai" || is_reasoning_model(model)
}

/// Reasoning models reject a temperature, as does any model with reasoning effort on.
fn accepts_temperature(model: &str, effort: Option<&str>) -> bool {
    effort.is_none_or(|e| e == "none") && !is_reasoning_model(model)
}

/// Reads a complete (non-streamed) reply.
pub(crate) fn parse_response(json: &Value, provider: &str) -> Result<ChatResponse, ProviderError> {
    if let Some(error) = json.get("error").filter(|e| !e.is_null()) {
        return Err(ProviderError::from_error_object(error, provider));
    }
    let Some(choice) = json.get("choices").and_then(|c| c.get(0)) else {
        return Err(ProviderError::Malformed(format!("reply has no choices: {}", shorten(&json.to_string(), 200))));
    };
    let message = &choice["message"];
    let reasoning =
        message.get("reasoning_content").or_else(|| message.get("reasoning")).map(text_of).unwrap_or_default();
    let mut tool_calls: Vec<ToolCall> = message["tool_calls"].as_array().into_iter().flatten().map(tool_call).collect();
    finish_tool_calls(&mut tool_calls);
    Ok(ChatResponse {
        content: non_empty(text_of(&message["content"])),
        tool_calls,
        reasoning_content: non_empty(reasoning),
        thinking_blocks: None,
        finish_reason: choice["finish_reason"].as_str().map(str::to_owned),
        usage: parse_usage(&json["usage"]),
        model: reply_model(json),
    })
}

/// The `model` a reply (or a stream chunk) names, if any.
pub(crate) fn reply_model(json: &Value) -> Option<String> {
    json.get("model").and_then(Value::as_str).map(str::trim).filter(|model| !model.is_empty()).map(str::to_owned)
}

/// One entry of `message.tool_calls`; object arguments (some servers send them) become text.
fn tool_call(value: &Value) -> ToolCall {
    let function = &value["function"];
    let arguments = match &function["arguments"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    ToolCall::new(value["id"].as_str().unwrap_or_default(), function["name"].as_str().unwrap_or_default(), arguments)
}

#[cfg(test)]
mod tests;

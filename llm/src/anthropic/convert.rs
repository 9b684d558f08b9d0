//! Turns an OpenAI-format history into Anthropic Messages: the system prompt moves to the
//! top level, tool calls become `tool_use` blocks, tool results become `tool_result` blocks
//! in user turns, thinking blocks are replayed, and turns are merged so roles alternate.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::message::{ChatMessage, Role};

/// What an empty turn is sent as (Anthropic rejects empty text).
const EMPTY: &str = "(empty)";

/// A history in Anthropic's shape.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Converted {
    /// The system prompt as text blocks.
    pub(crate) system: Vec<Value>,
    /// `user` and `assistant` turns, alternating, starting with `user`.
    pub(crate) messages: Vec<Value>,
}

/// Converts `history`.
pub(crate) fn convert(history: &[Arc<ChatMessage>]) -> Converted {
    let mut out = Converted::default();
    for message in history {
        match message.role {
            Role::System => out.system.extend(text_blocks(&message.content)),
            Role::User => out.messages.push(json!({"role": "user", "content": user_content(&message.content)})),
            Role::Assistant => out.messages.push(json!({"role": "assistant", "content": assistant_blocks(message)})),
            Role::Tool => push_tool_result(&mut out.messages, message),
        }
    }
    out.messages = alternate(std::mem::take(&mut out.messages));
    out
}

/// Text blocks of a system message: its text, or one block per text part.
fn text_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) if !text.is_empty() => vec![json!({"type": "text", "text": text})],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .filter(|t| !t.is_empty())
            .map(|t| json!({"type": "text", "text": t}))
            .collect(),
        _ => Vec::new(),
    }
}

/// A user turn's content: text stays text, parts are translated (images, untyped parts).
fn user_content(content: &Value) -> Value {
    match content {
        Value::String(text) if !text.is_empty() => json!(text),
        Value::Array(parts) => {
            let blocks: Vec<Value> = parts.iter().filter_map(user_part).collect();
            if blocks.is_empty() { json!(EMPTY) } else { Value::Array(blocks) }
        }
        Value::Null | Value::String(_) => json!(EMPTY),
        other => json!(other.to_string()),
    }
}

/// One OpenAI content part as an Anthropic block; empty text is dropped.
fn user_part(part: &Value) -> Option<Value> {
    match part.get("type").and_then(Value::as_str) {
        Some("image_url") => image_block(part["image_url"]["url"].as_str().or(part["image_url"].as_str())?),
        Some("text") if part["text"].as_str().is_none_or(str::is_empty) => None,
        Some(_) => Some(part.clone()),
        // Anthropic requires a type on every block; a bare value is sent as its JSON text.
        None => Some(json!({"type": "text", "text": part.as_str().map_or_else(|| part.to_string(), str::to_owned)})),
    }
}

/// An image block from a `data:` URL or a plain URL.
fn image_block(url: &str) -> Option<Value> {
    if url.is_empty() {
        return None;
    }
    let inline = url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,"));
    Some(match inline {
        Some((media_type, data)) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    })
}

/// An assistant turn: thinking blocks first (as they were), then text, then tool calls.
fn assistant_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .thinking_blocks
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| matches!(b.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking")))
        .cloned()
        .collect();
    match &message.content {
        Value::String(text) if !text.is_empty() => blocks.push(json!({"type": "text", "text": text})),
        Value::Array(parts) => blocks.extend(parts.iter().filter_map(user_part)),
        _ => {}
    }
    for call in &message.tool_calls {
        let input = serde_json::from_str::<Value>(&call.function.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({"type": "tool_use", "id": tool_id(&call.id), "name": call.function.name, "input": input}));
    }
    if blocks.is_empty() {
        blocks.push(json!({"type": "text", "text": EMPTY}));
    }
    blocks
}

/// Adds a tool result to the user turn before it, or starts one, so the results of one
/// round of calls travel together.
fn push_tool_result(messages: &mut Vec<Value>, message: &ChatMessage) {
    let content = match &message.content {
        Value::Array(_) => user_content(&message.content),
        Value::String(text) if !text.is_empty() => json!(text),
        _ => json!(EMPTY),
    };
    let block = json!({"type": "tool_result", "tool_use_id": tool_id(message.tool_call_id.as_deref().unwrap_or_default()), "content": content});
    match messages.last_mut() {
        Some(last) if last["role"] == "user" => append_blocks(last, vec![block]),
        _ => messages.push(json!({"role": "user", "content": [block]})),
    }
}

/// A content value as a list of blocks (a string becomes one text block).
fn into_blocks(content: Value) -> Vec<Value> {
    match content {
        Value::Array(blocks) => blocks,
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Null => Vec::new(),
        other => vec![json!({"type": "text", "text": other.to_string()})],
    }
}

/// Appends `more` blocks to a turn's content.
fn append_blocks(message: &mut Value, more: Vec<Value>) {
    let mut blocks = into_blocks(message["content"].take());
    blocks.extend(more);
    message["content"] = Value::Array(blocks);
}

/// Merges same-role neighbours, drops trailing assistant turns (Anthropic has no prefill
/// here) and makes sure the first turn is the user's.
fn alternate(messages: Vec<Value>) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(messages.len());
    for mut message in messages {
        match merged.last_mut() {
            Some(last) if last["role"] == message["role"] => {
                append_blocks(last, into_blocks(message["content"].take()))
            }
            _ => merged.push(message),
        }
    }
    let mut last_dropped = None;
    while merged.last().is_some_and(|m| m["role"] == "assistant") {
        last_dropped = merged.pop();
    }
    if merged.is_empty() {
        // Only assistant turns: resend the last one's text as the user's so the request is valid.
        if let Some(dropped) = last_dropped.filter(|m| !has_tool_use(m)) {
            merged.push(json!({"role": "user", "content": dropped["content"].clone()}));
        }
    }
    if merged.first().is_some_and(|m| m["role"] == "assistant" && !has_tool_use(m)) {
        merged.insert(0, json!({"role": "user", "content": "(conversation continued)"}));
    }
    merged
}

fn has_tool_use(message: &Value) -> bool {
    message["content"].as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_use"))
}

/// A tool id Anthropic accepts (`[A-Za-z0-9_-]+`): valid ids pass unchanged, others are
/// cleaned and given a hash suffix so two different ids never become the same one.
pub(crate) fn tool_id(id: &str) -> String {
    if !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return id.to_owned();
    }
    let cleaned: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(48).collect();
    let hash = id.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    let prefix = cleaned.trim_matches('_');
    format!("{}_{hash:08x}", if prefix.is_empty() { "toolu" } else { prefix })
}

/// Marks the stable prefix for prompt caching: the end of the system prompt, the last tool
/// definition, and the turn before the newest one (so the history up to it is reused).
pub(crate) fn mark_cache_points(system: &mut [Value], messages: &mut [Value], tools: &mut [Value]) {
    let marker = json!({"type": "ephemeral"});
    if let Some(last) = system.last_mut() {
        last["cache_control"] = marker.clone();
    }
    if let Some(last) = tools.last_mut() {
        last["cache_control"] = marker.clone();
    }
    let count = messages.len();
    if count >= 3 {
        let turn = &mut messages[count - 2];
        let mut blocks = into_blocks(turn["content"].take());
        // Thinking blocks cannot carry a cache marker.
        if let Some(last) =
            blocks.last_mut().filter(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
        {
            last["cache_control"] = marker;
        }
        turn["content"] = Value::Array(blocks);
    }
}

//! The Chat Completions request body, written straight from the request's messages into bytes:
//! no intermediate `serde_json::Value` tree, and the system prompt, tools and a conversation's
//! other messages copied in when they were encoded before ([`PrefixCache`], and the caller's
//! conversation cache).
//!
//! Keys come out in the byte order of their names, at every level, which is the order a
//! `serde_json::Value` map gives them: the body is byte for byte what the same request built as
//! a `Value` serialises to, so provider prompt caches see the same prefix whichever way it was
//! built.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use oxibot_proto::ToolSpec;

use super::prefix::PrefixCache;
use crate::message::{ChatMessage, Role, ToolCall};
use crate::types::{ChatRequest, text_of};

/// The body's settings besides the messages and tools.
pub(crate) struct Settings<'a> {
    /// The model id sent on the wire.
    pub(crate) model: &'a str,
    /// Whether the reply is streamed.
    pub(crate) stream: bool,
    /// Whether the limit goes out as `max_completion_tokens` (else `max_tokens`).
    pub(crate) completion_tokens_key: bool,
    /// The temperature, when the model accepts one.
    pub(crate) temperature: Option<f64>,
    /// The reasoning effort, when one is sent.
    pub(crate) reasoning_effort: Option<&'a str>,
}

/// The system prompt (when the first message is one) and the other messages.
pub(crate) fn split_system(messages: &[Arc<ChatMessage>]) -> (Option<&ChatMessage>, &[Arc<ChatMessage>]) {
    match messages.split_first() {
        Some((head, rest)) if head.role == Role::System => (Some(&**head), rest),
        _ => (None, messages),
    }
}

/// Writes the body of `request` into `out`. The system prompt and the tools come from
/// `prefixes` when it has them; `encoded`, when given, is the wire form of the messages after
/// the system prompt (see [`split_system`]).
pub(crate) fn write_body(
    out: &mut Vec<u8>,
    request: &ChatRequest,
    encoded: Option<&[u8]>,
    settings: &Settings<'_>,
    prefixes: Option<&PrefixCache>,
) -> serde_json::Result<()> {
    out.push(b'{');
    let limit = request.max_tokens.max(1);
    if settings.completion_tokens_key {
        field(out, "max_completion_tokens", &limit, true)?;
    } else {
        field(out, "max_tokens", &limit, true)?;
    }
    out.extend_from_slice(b",\"messages\":[");
    let (system, rest) = split_system(&request.messages);
    if let Some(system) = system {
        write_system(out, system, prefixes)?;
    }
    if !rest.is_empty() {
        if system.is_some() {
            out.push(b',');
        }
        match encoded {
            Some(encoded) => out.extend_from_slice(encoded),
            None => write_list(out, rest)?,
        }
    }
    out.push(b']');
    field(out, "model", settings.model, false)?;
    if let Some(effort) = settings.reasoning_effort {
        field(out, "reasoning_effort", effort, false)?;
    }
    field(out, "stream", &settings.stream, false)?;
    if settings.stream {
        field(out, "stream_options", &StreamOptions { include_usage: true }, false)?;
    }
    if let Some(temperature) = settings.temperature {
        field(out, "temperature", &temperature, false)?;
    }
    if !request.tools.is_empty() {
        let encode = || {
            let mut bytes = Vec::new();
            write_tools(&mut bytes, &request.tools).map(|()| bytes)
        };
        match prefixes {
            Some(prefixes) => out.extend_from_slice(&prefixes.tools(&request.tools, encode)?),
            None => out.extend_from_slice(&encode()?),
        }
    }
    out.push(b'}');
    Ok(())
}

/// The system prompt, its wire form from `prefixes` when given.
fn write_system(out: &mut Vec<u8>, head: &ChatMessage, prefixes: Option<&PrefixCache>) -> serde_json::Result<()> {
    match prefixes {
        Some(prefixes) => {
            let encode = || {
                let mut bytes = Vec::new();
                write_message(&mut bytes, head).map(|()| bytes)
            };
            out.extend_from_slice(&prefixes.system(head, encode)?);
            Ok(())
        }
        None => write_message(out, head),
    }
}

/// `,"tool_choice":"auto","tools":[…]`.
fn write_tools(out: &mut Vec<u8>, tools: &[ToolSpec]) -> serde_json::Result<()> {
    field(out, "tool_choice", "auto", false)?;
    out.extend_from_slice(b",\"tools\":[");
    for (index, tool) in tools.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let function =
            WireFunctionSpec { description: &tool.description, name: &tool.name, parameters: &tool.parameters };
        serde_json::to_writer(&mut *out, &WireTool { function, kind: "function" })?;
    }
    out.push(b']');
    Ok(())
}

/// The wire form of `messages`, comma-separated, after what `out` holds.
fn write_list(out: &mut Vec<u8>, messages: &[Arc<ChatMessage>]) -> serde_json::Result<()> {
    for (index, message) in messages.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_message(out, message)?;
    }
    Ok(())
}

/// Appends the wire form of `messages` to `out`, separated by commas (a comma first when `out`
/// is not empty; no brackets): what a conversation cache holds.
pub(crate) fn write_messages(out: &mut Vec<u8>, messages: &[Arc<ChatMessage>]) -> serde_json::Result<()> {
    for message in messages {
        if !out.is_empty() {
            out.push(b',');
        }
        write_message(out, message)?;
    }
    Ok(())
}

/// `,"name":value` (without the comma for the first field).
fn field(out: &mut Vec<u8>, name: &str, value: &(impl Serialize + ?Sized), first: bool) -> serde_json::Result<()> {
    if !first {
        out.push(b',');
    }
    serde_json::to_writer(&mut *out, name)?;
    out.push(b':');
    serde_json::to_writer(&mut *out, value)
}

/// One message as the wire wants it.
fn write_message(out: &mut Vec<u8>, message: &ChatMessage) -> serde_json::Result<()> {
    serde_json::to_writer(out, &WireMessage::of(message))
}

/// `stream_options`.
#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One entry of `tools`.
#[derive(Serialize)]
struct WireTool<'a> {
    function: WireFunctionSpec<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The function of a `tools` entry.
#[derive(Serialize)]
struct WireFunctionSpec<'a> {
    description: &'a str,
    name: &'a str,
    parameters: &'a Value,
}

/// Whether `a` and `b` have the same wire form: they agree on every field [`WireMessage`]
/// is made of (a comparison far cheaper than encoding either).
pub(crate) fn same_wire_form(a: &ChatMessage, b: &ChatMessage) -> bool {
    a.role == b.role
        && a.content == b.content
        && a.tool_call_id == b.tool_call_id
        && a.name == b.name
        && a.reasoning_content == b.reasoning_content
        && a.tool_calls == b.tool_calls
}

/// A message as the wire wants it: no timestamp, thinking blocks or unknown fields, and no
/// empty text (providers reject it) except where an assistant only calls tools. Fields are
/// declared in the byte order of their names.
#[derive(Serialize)]
struct WireMessage<'a> {
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
}

impl<'a> WireMessage<'a> {
    fn of(message: &'a ChatMessage) -> WireMessage<'a> {
        WireMessage {
            content: Content::of(message),
            name: message.name.as_deref(),
            reasoning_content: message.reasoning_content.as_deref(),
            role: role_name(message.role),
            tool_call_id: message.tool_call_id.as_deref(),
            tool_calls: message.tool_calls.iter().map(WireToolCall::of).collect(),
        }
    }
}

/// A message's `content` on the wire.
enum Content<'a> {
    /// `null`: an assistant message that only calls tools, or has no content.
    Null,
    /// `"(empty)"`: providers reject empty text.
    Empty,
    /// Text or any other value, as stored.
    Value(&'a Value),
    /// Content parts, without the empty text parts.
    Parts(Vec<&'a Value>),
}

impl<'a> Content<'a> {
    fn of(message: &'a ChatMessage) -> Content<'a> {
        let calls_tools = message.role == Role::Assistant && !message.tool_calls.is_empty();
        let blank = if calls_tools || message.role == Role::Assistant && message.content.is_null() {
            Content::Null
        } else {
            Content::Empty
        };
        match &message.content {
            Value::String(text) if text.is_empty() => blank,
            Value::Array(parts) => {
                let kept: Vec<&Value> = parts
                    .iter()
                    .filter(|p| {
                        !(p.get("type").and_then(Value::as_str) == Some("text") && text_of(&p["text"]).is_empty())
                    })
                    .collect();
                if kept.is_empty() { blank } else { Content::Parts(kept) }
            }
            Value::Null => blank,
            other => Content::Value(other),
        }
    }
}

impl Serialize for Content<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Null => serializer.serialize_unit(),
            Content::Empty => serializer.serialize_str("(empty)"),
            Content::Value(value) => value.serialize(serializer),
            Content::Parts(parts) => serializer.collect_seq(parts),
        }
    }
}

/// A tool call on the wire, keys in byte order.
#[derive(Serialize)]
struct WireToolCall<'a> {
    function: WireFunctionCall<'a>,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
}

impl<'a> WireToolCall<'a> {
    fn of(call: &'a ToolCall) -> WireToolCall<'a> {
        WireToolCall {
            function: WireFunctionCall { arguments: &call.function.arguments, name: &call.function.name },
            id: &call.id,
            kind: &call.kind,
        }
    }
}

/// The function of a tool call on the wire.
#[derive(Serialize)]
struct WireFunctionCall<'a> {
    arguments: &'a str,
    name: &'a str,
}

/// The wire name of a role.
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

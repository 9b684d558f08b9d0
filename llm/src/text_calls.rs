//! Tool calls a model wrote as text because the server did not parse them (a local server
//! running a model with its stock chat template): the `<tool_call>{…}</tool_call>` blocks of
//! Qwen and Hermes templates, Llama's `<|python_tag|>{…}`, and — only when the whole reply is
//! that one block, it names an offered tool and its arguments fit the tool's schema — a
//! fenced JSON block `{"name": …, "arguments": {…}}`. A reply that shows JSON among other
//! text is an answer, never a call.
//!
//! On for the `custom` provider unless `providers.custom.textToolCalls` is `false`, off for
//! the others unless set to `true` (see [`ProviderConfig::text_tool_calls`](crate::config::ProviderConfig)).

use std::sync::atomic::{AtomicU64, Ordering};

use oxibot_proto::ToolSpec;
use serde_json::{Map, Value};

use crate::message::ToolCall;
use crate::types::ChatResponse;

/// Opening and closing markers of Qwen/Hermes tool calls.
const TOOL_CALL_OPEN: &str = "<tool_call>";
const TOOL_CALL_CLOSE: &str = "</tool_call>";
/// Llama 3's marker before a tool call, and the end-of-message tokens that may follow it.
const PYTHON_TAG: &str = "<|python_tag|>";
const LLAMA_ENDS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];

/// Holds back streamed text that may be a call written as text, so it never reaches the
/// user: text from a marker on, a marker's possible beginning at the end of what came so far,
/// and a reply while all of it is (or may become) one fenced block. The rest passes at once.
#[derive(Debug, Default)]
pub(crate) struct Holdback {
    /// Text received and not yet passed on.
    pending: String,
    /// A marker was seen: everything from it on waits for the end of the reply.
    held: bool,
    /// Some text was passed on (a fenced call must be the whole reply).
    passed: bool,
}

impl Holdback {
    /// Takes a piece of text; returns what may be shown now.
    pub(crate) fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        if self.held {
            return String::new();
        }
        if let Some(at) = [TOOL_CALL_OPEN, PYTHON_TAG].iter().filter_map(|m| self.pending.find(m)).min() {
            self.held = true;
            return self.pass(at);
        }
        let start = self.pending.trim_start();
        if !self.passed && (start.starts_with("```") || "```".starts_with(start)) {
            return String::new();
        }
        let keep = possible_marker_start(&self.pending);
        self.pass(self.pending.len() - keep)
    }

    /// The end of the reply: what is left to show, unless the reply held calls.
    pub(crate) fn finish(self, had_calls: bool) -> String {
        if had_calls { String::new() } else { self.pending }
    }

    fn pass(&mut self, upto: usize) -> String {
        let shown: String = self.pending.drain(..upto).collect();
        self.passed |= !shown.trim().is_empty();
        shown
    }
}

/// Bytes at the end of `text` that could begin a marker (`<tool`, `<|py`).
fn possible_marker_start(text: &str) -> usize {
    let Some(at) = text.rfind('<') else { return 0 };
    let tail = &text[at..];
    if [TOOL_CALL_OPEN, PYTHON_TAG].iter().any(|m| m.starts_with(tail)) { text.len() - at } else { 0 }
}

/// Numbers the ids of parsed calls, so every id in a conversation is new.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// `response` with the tool calls written in its text turned into real calls (and their text
/// taken out of the content); unchanged when the server already parsed calls or the text
/// holds none. Returns whether it found any.
pub fn parse_into(response: &mut ChatResponse, tools: &[ToolSpec]) -> bool {
    if !response.tool_calls.is_empty() {
        return false;
    }
    let Some(text) = response.content.as_deref() else { return false };
    let Some((calls, rest)) = marked_calls(text).or_else(|| fenced_call(text, tools)) else { return false };
    response.tool_calls = calls;
    response.content = Some(rest).filter(|rest| !rest.trim().is_empty());
    true
}

/// Calls between `<tool_call>` markers or after `<|python_tag|>`, and the text around them.
fn marked_calls(text: &str) -> Option<(Vec<ToolCall>, String)> {
    if let Some(start) = text.find(TOOL_CALL_OPEN) {
        let mut calls = Vec::new();
        let mut rest = text[..start].to_owned();
        let mut tail = &text[start..];
        while let Some(open) = tail.find(TOOL_CALL_OPEN) {
            rest.push_str(&tail[..open]);
            let body = &tail[open + TOOL_CALL_OPEN.len()..];
            let (inner, after) = body
                .find(TOOL_CALL_CLOSE)
                .map_or((body, ""), |close| (&body[..close], &body[close + TOOL_CALL_CLOSE.len()..]));
            calls.push(call_from_json(inner)?);
            tail = after;
        }
        rest.push_str(tail);
        return Some((calls, rest.trim().to_owned()));
    }
    let start = text.find(PYTHON_TAG)?;
    let mut body = &text[start + PYTHON_TAG.len()..];
    for end in LLAMA_ENDS {
        if let Some(at) = body.find(end) {
            body = &body[..at];
        }
    }
    let calls = body.split(';').filter(|part| !part.trim().is_empty()).map(call_from_json).collect::<Option<_>>()?;
    Some((calls, text[..start].trim().to_owned()))
}

/// The call of a reply that is one fenced JSON block and nothing else, naming an offered tool
/// with arguments its schema accepts.
fn fenced_call(text: &str, tools: &[ToolSpec]) -> Option<(Vec<ToolCall>, String)> {
    let inner = text.trim().strip_prefix("```")?.strip_suffix("```")?;
    let inner = inner.strip_prefix("json").unwrap_or(inner);
    if inner.contains("```") {
        return None;
    }
    let call = call_from_json(inner)?;
    let tool = tools.iter().find(|t| t.name == call.function.name)?;
    let arguments: Value = serde_json::from_str(&call.function.arguments).ok()?;
    fits_schema(&arguments, &tool.parameters).then(|| (vec![call], String::new()))
}

/// `{"name": …, "arguments" | "parameters": {…}}` (arguments also as a JSON string) as a call.
fn call_from_json(text: &str) -> Option<ToolCall> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    let name = value.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(text)) => serde_json::from_str::<Value>(text).ok().filter(Value::is_object)?,
        Some(object @ Value::Object(_)) => object.clone(),
        Some(_) => return None,
    };
    let id = format!("call_text_{}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
    Some(ToolCall::new(id, name, arguments.to_string()))
}

/// Whether `arguments` is an object with every required property, each known property of
/// its declared type, and no unknown one where the schema forbids them.
fn fits_schema(arguments: &Value, schema: &Value) -> bool {
    let Some(given) = arguments.as_object() else { return false };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    if required.into_iter().any(|key| !given.contains_key(key)) {
        return false;
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    given.iter().all(|(key, value)| match properties.and_then(|p| p.get(key)) {
        Some(property) => has_type(value, property.get("type")),
        None => !closed,
    })
}

fn has_type(value: &Value, declared: Option<&Value>) -> bool {
    let one = |name: &str| match name {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    };
    match declared {
        Some(Value::String(name)) => one(name),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools() -> Vec<ToolSpec> {
        let parameters = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        vec![ToolSpec {
            name: "read_file".into(),
            description: String::new(),
            parameters,
            read_only: true,
            exclusive: false,
            timeout_secs: None,
        }]
    }

    fn parsed(text: &str) -> ChatResponse {
        let mut response = ChatResponse { content: Some(text.to_owned()), ..ChatResponse::default() };
        parse_into(&mut response, &tools());
        response
    }

    fn calls(response: &ChatResponse) -> Vec<(String, Value)> {
        response
            .tool_calls
            .iter()
            .map(|c| (c.function.name.clone(), serde_json::from_str(&c.function.arguments).unwrap()))
            .collect()
    }

    #[test]
    fn qwen_and_hermes_markers_become_calls_and_leave_the_text_around_them() {
        let response = parsed(
            "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n</tool_call>\n\
             <tool_call>{\"name\": \"list_dir\", \"arguments\": \"{}\"}</tool_call>",
        );
        assert_eq!(calls(&response), [("read_file".into(), json!({"path": "a.md"})), ("list_dir".into(), json!({}))]);
        assert_eq!(response.content.as_deref(), Some("Let me look."));
        assert_ne!(response.tool_calls[0].id, response.tool_calls[1].id);
    }

    #[test]
    fn a_llama_python_tag_becomes_a_call() {
        let response = parsed("<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"b\"}}<|eom_id|>");
        assert_eq!(calls(&response), [("read_file".into(), json!({"path": "b"}))]);
        assert_eq!(response.content, None);
    }

    #[test]
    fn a_fenced_block_is_a_call_only_when_it_is_the_whole_reply_and_fits_an_offered_tool() {
        let fenced = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n```";
        assert_eq!(calls(&parsed(fenced)), [("read_file".into(), json!({"path": "a.md"}))]);
        for answer in [
            format!("Here is the call you asked about:\n{fenced}"),
            "```json\n{\"name\": \"delete_everything\", \"arguments\": {}}\n```".to_owned(),
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": 3}}\n```".to_owned(),
            "```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```".to_owned(),
            "```json\n{\"a\": 1}\n```".to_owned(),
        ] {
            let response = parsed(&answer);
            assert!(response.tool_calls.is_empty(), "{answer}");
            assert_eq!(response.content.as_deref(), Some(answer.as_str()));
        }
    }

    fn stream(pieces: &[&str], had_calls: bool) -> (String, String) {
        let mut holdback = Holdback::default();
        let shown: String = pieces.iter().map(|p| holdback.push(p)).collect();
        (shown, holdback.finish(had_calls))
    }

    #[test]
    fn streamed_text_from_a_marker_on_or_of_a_whole_fenced_block_is_held_back() {
        assert_eq!(
            stream(&["Let me look.\n<to", "ol_call>{\"name\"", ": \"x\"}</tool_call>"], true).0,
            "Let me look.\n"
        );
        assert_eq!(stream(&["``", "`json\n{}", "\n```"], true), (String::new(), String::new()));
        assert_eq!(stream(&["Use <b>", " tags"], false), ("Use <b> tags".into(), String::new()));
        assert_eq!(
            stream(&["```rust\nfn main() {}\n```"], false),
            (String::new(), "```rust\nfn main() {}\n```".into())
        );
        assert_eq!(stream(&["Here:\n", "```json\n{}\n```"], false).0, "Here:\n```json\n{}\n```");
    }

    #[test]
    fn broken_markers_and_server_parsed_calls_are_left_alone() {
        let broken = "<tool_call>{\"name\": </tool_call>";
        assert_eq!(parsed(broken).content.as_deref(), Some(broken));
        let mut response = ChatResponse {
            content: Some("<tool_call>{\"name\": \"x\"}</tool_call>".into()),
            tool_calls: vec![ToolCall::new("c", "y", "{}")],
            ..ChatResponse::default()
        };
        assert!(!parse_into(&mut response, &tools()));
    }
}

//! Running one model step's tool calls: read-only calls in parallel, the rest one at a time,
//! every failure turned into a result the model can read.

use futures_util::future::join_all;
use oxibot_proto::CallContext;
use serde_json::Value;

use super::approval::gate::{ApprovalGate, admit};
use super::builtin::{BuiltinContext, BuiltinTools};
use crate::message::{ChatMessage, ToolCall};
use crate::plugin::{PluginError, PluginHost};

/// Appended to error results so the model changes course instead of repeating the call.
const ERROR_HINT: &str = "\n\n[The tool call failed. Read the error, then fix the arguments or try another approach.]";

/// One call's result: the message the model reads, and whether the call failed (carried as a
/// flag, never guessed back from the text).
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// The tool-result message for the conversation.
    pub message: ChatMessage,
    /// Whether the call failed (bad arguments, refused, tool error, or plugin crash).
    pub is_error: bool,
}

/// Decides whether a call may run at all, before it reaches a plugin (Dream's restricted
/// tool set uses one). A refusal becomes the call's error result.
pub trait ToolGate: Send + Sync {
    /// `Err(reason)` refuses the call.
    fn check(&self, tool: &str, arguments: &Value) -> Result<(), String>;
}

/// Where one step's calls run: the plugin host, the turn's built-in tools (asked first), the
/// context every call gets, and the gate that may refuse a call.
pub struct Toolbox<'a> {
    /// The plugins' tools.
    pub host: &'a PluginHost,
    /// Tools that run inside the kernel.
    pub builtins: &'a BuiltinTools,
    /// Session, channel and workspace of the calls, and why the turn runs.
    pub context: &'a BuiltinContext,
    /// Refuses calls before they run, when set.
    pub gate: Option<&'a dyn ToolGate>,
    /// Asks a person before a call the approval policy says `ask` for, when set.
    pub approval: Option<ApprovalGate<'a>>,
}

/// Runs `calls` and returns one output per call, in the calls' order.
///
/// Consecutive read-only calls run concurrently; any other call runs alone, so writes and
/// exclusive tools such as `exec` never overlap with anything. Built-in tools never count as
/// read-only.
pub async fn execute(toolbox: &Toolbox<'_>, calls: &[ToolCall], max_chars: usize) -> Vec<ToolOutput> {
    let mut results = Vec::with_capacity(calls.len());
    for group in groups(toolbox, calls) {
        let keyed: Vec<(&ToolCall, Option<String>)> = calls[group].iter().map(|call| (call, None)).collect();
        results.extend(run_group(toolbox, &keyed, max_chars).await);
    }
    results
}

/// `calls` cut into the groups [`execute`] runs one after the other: each run of
/// consecutive read-only calls is one group, any other call a group of its own.
pub fn groups(toolbox: &Toolbox<'_>, calls: &[ToolCall]) -> Vec<std::ops::Range<usize>> {
    let read_only: Vec<bool> = calls.iter().map(|c| is_read_only(toolbox, &c.function.name)).collect();
    let mut groups = Vec::new();
    let mut start = 0;
    while start < calls.len() {
        let mut end = start + 1;
        if read_only[start] {
            while end < calls.len() && read_only[end] {
                end += 1;
            }
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// Runs one group's calls concurrently, each with its journal key (the plugin's
/// idempotency key) when it has one; one output per call, in order.
pub async fn run_group(
    toolbox: &Toolbox<'_>,
    calls: &[(&ToolCall, Option<String>)],
    max_chars: usize,
) -> Vec<ToolOutput> {
    join_all(calls.iter().map(|(call, key)| run_one(toolbox, call, key.clone(), max_chars))).await
}

/// Whether `tool` only reads: its plugin's manifest says so and it is not exclusive.
/// Built-in tools never count as read-only. Such a call may run beside others, and run again
/// after a restart interrupted it.
pub fn is_read_only(toolbox: &Toolbox<'_>, tool: &str) -> bool {
    !toolbox.builtins.contains(tool)
        && toolbox.host.tool_spec(tool).is_some_and(|spec| spec.read_only && !spec.exclusive)
}

async fn run_one(toolbox: &Toolbox<'_>, call: &ToolCall, key: Option<String>, max_chars: usize) -> ToolOutput {
    let span = crate::telemetry::genai::tool_call(call);
    let name = &call.function.name;
    let arguments = parse_arguments(name, &call.function.arguments)
        .and_then(|arguments| toolbox.gate.map_or(Ok(()), |g| g.check(name, &arguments)).map(|()| arguments));
    let mut audit = None;
    let (content, is_error) = match arguments {
        Err(message) => (format!("Error: {message}{ERROR_HINT}"), true),
        // The approval check sees the very arguments that run: nothing is parsed again.
        Ok(arguments) => match admit(toolbox.approval.as_ref(), name, &arguments, toolbox.context).await {
            Err((note, record)) => {
                audit = Some(record);
                (format!("Error: {note}"), true)
            }
            Ok(record) => {
                audit = record;
                run_admitted(toolbox, name, arguments, key).await
            }
        },
    };
    if let Some(span) = span {
        span.finish(&content, is_error);
    }
    let mut message = ChatMessage::tool_result(call, truncate(content, max_chars));
    if let Some(record) = audit {
        message.extra.insert("approval".to_owned(), record);
    }
    ToolOutput { message, is_error }
}

/// Runs a call the approval check let through, in the built-in of its name or its plugin
/// (with the call's idempotency key, when the turn keeps a journal).
async fn run_admitted(toolbox: &Toolbox<'_>, name: &str, arguments: Value, key: Option<String>) -> (String, bool) {
    match toolbox.builtins.get(name) {
        Some(tool) => {
            let reply = tool.call(arguments, toolbox.context).await;
            if reply.is_error { (format!("{}{ERROR_HINT}", reply.content), true) } else { (reply.content, false) }
        }
        None => {
            let context = CallContext { idempotency_key: key, ..toolbox.context.call.clone() };
            run_in_plugin(toolbox.host, name, arguments, context).await
        }
    }
}

async fn run_in_plugin(host: &PluginHost, tool: &str, arguments: Value, context: CallContext) -> (String, bool) {
    match host.call(tool, arguments, context, None).await {
        Ok(result) if result.is_error => (format!("{}{ERROR_HINT}", result.content), true),
        Ok(result) => (result.content, false),
        Err(error) => (format!("Error: {}{ERROR_HINT}", describe(&error)), true),
    }
}

/// Parses the model's argument text; an empty string means no arguments.
fn parse_arguments(tool: &str, text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!("the arguments for {tool} must be a JSON object, got {}", kind(&other))),
        Err(error) => Err(format!(
            "the arguments for {tool} are not valid JSON ({error}); send one JSON object that matches the tool's parameters"
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(error: &PluginError) -> String {
    match error {
        PluginError::PluginClosed { plugin, cause, .. } => {
            format!(
                "the tool's plugin '{plugin}' crashed while running it ({cause}); it has been restarted, so the call can be retried"
            )
        }
        other => other.to_string(),
    }
}

/// Cuts `content` to `max_chars` characters with a marker saying how much was left out.
pub fn truncate(content: String, max_chars: usize) -> String {
    let total = content.chars().count();
    if total <= max_chars {
        return content;
    }
    let kept: String = content.chars().take(max_chars).collect();
    format!("{kept}\n\n[… output truncated: {} more characters not shown; ask for a smaller part]", total - max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_are_not_a_json_object_get_a_readable_error() {
        assert!(parse_arguments("read_file", "{\"path\": \"a\"").unwrap_err().contains("not valid JSON"));
        assert!(parse_arguments("read_file", "[1]").unwrap_err().contains("must be a JSON object"));
        assert_eq!(parse_arguments("list_dir", "  ").unwrap(), serde_json::json!({}));
    }

    #[test]
    fn long_results_are_cut_with_a_marker() {
        let out = truncate("x".repeat(50), 10);
        assert!(out.starts_with("xxxxxxxxxx\n"));
        assert!(out.contains("40 more characters"));
        assert_eq!(truncate("short".into(), 10), "short");
    }
}

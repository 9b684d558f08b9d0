//! Kernel built-in tools: the tools that need the kernel's own state (`cron`, `spawn`,
//! `message`) and so run inside the kernel instead of a plugin process. A turn offers them
//! next to the plugins' tools; [`super::tool_batch`] runs a call through the built-in of that
//! name before it looks for a plugin.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use oxibot_proto::{CallContext, ToolSpec};
use serde_json::Value;

use crate::provider::Usage;

/// What a built-in tool answers: the text the model reads and whether the call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReply {
    /// The result text (`Error: …` for failures, by the tools' convention).
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

impl ToolReply {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> ToolReply {
        ToolReply { content: content.into(), is_error: false }
    }

    /// A failure the model can read; `problem` is prefixed with `Error: `.
    pub fn error(problem: impl std::fmt::Display) -> ToolReply {
        ToolReply { content: format!("Error: {problem}"), is_error: true }
    }
}

/// Why a turn runs: a built-in may behave differently (the `cron` tool adds no job from
/// inside a cron run, for example).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TurnSource {
    /// A message from the user (terminal or chat channel).
    #[default]
    User,
    /// A scheduled job firing.
    Cron,
    /// The periodic heartbeat.
    Heartbeat,
    /// A background helper's own turn.
    Subagent,
    /// A kernel notice to the session (a helper's result coming back).
    System,
}

impl TurnSource {
    /// Its name in the usage log and in exported spans (`user`, `cron`, `heartbeat`,
    /// `subagent`, `system`).
    pub fn name(self) -> &'static str {
        match self {
            TurnSource::User => "user",
            TurnSource::Cron => "cron",
            TurnSource::Heartbeat => "heartbeat",
            TurnSource::Subagent => "subagent",
            TurnSource::System => "system",
        }
    }
}

/// What a built-in call runs with: the call context plugins get, and why the turn runs.
#[derive(Debug, Clone, Default)]
pub struct BuiltinContext {
    /// Session, channel, chat and workspace of the call.
    pub call: CallContext,
    /// Why the turn runs.
    pub source: TurnSource,
    /// The turn's token counts so far (its model calls up to the one asking for this call):
    /// the `message` tool sends them with a reply to the turn's own chat, which then ends the
    /// turn for a channel that reports usage (the API channel).
    pub usage: Usage,
}

/// The future a built-in call returns (it runs on the turn's own task; no `Send` needed).
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolReply> + 'a>>;

/// One built-in tool.
pub trait BuiltinTool: Send + Sync {
    /// Name, description and JSON schema, as the model sees them.
    fn spec(&self) -> ToolSpec;

    /// Runs one call with the model's (already parsed, object) arguments.
    fn call<'a>(&'a self, arguments: Value, context: &'a BuiltinContext) -> ToolFuture<'a>;

    /// Stops what this tool still runs for session `session_key` (`/stop`); returns how many
    /// pieces of work it stopped. Most tools run nothing past their call.
    fn stop_session(&self, _session_key: &str) -> usize {
        0
    }
}

/// The built-in tools one turn offers, in a fixed order (so the prompt prefix stays the same
/// from turn to turn and provider caches hit).
#[derive(Clone, Default)]
pub struct BuiltinTools {
    /// The tools, each with its spec (asked for once, when the tool joins the set: a spec is
    /// fixed, and some take a while to build); shared, since every turn takes a copy.
    tools: Arc<[(ToolSpec, Arc<dyn BuiltinTool>)]>,
    /// The specs as JSON text, written on first use (for prompt-size estimates every turn).
    json: Arc<OnceLock<Arc<str>>>,
}

impl BuiltinTools {
    /// A set of exactly `tools`.
    fn of(tools: Vec<(ToolSpec, Arc<dyn BuiltinTool>)>) -> BuiltinTools {
        BuiltinTools { tools: tools.into(), json: Arc::default() }
    }

    /// A set of `tools`; a later tool with the name of an earlier one is left out.
    pub fn new(tools: Vec<Arc<dyn BuiltinTool>>) -> BuiltinTools {
        let mut kept: Vec<(ToolSpec, Arc<dyn BuiltinTool>)> = Vec::with_capacity(tools.len());
        for tool in tools {
            let spec = tool.spec();
            if kept.iter().all(|(k, _)| k.name != spec.name) {
                kept.push((spec, tool));
            }
        }
        BuiltinTools::of(kept)
    }

    /// The same set without the tools named in `names` (a helper's turn offers no `spawn`).
    pub fn without(&self, names: &[&str]) -> BuiltinTools {
        let tools = self.tools.iter().filter(|(spec, _)| !names.contains(&spec.name.as_str())).cloned().collect();
        BuiltinTools::of(tools)
    }

    /// The same set plus `tool` (replacing a tool of the same name).
    pub fn with(&self, tool: Arc<dyn BuiltinTool>) -> BuiltinTools {
        let spec = tool.spec();
        let mut tools: Vec<_> = self.tools.iter().filter(|(k, _)| k.name != spec.name).cloned().collect();
        tools.push((spec, tool));
        BuiltinTools::of(tools)
    }

    /// The tool called `name`, if this set has one.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn BuiltinTool>> {
        self.tools.iter().find(|(spec, _)| spec.name == name).map(|(_, tool)| tool)
    }

    /// Whether `other` is this very set (or a copy of it), not merely one with the same names.
    pub fn same_set(&self, other: &BuiltinTools) -> bool {
        Arc::ptr_eq(&self.tools, &other.tools)
    }

    /// Whether the set has a tool called `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The tools' specs, in the set's order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    /// The tools' specs as a JSON array, in the set's order (encoded once per set).
    pub fn specs_json(&self) -> Arc<str> {
        let specs: Vec<&ToolSpec> = self.tools.iter().map(|(spec, _)| spec).collect();
        Arc::clone(self.json.get_or_init(|| serde_json::to_string(&specs).unwrap_or_default().into()))
    }

    /// The tools' names, in the set's order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|(spec, _)| spec.name.clone()).collect()
    }

    /// Stops what every tool still runs for session `session_key`; returns how many pieces of
    /// work were stopped.
    pub fn stop_session(&self, session_key: &str) -> usize {
        self.tools.iter().map(|(_, tool)| tool.stop_session(session_key)).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl std::fmt::Debug for BuiltinTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(&'static str);

    impl BuiltinTool for Echo {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.to_owned(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
                read_only: false,
                exclusive: false,
                timeout_secs: None,
            }
        }

        fn call<'a>(&'a self, arguments: Value, _: &'a BuiltinContext) -> ToolFuture<'a> {
            Box::pin(async move { ToolReply::ok(arguments.to_string()) })
        }
    }

    #[test]
    fn a_set_keeps_its_order_and_drops_what_is_left_out() {
        let set = BuiltinTools::new(vec![Arc::new(Echo("message")), Arc::new(Echo("spawn")), Arc::new(Echo("cron"))]);
        assert_eq!(set.names(), ["message", "spawn", "cron"]);
        assert_eq!(set.without(&["spawn", "message"]).names(), ["cron"]);
        assert!(!set.without(&["cron"]).contains("cron"));
    }

    #[test]
    fn a_duplicate_name_keeps_the_first_tool() {
        let set = BuiltinTools::new(vec![Arc::new(Echo("cron")), Arc::new(Echo("cron"))]);
        assert_eq!(set.names(), ["cron"]);
    }

    #[test]
    fn errors_start_with_the_convention_models_know() {
        let reply = ToolReply::error("unknown timezone 'Mars/Base'");
        assert!(reply.is_error);
        assert_eq!(reply.content, "Error: unknown timezone 'Mars/Base'");
    }
}

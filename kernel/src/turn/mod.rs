//! The turn: one run of the LLM ↔ tools loop, usable by anything that needs the model to act
//! (a session's reply, Dream's editing phase, and later schedulers and subagents).
//!
//! Code map: [`runner::Turn`] is the loop (model call, [`tool_batch`], [`hooks`],
//! checkpoints, [`budget::fit`] before each call, [`repeats`] against a model stuck on one
//! call, [`builtin`] tools that run inside the kernel). [`Engine`] is the narrow handle a turn
//! needs: the model, the tools, and the turn settings; [`Engine::run`] runs a [`TurnInput`]
//! with them (a session spawns that future as a task `/stop` can abort). Nothing here knows
//! about sessions, memory or channels; those layers call down into this one.

pub mod approval;
pub mod budget;
pub mod builtin;
pub mod events;
pub mod hooks;
pub mod repeats;
pub mod runner;
pub mod tool_batch;

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use oxibot_proto::ToolSpec;

use tokio::sync::mpsc::UnboundedSender;

use crate::message::ChatMessage;
use crate::plugin::PluginHost;
use crate::provider::Provider;
use builtin::{BuiltinContext, BuiltinTools};
use hooks::CompositeHook;
use runner::{Checkpoint, Journal, RunError, RunSpec, Turn, TurnEvent, TurnOutcome};

/// What a turn runs with: the LLM client, the plugin host its tools run in, and the
/// configured turn settings. Shared (behind an `Arc`) by every turn of the kernel. The model
/// side (client and settings) can be replaced while the kernel runs (a config edit); a turn
/// keeps the one it started with.
pub struct Engine {
    /// The LLM client and the turn settings, replaced together.
    model: RwLock<(Arc<Provider>, Arc<RunSpec>)>,
    /// Where tools run (and, in the gateway, the channels).
    host: PluginHost,
    /// The approval policy and the calls waiting for a person's answer.
    approvals: Arc<approval::Approvals>,
    /// The tool list turns offered last, reused while the plugins' tools and the built-ins
    /// are the same, so a turn does not copy every tool's schema.
    offered: Mutex<Option<Offered>>,
}

/// A tool list and what it was made from.
struct Offered {
    /// The plugins' tools as JSON, which the registry replaces whenever they change.
    registry: Arc<str>,
    /// The built-ins it includes.
    builtins: BuiltinTools,
    /// The list.
    tools: Arc<[ToolSpec]>,
}

impl Engine {
    /// An engine over `provider` and `host` with `spec`'s settings.
    pub fn new(provider: Provider, host: PluginHost, spec: RunSpec, approvals: Arc<approval::Approvals>) -> Engine {
        Engine { model: RwLock::new((Arc::new(provider), Arc::new(spec))), host, approvals, offered: Mutex::new(None) }
    }

    /// The approvals every turn's calls go through.
    pub fn approvals(&self) -> &Arc<approval::Approvals> {
        &self.approvals
    }

    /// The LLM client.
    pub fn provider(&self) -> Arc<Provider> {
        self.model.read().unwrap_or_else(PoisonError::into_inner).0.clone()
    }

    /// The plugin host.
    pub fn host(&self) -> &PluginHost {
        &self.host
    }

    /// The tools a turn with `builtins` offers (see [`tool_list`]), the
    /// same shared list while nothing changed.
    pub fn offered_tools(&self, builtins: &BuiltinTools) -> Arc<[ToolSpec]> {
        let registry = self.host.tools_json();
        let mut offered = self.offered.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(same) =
            offered.as_ref().filter(|o| Arc::ptr_eq(&o.registry, &registry) && o.builtins.same_set(builtins))
        {
            return Arc::clone(&same.tools);
        }
        let tools: Arc<[ToolSpec]> = tool_list(self.host.tools(), builtins).into();
        *offered = Some(Offered { registry, builtins: builtins.clone(), tools: Arc::clone(&tools) });
        tools
    }

    /// The configured turn settings.
    pub fn spec(&self) -> Arc<RunSpec> {
        self.model.read().unwrap_or_else(PoisonError::into_inner).1.clone()
    }

    /// Replaces the LLM client and the turn settings; turns under way finish with the old.
    pub fn replace_model(&self, provider: Provider, spec: RunSpec) {
        *self.model.write().unwrap_or_else(PoisonError::into_inner) = (Arc::new(provider), Arc::new(spec));
    }

    /// Runs `turn` with the model and settings of now: a config edit while it runs does not
    /// change them. Owns what it needs, so the future can be spawned as a task.
    pub async fn run(self: Arc<Self>, turn: TurnInput) -> Result<TurnOutcome, RunError> {
        let tools = self.offered_tools(&turn.builtins);
        let (provider, mut spec) = (self.provider(), self.spec());
        if let Some(model) = turn.model.filter(|model| *model != spec.model) {
            spec = Arc::new(RunSpec { model, ..(*spec).clone() });
        }
        let span = crate::telemetry::genai::TurnSpan::start(crate::telemetry::genai::TurnInfo {
            session: &turn.session,
            source: turn.context.source.name(),
            model: &spec.model,
            provider: provider.name(),
        });
        let run = Turn {
            provider: &provider,
            host: self.host(),
            spec: &spec,
            tools,
            context: turn.context,
            builtins: turn.builtins,
            hooks: turn.hooks,
            events: turn.events,
            checkpoint: turn.checkpoint,
            gate: None,
            approvals: Some(Arc::clone(&self.approvals)),
            compact_on_overflow: turn.compact_on_overflow,
            session: Some(&turn.session),
            journal: turn.journal,
        };
        let outcome = span.run(run.run(turn.messages)).await;
        span.finish(outcome.as_ref().map(|outcome| &outcome.usage).map_err(|error| error as &dyn std::fmt::Display));
        outcome
    }
}

/// What a session's turn starts from (see [`Engine::run`]).
pub struct TurnInput {
    /// System prompt, history and the user's message (the history shared with the session's
    /// replay, see [`crate::provider::ChatRequest::messages`]).
    pub messages: Vec<Arc<ChatMessage>>,
    /// The session's key (see [`Turn::session`]).
    pub session: String,
    /// Passed to every tool call, with why the turn runs.
    pub context: BuiltinContext,
    /// Tools that run inside the kernel, offered next to the plugins' tools.
    pub builtins: BuiltinTools,
    /// Hooks for this turn.
    pub hooks: CompositeHook,
    /// Progress for the caller.
    pub events: UnboundedSender<TurnEvent>,
    /// Persists new messages.
    pub checkpoint: Checkpoint,
    /// End with a context overflow rather than leave older turns out of the request (see
    /// [`Turn::compact_on_overflow`]).
    pub compact_on_overflow: bool,
    /// A model for this turn instead of the configured one (a background source's own, e.g.
    /// `gateway.heartbeat.model`); the provider's fallback models still follow it.
    pub model: Option<String>,
    /// The turn journal (see [`Journal`]).
    pub journal: Option<Journal>,
}

/// The tools a turn offers: the plugins' own tools, then the built-ins, then MCP servers'
/// tools (`mcp_…`), so the stable part of the list comes first and prompt caches hit. A
/// plugin tool named like a built-in is not offered: the built-in answers that name.
fn tool_list(plugin_tools: Vec<ToolSpec>, builtins: &BuiltinTools) -> Vec<ToolSpec> {
    let (mcp, mut tools): (Vec<ToolSpec>, Vec<ToolSpec>) =
        plugin_tools.into_iter().filter(|t| !builtins.contains(&t.name)).partition(|t| t.name.starts_with("mcp_"));
    tools.extend(builtins.specs());
    tools.extend(mcp);
    tools
}

//! The turn: one run of the LLM ↔ tools loop, usable by anything that needs the model to act
//! (a session's reply, Dream's editing phase, and later schedulers and subagents).
//!
//! Code map: [`runner::Turn`] is the loop (model call, [`tool_batch`], [`hooks`],
//! checkpoints, [`budget::fit`] before each call, [`repeats`] against a model stuck on one
//! call, [`builtin`] tools that run inside the kernel); [`runner_actor::RunnerActor`] runs one turn as an actor that `/stop` can cancel. [`Engine`] is the narrow handle a turn needs:
//! the model, the tools, and the turn settings. Nothing here knows about sessions, memory or
//! channels; those layers call down into this one.

pub mod budget;
pub mod builtin;
pub mod hooks;
pub mod repeats;
pub mod runner;
pub mod runner_actor;
pub mod tool_batch;

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use oxibot_proto::ToolSpec;

use crate::plugin::PluginHost;
use crate::provider::Provider;
use builtin::BuiltinTools;
use runner::RunSpec;

/// What a turn runs with: the LLM client, the plugin host its tools run in, and the
/// configured turn settings. Shared (behind an `Arc`) by every turn of the kernel. The model
/// side (client and settings) can be replaced while the kernel runs (a config edit); a turn
/// keeps the one it started with.
pub struct Engine {
    /// The LLM client and the turn settings, replaced together.
    model: RwLock<(Arc<Provider>, Arc<RunSpec>)>,
    /// Where tools run (and, in the gateway, the channels).
    host: PluginHost,
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
    pub fn new(provider: Provider, host: PluginHost, spec: RunSpec) -> Engine {
        Engine { model: RwLock::new((Arc::new(provider), Arc::new(spec))), host, offered: Mutex::new(None) }
    }

    /// The LLM client.
    pub fn provider(&self) -> Arc<Provider> {
        self.model.read().unwrap_or_else(PoisonError::into_inner).0.clone()
    }

    /// The plugin host.
    pub fn host(&self) -> &PluginHost {
        &self.host
    }

    /// The tools a turn with `builtins` offers (see [`runner_actor::offered_tools`]), the
    /// same shared list while nothing changed.
    pub fn offered_tools(&self, builtins: &BuiltinTools) -> Arc<[ToolSpec]> {
        let registry = self.host.tools_json();
        let mut offered = self.offered.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(same) =
            offered.as_ref().filter(|o| Arc::ptr_eq(&o.registry, &registry) && o.builtins.same_set(builtins))
        {
            return Arc::clone(&same.tools);
        }
        let tools: Arc<[ToolSpec]> = runner_actor::offered_tools(self.host.tools(), builtins).into();
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
}

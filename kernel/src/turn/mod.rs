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

use crate::plugin::PluginHost;
use crate::provider::Provider;
use runner::RunSpec;

/// What a turn runs with: the LLM client, the plugin host its tools run in, and the
/// configured turn settings. Shared (behind an `Arc`) by every turn of the kernel.
pub struct Engine {
    /// The LLM client.
    provider: Provider,
    /// Where tools run (and, in the gateway, the channels).
    host: PluginHost,
    /// Settings of a turn, from the config.
    spec: RunSpec,
}

impl Engine {
    /// An engine over `provider` and `host` with `spec`'s settings.
    pub fn new(provider: Provider, host: PluginHost, spec: RunSpec) -> Engine {
        Engine { provider, host, spec }
    }

    /// The LLM client.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The plugin host.
    pub fn host(&self) -> &PluginHost {
        &self.host
    }

    /// The configured turn settings.
    pub fn spec(&self) -> &RunSpec {
        &self.spec
    }
}

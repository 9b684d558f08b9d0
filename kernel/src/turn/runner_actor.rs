//! `RunnerActor`: runs one turn's LLM ↔ tools loop as an actor that can be stopped mid-way.

use std::sync::Arc;

use actix::prelude::*;
use oxibot_proto::ToolSpec;
use tokio::sync::{mpsc::UnboundedSender, oneshot};

use super::Engine;
use super::builtin::{BuiltinContext, BuiltinTools};
use super::hooks::CompositeHook;
use super::runner::{Checkpoint, Replay, RunError, Turn, TurnEvent, TurnOutcome};
use crate::message::ChatMessage;

/// Why a turn produced no outcome.
#[derive(Debug, thiserror::Error)]
pub enum TurnFailure {
    /// The loop failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `/stop` (or Ctrl-C) ended it.
    #[error("the turn was stopped")]
    Stopped,
    /// The runner went away without an answer.
    #[error("the runner stopped unexpectedly")]
    Lost,
}

/// Runs one turn; stops itself when the turn ends.
pub struct RunnerActor {
    /// The model, tools and settings the turn uses.
    engine: Arc<Engine>,
    /// Where the outcome goes; taken when the turn ends or is stopped.
    reply: Option<oneshot::Sender<Result<TurnOutcome, TurnFailure>>>,
    /// The running loop, so `StopTurn` can cancel it.
    work: Option<SpawnHandle>,
}

impl RunnerActor {
    /// A runner for one turn.
    pub fn new(engine: Arc<Engine>) -> RunnerActor {
        RunnerActor { engine, reply: None, work: None }
    }
}

impl Actor for RunnerActor {
    type Context = Context<Self>;
}

/// Start the turn. Resolves with its outcome.
#[derive(Message)]
#[rtype(result = "Result<TurnOutcome, TurnFailure>")]
pub struct RunTurn {
    /// System prompt, history and the user's message.
    pub messages: Vec<ChatMessage>,
    /// History encoded ahead, replayed between the system prompt and the rest of `messages`.
    pub history: Option<Replay>,
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
}

impl Handler<RunTurn> for RunnerActor {
    type Result = ResponseFuture<Result<TurnOutcome, TurnFailure>>;

    fn handle(&mut self, turn: RunTurn, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.reply = Some(tx);
        let engine = self.engine.clone();
        let work = async move {
            let tools = engine.offered_tools(&turn.builtins);
            // The model this turn started with, whatever a config edit does meanwhile.
            let (provider, spec) = (engine.provider(), engine.spec());
            let run = Turn {
                provider: &provider,
                host: engine.host(),
                spec: &spec,
                tools,
                context: turn.context,
                builtins: turn.builtins,
                hooks: turn.hooks,
                events: turn.events,
                checkpoint: turn.checkpoint,
                gate: None,
                compact_on_overflow: turn.compact_on_overflow,
            };
            run.run_with_history(turn.messages, turn.history).await
        };
        let handle = ctx.spawn(work.into_actor(self).map(|outcome, actor, ctx| {
            if let Some(reply) = actor.reply.take() {
                let _ = reply.send(outcome.map_err(TurnFailure::from));
            }
            ctx.stop();
        }));
        self.work = Some(handle);
        Box::pin(async move { rx.await.unwrap_or(Err(TurnFailure::Lost)) })
    }
}

/// The tools a turn offers: the plugins' own tools, then the built-ins, then MCP servers'
/// tools (`mcp_…`), so the stable part of the list comes first and prompt caches hit. A
/// plugin tool named like a built-in is not offered: the built-in answers that name.
pub fn offered_tools(plugin_tools: Vec<ToolSpec>, builtins: &BuiltinTools) -> Vec<ToolSpec> {
    let (mcp, mut tools): (Vec<ToolSpec>, Vec<ToolSpec>) =
        plugin_tools.into_iter().filter(|t| !builtins.contains(&t.name)).partition(|t| t.name.starts_with("mcp_"));
    tools.extend(builtins.specs());
    tools.extend(mcp);
    tools
}

/// Stop the running turn now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopTurn;

impl Handler<StopTurn> for RunnerActor {
    type Result = ();

    fn handle(&mut self, _: StopTurn, ctx: &mut Context<Self>) {
        if let Some(work) = self.work.take() {
            ctx.cancel_future(work);
        }
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(Err(TurnFailure::Stopped));
        }
        ctx.stop();
    }
}

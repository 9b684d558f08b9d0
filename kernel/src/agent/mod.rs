//! The agent: sessions, the runner loop, hooks and commands on top of the plugin host and an
//! LLM provider.
//!
//! Code map: [`SessionManager`] routes each message to the [`session_actor::SessionActor`] of
//! its session (created on demand, evicted when idle); the session actor persists the user's
//! message, builds the request with the [`crate::context::ContextBuilder`], and starts a
//! [`runner_actor::RunnerActor`] that runs [`runner::Turn`] (model calls, [`tool_batch`],
//! [`hooks`], checkpoints). `/stop` goes straight to the running runner through
//! [`TurnControl`].

pub mod budget;
pub mod commands;
pub mod hooks;
pub mod runner;
pub mod runner_actor;
pub mod session_actor;
pub mod tool_batch;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use actix::prelude::*;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::config::Config;
use crate::context::ContextBuilder;
use crate::memory::MemoryActors;
use crate::memory::history::HistoryStore;
use crate::memory::schedule::DreamSettings;
use crate::plugin::PluginHost;
use crate::provider::Provider;
use crate::session::SessionStore;
use runner::{RunSpec, TurnEvent};
use runner_actor::{RunnerActor, StopTurn};
pub use session_actor::ChannelOrigin;
use session_actor::{SessionActor, UserTurn};

/// Longest tool result kept in a conversation, in characters.
pub const MAX_TOOL_RESULT_CHARS: usize = 16_000;

/// Kernel services shared by every session.
pub struct Agent {
    /// The loaded config.
    pub config: Config,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The LLM client.
    pub provider: Provider,
    /// Tool plugins.
    pub host: PluginHost,
    /// Session files.
    pub store: Arc<SessionStore>,
    /// System-prompt builder (caches workspace files).
    pub context: Mutex<ContextBuilder>,
    /// Turn settings from the config.
    pub spec: RunSpec,
    /// `memory/history.jsonl` and its cursors.
    pub history: Arc<HistoryStore>,
    /// When and how Dream runs (`agents.defaults.dream`).
    pub dream: DreamSettings,
    /// When the kernel started, for `/status`.
    pub started: Instant,
    /// Whether sessions are consolidated in the background after each turn (off for a
    /// one-shot `oxibot agent -m`, which exits right after its answer).
    pub background_consolidation: bool,
}

impl Agent {
    /// Assembles the services; `stream` chooses streamed model replies.
    pub fn new(config: Config, workspace: PathBuf, provider: Provider, host: PluginHost, stream: bool) -> Agent {
        let defaults = &config.agents.defaults;
        let spec = RunSpec {
            model: defaults.model.clone(),
            max_tokens: defaults.max_tokens,
            temperature: defaults.temperature,
            reasoning_effort: defaults.reasoning_effort.clone(),
            max_iterations: defaults.max_tool_iterations.max(1),
            stream,
            max_tool_result_chars: MAX_TOOL_RESULT_CHARS,
            context_window: defaults.context_window_tokens,
        };
        let dream = DreamSettings::from_config(&defaults.dream).unwrap_or_else(|error| {
            tracing::warn!(%error, "using the default Dream settings");
            DreamSettings::default()
        });
        Agent {
            store: Arc::new(SessionStore::new(&workspace)),
            history: Arc::new(HistoryStore::new(&workspace)),
            dream,
            context: Mutex::new(ContextBuilder::new(workspace.clone())),
            config,
            workspace,
            provider,
            host,
            spec,
            started: Instant::now(),
            background_consolidation: true,
        }
    }
}

/// What a message produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnReply {
    /// The model's answer.
    Answer(String),
    /// A command's output.
    Command(String),
    /// The turn was stopped.
    Stopped,
    /// The message was a redelivery of one already answered, or there was nothing to
    /// resume; nothing to send.
    AlreadyAnswered,
}

impl TurnReply {
    /// The text to show the user.
    pub fn text(&self) -> &str {
        match self {
            TurnReply::Answer(text) | TurnReply::Command(text) => text,
            TurnReply::Stopped => "(stopped)",
            TurnReply::AlreadyAnswered => "",
        }
    }
}

/// Why a message could not be handled.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session file could not be read or written.
    #[error("session storage failed: {0}")]
    Session(String),
    /// The turn failed (the message explains; it was also stored as the answer).
    #[error("{0}")]
    Turn(String),
    /// The session's actor is gone (kernel shutting down).
    #[error("the session is shutting down")]
    Gone,
}

/// Reaches the runner of a session's current turn, bypassing the session's message queue.
#[derive(Default)]
pub struct TurnControl {
    runner: Mutex<Option<Addr<RunnerActor>>>,
}

impl TurnControl {
    fn set_runner(&self, runner: Option<Addr<RunnerActor>>) {
        *self.runner.lock().unwrap_or_else(PoisonError::into_inner) = runner;
    }

    /// Whether a turn is running.
    pub fn is_running(&self) -> bool {
        self.runner.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// Stops the running turn, if any; returns whether there was one.
    pub fn stop(&self) -> bool {
        match self.runner.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            Some(runner) => {
                runner.do_send(StopTurn);
                true
            }
            None => false,
        }
    }
}

/// Routes messages to session actors, creating them on demand.
pub struct SessionManager {
    agent: Arc<Agent>,
    /// Consolidator, Dream and git, shared by every session.
    memory: MemoryActors,
    sessions: Mutex<HashMap<String, SessionEntry>>,
}

/// A live session actor and the control of its running turn.
type SessionEntry = (Addr<SessionActor>, Arc<TurnControl>);

impl SessionManager {
    /// A manager over `agent`'s services. Must be used inside an actix system.
    pub fn new(agent: Arc<Agent>) -> SessionManager {
        let memory = MemoryActors::start(agent.clone());
        SessionManager { agent, memory, sessions: Mutex::default() }
    }

    /// The memory actors (Dream's schedule is started through them).
    pub fn memory(&self) -> &MemoryActors {
        &self.memory
    }

    /// The shared services.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// Handles one message for session `key`; progress goes to `events`.
    pub async fn send(
        &self,
        key: &str,
        text: &str,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let (addr, control) = self.session(key);
        if text.trim() == "/stop" {
            let stopped = control.stop();
            return Ok(TurnReply::Command(if stopped { "Stopping.".into() } else { "Nothing is running.".into() }));
        }
        addr.send(UserTurn { text: text.to_owned(), events, origin: None, persisted: None, resume: false })
            .await
            .map_err(|_| AgentError::Gone)?
    }

    /// Handles one message from a chat channel: `persisted` fires once it is on disk (or
    /// recognised as already stored); a redelivered message is answered at most once.
    pub async fn send_from_channel(
        &self,
        key: &str,
        text: &str,
        origin: ChannelOrigin,
        persisted: oneshot::Sender<()>,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let (addr, control) = self.session(key);
        if text.trim() == "/stop" {
            let _ = persisted.send(());
            let stopped = control.stop();
            return Ok(TurnReply::Command(if stopped { "Stopping.".into() } else { "Nothing is running.".into() }));
        }
        addr.send(UserTurn {
            text: text.to_owned(),
            events,
            origin: Some(origin),
            persisted: Some(persisted),
            resume: false,
        })
        .await
        .map_err(|_| AgentError::Gone)?
    }

    /// Records in session `key` that a reply could not be delivered.
    pub async fn record_undelivered(&self, key: &str, content: &str, error: &str) {
        let (addr, _) = self.session(key);
        let _ =
            addr.send(session_actor::RecordUndelivered { content: content.to_owned(), error: error.to_owned() }).await;
    }

    /// Answers the last message of `key` if a crash left it unanswered
    /// ([`TurnReply::AlreadyAnswered`] when there is none).
    pub async fn resume(&self, key: &str, events: UnboundedSender<TurnEvent>) -> Result<TurnReply, AgentError> {
        let (addr, _) = self.session(key);
        addr.send(UserTurn { text: String::new(), events, origin: None, persisted: None, resume: true })
            .await
            .map_err(|_| AgentError::Gone)?
    }

    /// Stops the running turn of `key` (Ctrl-C in the CLI); returns whether one was running.
    pub fn stop(&self, key: &str) -> bool {
        self.session(key).1.stop()
    }

    fn session(&self, key: &str) -> (Addr<SessionActor>, Arc<TurnControl>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((addr, control)) = sessions.get(key) {
            if addr.connected() {
                return (addr.clone(), control.clone());
            }
        }
        let control = Arc::new(TurnControl::default());
        let addr = SessionActor::new(key.to_owned(), self.agent.clone(), self.memory.clone(), control.clone()).start();
        sessions.insert(key.to_owned(), (addr.clone(), control.clone()));
        (addr, control)
    }
}

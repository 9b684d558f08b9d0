//! `SessionActor`: owns one session (`channel:chat_id`): serialises its turns, persists every
//! message before moving on, answers slash commands, and leaves memory when idle.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix::prelude::*;
use oxibot_proto::CallContext;
use tokio::sync::mpsc::UnboundedSender;

use super::commands::{self, Command};
use super::hooks::{CompositeHook, StripThinking, UsageHook, UsageTotals};
use super::runner::TurnEvent;
use super::runner_actor::{RunTurn, RunnerActor, TurnFailure};
use super::{Agent, AgentError, TurnControl, TurnReply};
use crate::context::ContextBuilder;
use crate::memory::MemoryActors;
use crate::memory::consolidator::{Budget, catch_up};
use crate::memory::consolidator_actor::{Consolidate, Scope};
use crate::memory::tokens::TokenLedger;
use crate::message::{ChatMessage, Role};
use crate::session::{Session, close_interrupted_turn};

/// An idle session leaves memory after this long (it is loaded again on its next message).
const IDLE_EVICTION: Duration = Duration::from_secs(15 * 60);
/// Most history messages replayed to the model (older ones wait for consolidation).
const MAX_REPLAYED_MESSAGES: usize = 500;

/// One session's actor.
pub struct SessionActor {
    /// `channel:chat_id`.
    key: String,
    /// Kernel services.
    agent: Arc<Agent>,
    /// The loaded session; shared with the running turn's checkpoint closure.
    session: Arc<Mutex<Option<Session>>>,
    /// Token usage of this session.
    usage: Arc<Mutex<UsageTotals>>,
    /// Cached token counts of the session's messages, for the consolidator.
    ledger: Arc<Mutex<TokenLedger>>,
    /// Consolidator, Dream and git.
    memory: MemoryActors,
    /// Lets `/stop` reach the running turn without waiting in this actor's mailbox.
    control: Arc<TurnControl>,
    /// When the last turn ended (for idle eviction).
    last_active: Instant,
}

impl SessionActor {
    /// An actor for `key`; the session file is loaded on the first message.
    pub fn new(key: String, agent: Arc<Agent>, memory: MemoryActors, control: Arc<TurnControl>) -> SessionActor {
        SessionActor {
            key,
            agent,
            session: Arc::default(),
            usage: Arc::default(),
            ledger: Arc::default(),
            memory,
            control,
            last_active: Instant::now(),
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(Duration::from_secs(60), |actor, ctx| {
            if actor.last_active.elapsed() > IDLE_EVICTION && !actor.control.is_running() {
                tracing::debug!(session = %actor.key, "evicting idle session");
                ctx.stop();
            }
        });
    }
}

/// A message from the user (text or a slash command).
#[derive(Message)]
#[rtype(result = "Result<TurnReply, AgentError>")]
pub struct UserTurn {
    /// What the user wrote.
    pub text: String,
    /// Progress of the turn.
    pub events: UnboundedSender<TurnEvent>,
    /// Where the message came from, for messages from a chat channel.
    pub origin: Option<ChannelOrigin>,
    /// Told once the message is on disk (a channel acknowledges it to its service then).
    pub persisted: Option<tokio::sync::oneshot::Sender<()>>,
    /// No new message: answer the session's last message if a crash left it unanswered.
    pub resume: bool,
}

/// Note in the session's metadata (`undelivered`) that a reply never reached its chat.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RecordUndelivered {
    /// The reply (shortened).
    pub content: String,
    /// Why the channel could not deliver it.
    pub error: String,
}

impl Handler<RecordUndelivered> for SessionActor {
    type Result = ();

    fn handle(&mut self, note: RecordUndelivered, _: &mut Context<Self>) {
        let mut guard = lock(&self.session);
        let session = match guard.as_mut() {
            Some(session) => session,
            None => match self.agent.store.load(&self.key) {
                Ok(loaded) => guard.insert(loaded.session),
                Err(error) => return tracing::warn!(session = %self.key, %error, "cannot record an undelivered reply"),
            },
        };
        let entry = serde_json::json!({"at": crate::session::now_timestamp(), "error": note.error, "content": note.content.chars().take(500).collect::<String>()});
        match session.metadata.entry("undelivered").or_insert_with(|| serde_json::Value::Array(Vec::new())) {
            serde_json::Value::Array(list) => list.push(entry),
            other => *other = serde_json::Value::Array(vec![entry]),
        }
        if let Err(error) = self.agent.store.save_metadata(session) {
            tracing::warn!(session = %self.key, %error, "cannot record an undelivered reply");
        }
    }
}

/// The channel message a turn answers: its id (stored with the user's message, so a
/// redelivered message is recognised) and the channel's details for the reply.
#[derive(Debug, Clone, Default)]
pub struct ChannelOrigin {
    /// The channel's id for the message.
    pub inbound_id: String,
    /// Channel details (message to reply to, thread, …), kept for the reply.
    pub metadata: serde_json::Value,
}

/// Key under which a user message stores the id of the channel message it came from.
pub const INBOUND_ID_KEY: &str = "inbound_id";
/// Key under which a user message stores its channel details.
pub const CHANNEL_METADATA_KEY: &str = "channel_metadata";
/// How far back a redelivered channel message is looked for.
const REDELIVERY_WINDOW: usize = 50;

impl Handler<UserTurn> for SessionActor {
    // Atomic: the next message of this session waits until this turn is done.
    type Result = AtomicResponse<Self, Result<TurnReply, AgentError>>;

    fn handle(&mut self, turn: UserTurn, _ctx: &mut Context<Self>) -> Self::Result {
        let job = TurnJob {
            key: self.key.clone(),
            agent: self.agent.clone(),
            session: self.session.clone(),
            usage: self.usage.clone(),
            ledger: self.ledger.clone(),
            memory: self.memory.clone(),
            control: self.control.clone(),
        };
        AtomicResponse::new(Box::pin(job.run(turn).into_actor(self).map(|reply, actor, _| {
            actor.last_active = Instant::now();
            reply
        })))
    }
}

/// One message's handling, moved into the actor's future.
struct TurnJob {
    key: String,
    agent: Arc<Agent>,
    session: Arc<Mutex<Option<Session>>>,
    usage: Arc<Mutex<UsageTotals>>,
    ledger: Arc<Mutex<TokenLedger>>,
    memory: MemoryActors,
    control: Arc<TurnControl>,
}

impl TurnJob {
    async fn run(self, mut turn: UserTurn) -> Result<TurnReply, AgentError> {
        self.ensure_loaded()?;
        let seen = turn.origin.as_ref().and_then(|o| self.find_inbound(&o.inbound_id));
        match seen {
            Some(Seen::Answered) => {
                notify(&mut turn.persisted);
                return Ok(TurnReply::AlreadyAnswered);
            }
            // Persisted before a crash but never answered: answer it now.
            Some(Seen::Pending) => notify(&mut turn.persisted),
            None if turn.resume => {
                return if self.ends_with_user_message() {
                    self.answer(turn).await
                } else {
                    Ok(TurnReply::AlreadyAnswered)
                };
            }
            None => {
                self.close_unanswered()?;
                if let Some(command) = Command::parse(&turn.text) {
                    notify(&mut turn.persisted);
                    return self.command(command).await;
                }
                let mut user = ChatMessage::text(Role::User, turn.text.clone());
                if let Some(origin) = &turn.origin {
                    user.extra.insert(INBOUND_ID_KEY.to_owned(), serde_json::Value::String(origin.inbound_id.clone()));
                    user.extra.insert(CHANNEL_METADATA_KEY.to_owned(), origin.metadata.clone());
                }
                // The user's words reach the disk before the model sees them.
                self.append(vec![user])?;
                notify(&mut turn.persisted);
            }
        }
        self.answer(turn).await
    }

    /// Runs the model on the session, whose last message is the user's.
    async fn answer(self, turn: UserTurn) -> Result<TurnReply, AgentError> {
        let (channel, _) = split_key(&self.key);
        let mut system = lock(&self.agent.context).system_prompt(channel);
        let fixed = self.fixed_prompt(&system);
        if self.near_budget(&fixed) && self.consolidate(Scope::OverBudget, fixed.clone()).await {
            // Built again: the archive just written shows up under `# Recent History`.
            system = lock(&self.agent.context).system_prompt(channel);
        }
        let messages = self.request_messages(system);
        let runner = RunnerActor::new(self.agent.clone()).start();
        self.control.set_runner(Some(runner.clone()));
        let outcome = runner.send(self.run_turn(messages, turn.events)).await;
        self.control.set_runner(None);
        match outcome.unwrap_or(Err(TurnFailure::Lost)) {
            Ok(outcome) => {
                // In the background: the reply is not held up, and the next turn of this
                // session waits in the consolidator if it arrives before this is done.
                if self.agent.background_consolidation && self.near_budget(&fixed) {
                    self.memory.consolidator.do_send(self.consolidate_request(Scope::OverBudget, fixed));
                }
                Ok(TurnReply::Answer(outcome.content))
            }
            Err(TurnFailure::Stopped) => {
                self.close_turn(Some("(Stopped before finishing.)"))?;
                Ok(TurnReply::Stopped)
            }
            Err(failure) => {
                let message = failure.to_string();
                self.close_turn(Some(&format!("Error: {message}")))?;
                Err(AgentError::Turn(message))
            }
        }
    }

    fn run_turn(&self, messages: Vec<ChatMessage>, events: UnboundedSender<TurnEvent>) -> RunTurn {
        let (channel, chat_id) = split_key(&self.key);
        let call_context = CallContext {
            session_key: Some(self.key.clone()),
            channel: Some(channel.to_owned()),
            chat_id: Some(chat_id.to_owned()),
            workspace: self.agent.workspace.display().to_string(),
            restrict_to_workspace: self.agent.config.tools.restrict_to_workspace,
        };
        let hooks = CompositeHook::new(vec![Box::new(UsageHook::new(self.usage.clone())), Box::new(StripThinking)]);
        let store = Arc::clone(&self.agent.store);
        let session = self.session.clone();
        let checkpoint = Box::new(move |messages: Vec<ChatMessage>| {
            let mut guard = session.lock().unwrap_or_else(PoisonError::into_inner);
            let session = guard.as_mut().ok_or_else(|| "session not loaded".to_owned())?;
            store.append(session, messages).map_err(|e| e.to_string())
        });
        RunTurn { messages, call_context, hooks, events, checkpoint }
    }

    /// Archives old messages when the prompt has grown to its budget (`Scope::OverBudget`),
    /// or all of them (`Scope::Everything`). Failures are logged: the turn goes on, and the
    /// request is still fitted to the context window by the runner.
    /// Returns whether anything was archived.
    async fn consolidate(&self, scope: Scope, fixed: Arc<str>) -> bool {
        match self.memory.consolidator.send(self.consolidate_request(scope, fixed)).await {
            Ok(Ok(report)) if report.rounds > 0 => {
                tracing::info!(session = %self.key, rounds = report.rounds, messages = report.messages, "archived old messages");
                true
            }
            Ok(Ok(_)) => false,
            Ok(Err(error)) => {
                tracing::warn!(session = %self.key, %error, "consolidation failed");
                false
            }
            Err(error) => {
                tracing::warn!(session = %self.key, %error, "the consolidator is gone");
                false
            }
        }
    }

    fn consolidate_request(&self, scope: Scope, fixed_prompt: Arc<str>) -> Consolidate {
        Consolidate {
            key: self.key.clone(),
            session: self.session.clone(),
            ledger: self.ledger.clone(),
            fixed_prompt,
            scope,
        }
    }

    /// The prompt around the messages: system prompt and tool definitions.
    fn fixed_prompt(&self, system: &str) -> Arc<str> {
        let tools = self.agent.host.tools_json();
        format!("{system}\n{tools}").into()
    }

    /// Whether the session's prompt may have reached its budget: the ledger's cheap bound
    /// answers for almost every turn, so the consolidator is asked only when it could act.
    fn near_budget(&self, fixed: &str) -> bool {
        let defaults = &self.agent.config.agents.defaults;
        let limit = Budget::new(defaults.context_window_tokens, defaults.max_tokens).limit;
        let guard = lock(&self.session);
        let Some(session) = guard.as_ref() else { return false };
        let mut ledger = lock(&self.ledger);
        ledger.sync(&session.messages);
        ledger.estimate(&session.messages, session.last_consolidated, fixed, limit).tokens >= limit
    }

    /// System prompt, replayed history, and the user's message with the runtime context.
    fn request_messages(&self, system: String) -> Vec<ChatMessage> {
        let (channel, chat_id) = split_key(&self.key);
        let guard = lock(&self.session);
        let Some(session) = guard.as_ref() else { return Vec::new() };
        let history = replayable(session);
        let mut messages = Vec::with_capacity(history.len() + 1);
        messages.push(ChatMessage::text(Role::System, system));
        messages.extend(history.iter().cloned());
        if let Some(last) = messages.last_mut().filter(|m| m.role == Role::User) {
            let runtime = ContextBuilder::runtime_context(
                channel,
                chat_id,
                self.agent.config.agents.defaults.timezone.as_deref(),
                chrono::Utc::now(),
            );
            last.content = serde_json::Value::String(ContextBuilder::merge_runtime(&last.text_content(), &runtime));
        }
        messages
    }

    /// Loads the session on first use, closing dangling tool calls a crash left behind. A
    /// last user message left unanswered is kept as it is: it may be answered now (see
    /// [`TurnJob::close_unanswered`]).
    fn ensure_loaded(&self) -> Result<(), AgentError> {
        let mut guard = lock(&self.session);
        if guard.is_some() {
            return Ok(());
        }
        let loaded = self.agent.store.load(&self.key).map_err(|e| AgentError::Session(e.to_string()))?;
        let mut session = loaded.session;
        self.mark_archived(&mut session)?;
        let closing: Vec<ChatMessage> =
            close_interrupted_turn(&session).into_iter().filter(|m| m.role == Role::Tool).collect();
        if !closing.is_empty() {
            tracing::warn!(session = %self.key, messages = closing.len(), "closing a turn interrupted by a previous crash");
            self.agent.store.append(&mut session, closing).map_err(|e| AgentError::Session(e.to_string()))?;
        }
        *guard = Some(session);
        Ok(())
    }

    /// Before a new message: a turn a crash left without any answer gets the "interrupted"
    /// reply, so the history alternates as providers require.
    fn close_unanswered(&self) -> Result<(), AgentError> {
        let closing = {
            let guard = lock(&self.session);
            guard.as_ref().map(close_interrupted_turn).unwrap_or_default()
        };
        if closing.is_empty() {
            return Ok(());
        }
        tracing::warn!(session = %self.key, "closing a turn interrupted by a previous crash");
        self.append(closing)
    }

    fn ends_with_user_message(&self) -> bool {
        lock(&self.session).as_ref().and_then(|s| s.messages.last()).is_some_and(|m| m.role == Role::User)
    }

    /// Whether a channel message with `inbound_id` is already in the session's recent
    /// messages, and whether it was answered.
    fn find_inbound(&self, inbound_id: &str) -> Option<Seen> {
        let guard = lock(&self.session);
        let messages = &guard.as_ref()?.messages;
        let recent = &messages[messages.len().saturating_sub(REDELIVERY_WINDOW)..];
        let at = recent.iter().rposition(|m| {
            m.role == Role::User && m.extra.get(INBOUND_ID_KEY).and_then(serde_json::Value::as_str) == Some(inbound_id)
        })?;
        Some(if at + 1 == recent.len() { Seen::Pending } else { Seen::Answered })
    }

    /// A kill between archiving a slice and saving the session leaves the history ahead of
    /// the session: catch up instead of archiving the slice again.
    fn mark_archived(&self, session: &mut Session) -> Result<(), AgentError> {
        catch_up(session, &self.agent.history, &self.agent.store)
            .map(|_| ())
            .map_err(|e| AgentError::Session(e.to_string()))
    }

    fn append(&self, messages: Vec<ChatMessage>) -> Result<(), AgentError> {
        let mut guard = lock(&self.session);
        let session = guard.as_mut().ok_or_else(|| AgentError::Session("session not loaded".into()))?;
        self.agent.store.append(session, messages).map_err(|e| AgentError::Session(e.to_string()))
    }

    /// After a stop or failure: answer dangling tool calls, then add `note` as the answer.
    fn close_turn(&self, note: Option<&str>) -> Result<(), AgentError> {
        let closing = {
            let guard = lock(&self.session);
            guard.as_ref().map(close_interrupted_turn).unwrap_or_default()
        };
        let mut messages: Vec<ChatMessage> = closing.into_iter().filter(|m| m.role == Role::Tool).collect();
        if let Some(note) = note {
            messages.push(ChatMessage::text(Role::Assistant, note));
        }
        self.append(messages)
    }

    async fn command(&self, command: Command) -> Result<TurnReply, AgentError> {
        if command == Command::New {
            let (channel, _) = split_key(&self.key);
            let system = lock(&self.agent.context).system_prompt(channel);
            self.consolidate(Scope::Everything, self.fixed_prompt(&system)).await;
        }
        if let Some(reply) = commands::run_memory(&command, &self.memory).await {
            return Ok(TurnReply::Command(reply));
        }
        let mut guard = lock(&self.session);
        let session = guard.as_mut().ok_or_else(|| AgentError::Session("session not loaded".into()))?;
        let usage = *lock(&self.usage);
        let reply = commands::run(&command, session, &self.agent, usage)?;
        Ok(TurnReply::Command(reply))
    }
}

/// A redelivered channel message, as found in the session.
enum Seen {
    /// Stored and answered: nothing to do.
    Answered,
    /// Stored as the last message, never answered.
    Pending,
}

fn notify(persisted: &mut Option<tokio::sync::oneshot::Sender<()>>) {
    if let Some(persisted) = persisted.take() {
        let _ = persisted.send(());
    }
}

/// The messages replayed to the model: those not yet consolidated, at most
/// [`MAX_REPLAYED_MESSAGES`], starting at a user message so no tool result is orphaned.
fn replayable(session: &Session) -> &[ChatMessage] {
    let start = session.last_consolidated.min(session.messages.len());
    let pending = &session.messages[start..];
    let mut from = pending.len().saturating_sub(MAX_REPLAYED_MESSAGES);
    while from < pending.len() && pending[from].role != Role::User {
        from += 1;
    }
    &pending[from..]
}

/// `telegram:123` → (`telegram`, `123`); a key without `:` is its own channel and chat.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once(':').unwrap_or((key, key))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

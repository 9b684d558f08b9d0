//! `SessionActor`: owns one session (`channel:chat_id`): serialises its turns, persists every
//! message before moving on, answers slash commands, and leaves memory when idle. Its
//! [`Inbox`] takes messages to the session file while a turn runs; a turn answers an inbox
//! entry, goes on with one a restart interrupted (settling its open tool calls through the
//! turn journal), and records how it ended.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix::prelude::*;
use oxibot_proto::CallContext;
use tokio::sync::mpsc::UnboundedSender;

use super::commands::{self, Command};
use super::oversize;
use super::undelivered;
use super::{AgentError, TurnControl, TurnFailure, TurnReply};
use crate::budget::{self, Breach};
use crate::context::ContextBuilder;
use crate::memory::MemoryActors;
use crate::memory::consolidator::{Budget, catch_up};
use crate::memory::consolidator_actor::{Consolidate, Scope};
use crate::memory::flush::write_session_flush;
use crate::memory::recall::auto::recall_for_message;
use crate::memory::tokens::TokenLedger;
use crate::message::ToolCall;
use crate::message::{ChatMessage, Role};
use crate::meter::Meter;
use crate::services::Services;
use crate::session::journal::{self, CallRecord, CallState, INBOX_ID_KEY, InboxRecord, OPEN_INBOX_KEY, TurnProgress};
use crate::session::ownership::Owned;
use crate::session::{InboxState, PendingMessage, Record, Session, SessionKey, close_interrupted_turn};
use crate::turn::TurnInput;
use crate::turn::builtin::{BuiltinContext, TurnSource};
use crate::turn::hooks::{CompositeHook, PartialReply, StripThinking, UsageHook, UsageTotals, strip_think_blocks};
use crate::turn::runner::{CheckpointError, Journal, OpenCall, TurnEvent, TurnOutcome};
use crate::usage::{USER_SOURCE, UsageEntry, UsageStore};

/// An idle session leaves memory after this long (it is loaded again on its next message).
const IDLE_EVICTION: Duration = Duration::from_secs(15 * 60);
/// Most history messages replayed to the model (older ones wait for consolidation).
const MAX_REPLAYED_MESSAGES: usize = 500;
/// Recent messages auto-recall checks so it does not repeat what the conversation says.
const RECALL_DEDUP_MESSAGES: usize = 20;

/// How a stopped turn's answer ends.
const STOPPED_NOTE: &str = "(Stopped before finishing.)";

/// One session's actor.
pub struct SessionActor {
    /// What each message's handling works with (a clone moves into its future).
    parts: TurnJob,
    /// When the last turn ended (for idle eviction).
    last_active: Instant,
}

impl SessionActor {
    /// The session's inbox, which takes messages while the actor is busy with a turn.
    pub fn inbox(&self) -> Inbox {
        Inbox { job: self.parts.clone() }
    }

    /// An actor for `key`; the session file is loaded on the first message.
    pub fn new(
        key: SessionKey,
        services: Arc<Services>,
        memory: MemoryActors,
        control: Arc<TurnControl>,
    ) -> SessionActor {
        let parts = TurnJob {
            key,
            services,
            session: Arc::default(),
            usage: Arc::default(),
            partial: Arc::default(),
            ledger: Arc::default(),
            memory,
            control,
            cron_job: None,
            model: None,
        };
        SessionActor { parts, last_active: Instant::now() }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(Duration::from_secs(60), |actor, ctx| {
            if actor.last_active.elapsed() > IDLE_EVICTION && !actor.parts.control.is_running() {
                tracing::debug!(session = %actor.parts.key, "evicting idle session");
                ctx.stop();
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // In a cluster, another kernel may take the session at once.
        if let Some(ownership) = self.parts.services.ownership() {
            ownership.release(self.parts.key.as_str());
        }
    }
}

/// What the session manager asks of a session: answer a message its inbox holds, run a
/// slash command, or answer a last message an older version left unanswered. Progress of
/// the turn goes to `events`.
#[derive(Message)]
#[rtype(result = "Result<TurnReply, AgentError>")]
pub enum UserTurn {
    /// Answer inbox entry `id` (accepted through [`Inbox::accept`]) unless it is answered.
    Answer {
        /// The entry.
        id: String,
        /// The cron job that wrote it, whose id the usage log records.
        cron_job: Option<String>,
        /// The model its source uses instead of the configured one (heartbeat, cron job).
        model: Option<String>,
        /// Progress of the turn.
        events: UnboundedSender<TurnEvent>,
    },
    /// Run a slash command (after the session's current turn).
    Command {
        /// The command.
        command: Command,
    },
    /// No inbox entry: answer the session's last message if a crash left it unanswered (a
    /// session file written before the inbox existed).
    Resume {
        /// Progress of the turn.
        events: UnboundedSender<TurnEvent>,
    },
}

/// Key under which a message the kernel wrote into a session records why (`cron`,
/// `heartbeat`, `system`); the user's own messages have none.
pub const SOURCE_KEY: &str = "source";

/// Note in the session's metadata (`undelivered`) that a reply never reached its chat; the
/// session's next turn tells the model.
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
        let at = crate::session::now_timestamp();
        let saved = self.parts.with_session(|session, store| {
            undelivered::note(&mut session.metadata, &at, &note.content, &note.error);
            store.save_metadata(session).map_err(AgentError::Session)
        });
        if let Err(error) = saved {
            tracing::warn!(session = %self.parts.key, %error, "cannot record an undelivered reply");
        }
    }
}

/// Append a message the assistant sent to this session's chat from another session (the
/// `message` tool), so this session's conversation shows it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RecordSent {
    /// What was sent.
    pub content: String,
}

impl Handler<RecordSent> for SessionActor {
    type Result = ();

    fn handle(&mut self, sent: RecordSent, _: &mut Context<Self>) {
        let mut message = ChatMessage::text(Role::Assistant, sent.content);
        message.extra.insert(SOURCE_KEY.to_owned(), serde_json::Value::String("message".to_owned()));
        let saved =
            self.parts.with_session(|session, store| store.append(session, vec![message]).map_err(AgentError::Session));
        if let Err(error) = saved {
            tracing::warn!(session = %self.parts.key, %error, "cannot record a message sent to this chat");
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
    /// Who wrote the message, kept so a resumed turn still knows who approves its calls.
    pub sender_id: String,
}

pub use crate::session::journal::INBOUND_ID_KEY;
/// Key under which a user message stores its channel details.
pub const CHANNEL_METADATA_KEY: &str = "channel_metadata";
/// The reason recorded for a message `/stop` closed before its turn started.
const STOPPED_WAITING: &str = "stopped with /stop before its turn";
/// How far back a redelivered channel message stored before the inbox existed is looked for.
const REDELIVERY_WINDOW: usize = 50;

impl Handler<UserTurn> for SessionActor {
    // Atomic: the next message of this session waits until this turn is done.
    type Result = AtomicResponse<Self, Result<TurnReply, AgentError>>;

    fn handle(&mut self, turn: UserTurn, _ctx: &mut Context<Self>) -> Self::Result {
        AtomicResponse::new(Box::pin(self.parts.clone().run(turn).into_actor(self).map(|reply, actor, _| {
            actor.last_active = Instant::now();
            reply
        })))
    }
}

/// What one message's handling works with; the actor keeps one and moves a clone into each
/// message's future.
#[derive(Clone)]
struct TurnJob {
    /// `channel:chat_id`.
    key: SessionKey,
    /// Kernel services.
    services: Arc<Services>,
    /// The loaded session; shared with the running turn's checkpoint closure.
    session: Arc<Mutex<Option<Session>>>,
    /// Token usage of this session.
    usage: Arc<Mutex<UsageTotals>>,
    /// The running turn's reply as streamed so far, kept when the turn is stopped.
    partial: Arc<Mutex<String>>,
    /// Cached token counts of the session's messages, for the consolidator.
    ledger: Arc<Mutex<TokenLedger>>,
    /// Consolidator, Dream and git.
    memory: MemoryActors,
    /// Lets `/stop` reach the running turn without waiting in this actor's mailbox.
    control: Arc<TurnControl>,
    /// The cron job whose message this job answers (set per message, never shared).
    cron_job: Option<String>,
    /// The model its source asks for instead of the configured one (set per message).
    model: Option<String>,
}

impl TurnJob {
    /// Runs `change` on the session, loading it first when no turn has yet.
    fn with_session(
        &self,
        change: impl FnOnce(&mut Session, &dyn crate::session::SessionStorage) -> Result<(), AgentError>,
    ) -> Result<(), AgentError> {
        self.ensure_loaded()?;
        let mut guard = lock(&self.session);
        let session = guard.as_mut().ok_or(AgentError::NotLoaded)?;
        change(session, self.services.sessions().as_ref())
    }

    /// In a cluster, waits until this kernel owns the session (see [`SessionOwnership`]);
    /// a session taken anew is read again, since another kernel may have written it. On a
    /// single host, at once.
    ///
    /// [`SessionOwnership`]: crate::session::ownership::SessionOwnership
    async fn own(&self) -> Result<(), AgentError> {
        let Some(ownership) = self.services.ownership() else { return Ok(()) };
        let owned = ownership.acquire(self.key.as_str()).await.map_err(AgentError::Session)?;
        if owned == Owned::Taken {
            *lock(&self.session) = None;
        }
        Ok(())
    }

    async fn run(mut self, turn: UserTurn) -> Result<TurnReply, AgentError> {
        self.own().await?;
        self.ensure_loaded()?;
        match turn {
            UserTurn::Answer { id, cron_job, model, events } => {
                self.cron_job = cron_job;
                self.model = model;
                self.answer_entry(&id, events).await
            }
            UserTurn::Command { command } => self.command(command).await,
            UserTurn::Resume { events } if self.ends_with_user_message() => {
                self.answer(events, TurnSource::User, None).await
            }
            UserTurn::Resume { .. } => Ok(TurnReply::AlreadyAnswered),
        }
    }

    /// Answers inbox entry `id`: starts its turn when it is only accepted, goes on with it
    /// when a restart interrupted it, and answers nothing when it is answered.
    async fn answer_entry(self, id: &str, events: UnboundedSender<TurnEvent>) -> Result<TurnReply, AgentError> {
        let (state, pending) = {
            let guard = lock(&self.session);
            let session = guard.as_ref().ok_or(AgentError::NotLoaded)?;
            (session.inbox_state(id), session.pending_messages().into_iter().find(|p| p.id == id))
        };
        if self.control.take_stopped_waiting(id) {
            return Ok(TurnReply::Stopped);
        }
        let (Some(state), Some(pending)) = (state, pending) else { return Ok(TurnReply::AlreadyAnswered) };
        let source = source_of(pending.source.as_deref());
        // Its user message in the history means the turn started, whatever the records say.
        let started = lock(&self.session).as_ref().is_some_and(|s| s.turn_start(id).is_some());
        if state == InboxState::Accepted && !started {
            if !self.start_turn(&pending)? {
                // `/stop` closed it between the look above and the start.
                self.control.take_stopped_waiting(id);
                return Ok(TurnReply::Stopped);
            }
            return self.answer(events, source, Some(id)).await;
        }
        let progress = {
            let guard = lock(&self.session);
            let session = guard.as_ref().ok_or(AgentError::NotLoaded)?;
            match session.turn_start(id) {
                Some(start) => journal::progress(&session.messages, start),
                None => TurnProgress::AskModel,
            }
        };
        tracing::info!(session = %self.key, turn = %id, "going on with a turn a restart interrupted");
        match progress {
            TurnProgress::Answered => {
                let text = lock(&self.session)
                    .as_ref()
                    .and_then(|s| s.messages.last().map(ChatMessage::text_content))
                    .unwrap_or_default();
                self.close_entry(id, InboxState::Answered, None);
                Ok(TurnReply::Answer(text, crate::provider::Usage::default()))
            }
            TurnProgress::AskModel | TurnProgress::OpenCalls(_) => self.answer(events, source, Some(id)).await,
        }
    }

    /// The start of message `pending`'s turn: its user message (marked with its inbox id)
    /// and its `in_turn` record, in one write. `false` (nothing written) when the entry is no
    /// longer waiting: `/stop` closed it.
    fn start_turn(&self, pending: &PendingMessage) -> Result<bool, AgentError> {
        let stale: Vec<String> = lock(&self.session)
            .as_ref()
            .map(|s| s.pending_messages().into_iter().filter(|p| p.state == InboxState::InTurn).map(|p| p.id).collect())
            .unwrap_or_default();
        self.close_unanswered()?;
        for id in stale {
            self.close_entry(&id, InboxState::Failed, Some("interrupted by a restart".to_owned()));
        }
        let mut user = ChatMessage::text(Role::User, pending.text.clone());
        if let Some(name) = &pending.source {
            user.extra.insert(SOURCE_KEY.to_owned(), serde_json::Value::String(name.clone()));
        }
        if let Some(inbound_id) = &pending.inbound_id {
            user.extra.insert(INBOUND_ID_KEY.to_owned(), serde_json::Value::String(inbound_id.clone()));
            user.extra.insert(CHANNEL_METADATA_KEY.to_owned(), pending.channel_metadata.clone());
        }
        user.extra.insert(INBOX_ID_KEY.to_owned(), serde_json::Value::String(pending.id.clone()));
        let record = Record::Inbox(InboxRecord::state(&pending.id, InboxState::InTurn));
        let mut guard = lock(&self.session);
        let session = guard.as_mut().ok_or(AgentError::NotLoaded)?;
        if session.inbox_state(&pending.id) != Some(InboxState::Accepted) {
            return Ok(false);
        }
        self.services.sessions().append_with_records(session, vec![user], vec![record]).map_err(AgentError::Session)?;
        Ok(true)
    }

    /// Writes the end of entry `id` (answered, or failed with `reason`), and clears the
    /// session's open-inbox mark when nothing else waits. A failure to write is logged: the
    /// next start finds the answer in the history.
    fn close_entry(&self, id: &str, state: InboxState, reason: Option<String>) {
        let mut record = InboxRecord::state(id, state);
        record.reason = reason;
        let saved = self.with_session(|session, store| {
            store.append_with_records(session, Vec::new(), vec![Record::Inbox(record)]).map_err(AgentError::Session)?;
            session.compact_records();
            if session.pending_messages().is_empty() && session.metadata.remove(OPEN_INBOX_KEY).is_some() {
                store.save_metadata(session).map_err(AgentError::Session)?;
            }
            Ok(())
        });
        if let Err(error) = saved {
            tracing::warn!(session = %self.key, turn = %id, %error, "cannot record the end of a turn");
        }
    }

    /// Runs the model on the session, whose last message is the user's.
    /// `id` is the inbox entry the turn answers (`None` for a session file older than the
    /// inbox); its end is recorded.
    async fn answer(
        self,
        events: UnboundedSender<TurnEvent>,
        source: TurnSource,
        id: Option<&str>,
    ) -> Result<TurnReply, AgentError> {
        let reply = self.answer_turn(events, source, id).await;
        if let Some(id) = id {
            match &reply {
                Ok(TurnReply::Stopped) => self.close_entry(id, InboxState::Failed, Some("stopped".to_owned())),
                Ok(_) => self.close_entry(id, InboxState::Answered, None),
                Err(error) => self.close_entry(id, InboxState::Failed, Some(error.to_string())),
            }
        }
        reply
    }

    async fn answer_turn(
        &self,
        events: UnboundedSender<TurnEvent>,
        source: TurnSource,
        id: Option<&str>,
    ) -> Result<TurnReply, AgentError> {
        if let Some(breach) = self.over_budget(source) {
            return self.refuse_over_budget(&breach, source);
        }
        let channel = self.key.channel();
        let mut system = self.services.system_prompt(channel);
        let fixed = self.fixed_prompt(&system);
        if self.near_budget(&fixed) && self.consolidate(Scope::OverBudget, fixed.clone()).await {
            // Built again after the archive was written (its `# Recent History` goes into the
            // runtime block).
            system = self.services.system_prompt(channel);
        }
        let recalled = self.recalled(&system, source).await;
        let recalled = undelivered::with_notes(&self.take_undelivered_notes(), recalled);
        let messages = self.request_messages(system, recalled.as_deref());
        let started = Instant::now();
        let outcome = self.run_guarded(messages, events, source, &fixed, recalled.as_deref(), id).await;
        match outcome {
            Ok(outcome) => {
                self.record_usage(&outcome, source, started.elapsed());
                // In the background: the reply is not held up, and the next turn of this
                // session waits in the consolidator if it arrives before this is done.
                if self.services.background_consolidation() && self.near_budget(&fixed) {
                    self.memory.consolidator.do_send(self.consolidate_request(Scope::OverBudget, fixed));
                }
                Ok(TurnReply::Answer(outcome.content, outcome.usage))
            }
            Err(TurnFailure::Stopped) => {
                self.close_turn(Some(&self.stopped_note()))?;
                Ok(TurnReply::Stopped)
            }
            Err(failure) if failure.is_overflow() => {
                let error = AgentError::ContextOverflow(failure);
                self.close_turn(Some(&format!("Error: {error}")))?;
                Err(error)
            }
            Err(failure) => {
                self.close_turn(Some(&format!("Error: {failure}")))?;
                Err(AgentError::Turn(failure))
            }
        }
    }

    /// Runs the turn under the overflow guard's later stages: the runner already retried with
    /// long tool results cut; when the request still does not fit, the Consolidator archives
    /// older history and the turn goes on from the session (which holds everything the turn
    /// did so far). A second overflow is returned; the caller ends the turn with a clear note.
    async fn run_guarded(
        &self,
        messages: Vec<Arc<ChatMessage>>,
        events: UnboundedSender<TurnEvent>,
        source: TurnSource,
        fixed: &Arc<str>,
        recalled: Option<&str>,
        id: Option<&str>,
    ) -> Result<TurnOutcome, TurnFailure> {
        let outcome = self.run_once(messages, events.clone(), source, true, id).await;
        let estimated = match &outcome {
            Err(failure) if failure.is_overflow() => failure.is_estimated_overflow(),
            _ => return outcome,
        };
        tracing::warn!(session = %self.key, "the request does not fit the model's context window; archiving older history");
        // A provider's refusal is only worth another call when something was archived; an
        // estimate goes on either way, leaving out what still does not fit.
        if !self.consolidate(Scope::Overflow, fixed.clone()).await && !estimated {
            return outcome;
        }
        let system = self.services.system_prompt(self.key.channel());
        let messages = self.request_messages(system, recalled);
        self.run_once(messages, events, source, false, id).await
    }

    async fn run_once(
        &self,
        messages: Vec<Arc<ChatMessage>>,
        events: UnboundedSender<TurnEvent>,
        source: TurnSource,
        compact_first: bool,
        id: Option<&str>,
    ) -> Result<TurnOutcome, TurnFailure> {
        let mut turn = self.turn_input(messages, events, source, compact_first);
        turn.journal = id.map(|id| self.journal(id));
        self.control.run(self.services.engine().clone().run(turn)).await
    }

    /// The replies given up since the last turn, to tell the model (marked told on disk).
    fn take_undelivered_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let saved = self.with_session(|session, store| {
            notes = undelivered::take_unreported(&mut session.metadata);
            if notes.is_empty() { Ok(()) } else { store.save_metadata(session).map_err(AgentError::Session) }
        });
        if let Err(error) = saved {
            tracing::warn!(session = %self.key, %error, "cannot mark undelivered replies as told");
        }
        notes
    }

    /// Auto-recall: memory relevant to the user's last message and not already in the
    /// prompt, for the runtime block (`None` when off, trivial or nothing found).
    async fn recalled(&self, system: &str, source: TurnSource) -> Option<String> {
        let recall = self.memory.recall.as_ref().filter(|_| source == TurnSource::User)?;
        let (message, recent) = {
            let guard = lock(&self.session);
            let session = guard.as_ref()?;
            let history = replayable(session);
            let (last, earlier) = history.split_last().filter(|(last, _)| last.role == Role::User)?;
            let recent: Vec<String> =
                earlier.iter().rev().take(RECALL_DEDUP_MESSAGES).map(ChatMessage::text_content).collect();
            (ContextBuilder::strip_runtime(&last.text_content()), recent)
        };
        let history = self.services.recent_history().unwrap_or_default();
        let mut already: Vec<&str> = vec![system, &history];
        already.extend(recent.iter().map(String::as_str));
        recall_for_message(recall, &message, &already).await
    }

    fn turn_input(
        &self,
        messages: Vec<Arc<ChatMessage>>,
        events: UnboundedSender<TurnEvent>,
        source: TurnSource,
        compact_on_overflow: bool,
    ) -> TurnInput {
        let call_context = CallContext {
            session_key: Some(self.key.to_string()),
            channel: Some(self.key.channel().to_owned()),
            chat_id: Some(self.key.chat_id().to_owned()),
            workspace: self.services.workspace().display().to_string(),
            restrict_to_workspace: self.services.settings().config.tools.restrict_to_workspace,
            idempotency_key: None,
        };
        let meter = Meter::counting(&self.services.settings(), self.services.data_dir(), self.usage_template(source));
        // A turn that failed wrote no usage; its calls' times are not this turn's.
        lock(&self.usage).turn_call_ms.clear();
        let hooks = CompositeHook::new(vec![
            Box::new(meter),
            Box::new(UsageHook::new(self.usage.clone())),
            Box::new(PartialReply::new(self.partial.clone())),
            Box::new(StripThinking),
        ]);
        let store = Arc::clone(self.services.sessions());
        let session = self.session.clone();
        let checkpoint = Box::new(move |messages: Vec<ChatMessage>| {
            let mut guard = session.lock().unwrap_or_else(PoisonError::into_inner);
            let session = guard.as_mut().ok_or(CheckpointError::NotLoaded)?;
            Ok(store.append(session, messages)?)
        });
        let context = BuiltinContext { call: call_context, source, ..BuiltinContext::default() };
        let builtins = self.services.builtins();
        let session = self.key.to_string();
        let model = self.model.clone();
        TurnInput {
            messages,
            session,
            context,
            builtins,
            hooks,
            events,
            checkpoint,
            compact_on_overflow,
            model,
            journal: None,
        }
    }

    /// The journal of turn `id`: the steps it took and the calls a restart left open (from
    /// the session), and a `started` record written before each call is sent.
    fn journal(&self, id: &str) -> Journal {
        let (steps_done, open) = {
            let guard = lock(&self.session);
            guard.as_ref().map(|session| open_calls(session, id)).unwrap_or_default()
        };
        let store = Arc::clone(self.services.sessions());
        let session = self.session.clone();
        let turn = id.to_owned();
        let record_start = Box::new(move |key: &str, call: &ToolCall| {
            let mut guard = session.lock().unwrap_or_else(PoisonError::into_inner);
            let session = guard.as_mut().ok_or(CheckpointError::NotLoaded)?;
            let record = Record::Call(CallRecord {
                key: key.to_owned(),
                turn: turn.clone(),
                tool_call_id: call.id.clone(),
                state: CallState::Started,
            });
            Ok(store.append_with_records(session, Vec::new(), vec![record])?)
        });
        Journal { turn: id.to_owned(), steps_done, open, record_start }
    }

    /// The cap of `agents.defaults.budgets` this turn would go over, if any.
    fn over_budget(&self, source: TurnSource) -> Option<Breach> {
        let settings = self.services.settings();
        let budgets = match budget::budgets(settings.config.agents.defaults.extra.get("budgets")) {
            Ok(budgets) => budgets,
            Err(error) => {
                tracing::warn!(%error, "the budgets section is wrong; no cap is checked");
                return None;
            }
        };
        let source = source_name(source).unwrap_or(USER_SOURCE);
        let today = chrono::Utc::now().date_naive();
        budgets.breach(&self.services.usage(), &settings.prices_or_none(), today, source, self.cron_job.as_deref())
    }

    /// Answers without calling the model: the cap's message is the reply, stored in the
    /// session. A user sees it every time; a background turn's owner is told once per cap
    /// and period (later capped runs end quietly).
    fn refuse_over_budget(&self, breach: &Breach, source: TurnSource) -> Result<TurnReply, AgentError> {
        let message = breach.message();
        tracing::warn!(session = %self.key, scope = %breach.scope, setting = breach.setting, "over budget; the model is not called");
        self.close_turn(Some(&message))?;
        if source == TurnSource::User || breach.first_notice(self.services.data_dir()) {
            Ok(TurnReply::Answer(message, Default::default()))
        } else {
            Ok(TurnReply::AlreadyAnswered)
        }
    }

    /// What this session's turns of `source` are recorded as, before any tokens.
    fn usage_template(&self, source: TurnSource) -> UsageEntry {
        UsageEntry {
            session: self.key.to_string(),
            model: self.model.clone().unwrap_or_else(|| self.services.spec().model.clone()),
            source: Some(source_name(source).unwrap_or(USER_SOURCE).to_owned()),
            job: self.cron_job.clone(),
            ..UsageEntry::default()
        }
    }

    /// Adds the turn's token counts, what spent them and how long it took to the usage log
    /// (a failure to write is logged only).
    fn record_usage(&self, outcome: &TurnOutcome, source: TurnSource, took: Duration) {
        let now = chrono::Utc::now();
        let mut usage = lock(&self.usage);
        let entry = UsageEntry {
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            session: self.key.to_string(),
            model: self.model.clone().unwrap_or_else(|| self.services.spec().model.clone()),
            prompt: outcome.usage.prompt_tokens,
            cached: outcome.usage.cached_tokens,
            completion: outcome.usage.completion_tokens,
            reasoning: outcome.usage.reasoning_tokens,
            calls: u64::from(outcome.iterations),
            source: Some(source_name(source).unwrap_or(USER_SOURCE).to_owned()),
            job: self.cron_job.clone(),
            ms: Some(crate::usage::millis(took)),
            context: Some(usage.last_prompt_tokens),
            phase: None,
            call_ms: std::mem::take(&mut usage.turn_call_ms),
        };
        drop(usage);
        if let Err(error) = self.services.usage().record(&entry, now) {
            tracing::warn!(session = %self.key, %error, "cannot record token usage");
        }
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

    /// `text`, or when it is too long for the model, its beginning and where the whole text
    /// was saved in the workspace (see [`oversize`]).
    fn fit_for_the_model(&self, text: &str) -> String {
        let settings = self.services.settings();
        let defaults = &settings.config.agents.defaults;
        let limit = oversize::limit_bytes(defaults.context_window_tokens, defaults.max_tokens);
        let name = format!("message-{}.md", chrono::Utc::now().format("%Y%m%d-%H%M%S-%3f"));
        match oversize::shorten(self.services.workspace(), &name, text, limit) {
            Ok(Some(kept)) => {
                tracing::info!(session = %self.key, bytes = text.len(), file = %name, "a long message was saved to the workspace");
                kept
            }
            Ok(None) => text.to_owned(),
            Err(error) => {
                tracing::warn!(session = %self.key, %error, "cannot save a long message; it is kept whole");
                text.to_owned()
            }
        }
    }

    /// The prompt around the messages: system prompt and tool definitions.
    fn fixed_prompt(&self, system: &str) -> Arc<str> {
        let tools = self.services.host().tools_json();
        let builtins = self.services.builtins().specs_json();
        let history = self.services.recent_history().unwrap_or_default();
        let mut fixed = String::with_capacity(system.len() + tools.len() + builtins.len() + history.len() + 3);
        for (index, part) in [system, &tools, &builtins, history.as_str()].into_iter().enumerate() {
            if index > 0 {
                fixed.push('\n');
            }
            fixed.push_str(part);
        }
        fixed.into()
    }

    /// Whether the session's prompt may have reached its budget: the ledger's cheap bound
    /// answers for almost every turn, so the consolidator is asked only when it could act.
    fn near_budget(&self, fixed: &str) -> bool {
        let settings = self.services.settings();
        let defaults = &settings.config.agents.defaults;
        let limit = Budget::new(defaults.context_window_tokens, defaults.max_tokens).limit;
        let guard = lock(&self.session);
        let Some(session) = guard.as_ref() else { return false };
        let mut ledger = lock(&self.ledger);
        ledger.sync(&session.messages, session.offset, session.last_consolidated);
        ledger.may_reach(fixed, limit)
    }

    /// System prompt, replayed history, and the user's message with the runtime context (and
    /// the recent history and the memory auto-recall found, inside it). The history is the
    /// session's own request copies, shared (see [`Session::replay_from`]); only the message
    /// that gets the runtime context is copied again.
    fn request_messages(&self, system: String, recalled: Option<&str>) -> Vec<Arc<ChatMessage>> {
        let mut guard = lock(&self.session);
        let Some(session) = guard.as_mut() else { return Vec::new() };
        let history = session.replay_from(replay_start(session));
        let mut messages = Vec::with_capacity(history.len() + 1);
        messages.push(Arc::new(ChatMessage::text(Role::System, system)));
        messages.extend(history.iter().cloned());
        // The turn's user message: the last message, or, for a turn going on after its older
        // history was archived, the last user message before its tool calls (the archive's
        // summary reaches the model through its runtime block).
        if let Some(last) = messages.iter_mut().rev().find(|m| m.role == Role::User) {
            let runtime = ContextBuilder::runtime_context(
                self.key.channel(),
                self.key.chat_id(),
                self.services.timezone().as_deref(),
                chrono::Utc::now(),
            );
            // Recent history and recalled memory change between conversations: here, after the
            // tools, they leave the cached system prompt and tools as they were.
            let history = self.services.recent_history();
            let runtime = [history.as_deref(), recalled]
                .into_iter()
                .flatten()
                .fold(runtime, |runtime, lines| ContextBuilder::with_recalled(&runtime, lines));
            let merged = ContextBuilder::merge_runtime(&last.text_content(), &runtime);
            Arc::make_mut(last).content = serde_json::Value::String(merged);
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
        let loaded = self.services.sessions().load(self.key.as_str()).map_err(AgentError::Session)?;
        let mut session = loaded.session;
        self.mark_archived(&mut session)?;
        session.forget_archived();
        // A turn the inbox knows goes on where it stopped (see `answer_entry`); only a turn of
        // an older file is closed here.
        let in_turn = session.pending_messages().iter().any(|p| p.state == InboxState::InTurn);
        let closing: Vec<ChatMessage> = if in_turn {
            Vec::new()
        } else {
            close_interrupted_turn(&session).into_iter().filter(|m| m.role == Role::Tool).collect()
        };
        if !closing.is_empty() {
            tracing::warn!(session = %self.key, messages = closing.len(), "closing a turn interrupted by a previous crash");
            self.services.sessions().append(&mut session, closing).map_err(AgentError::Session)?;
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

    /// Whether a channel message with `inbound_id` is already in the session's history, and
    /// whether it was answered. Called after the open inbox records were asked, so a message
    /// that has an inbox id here is closed; one stored before the inbox existed is looked for
    /// among the recent messages and is pending when it is the last.
    fn find_inbound(&self, inbound_id: &str) -> Option<Seen> {
        let guard = lock(&self.session);
        let session = guard.as_ref()?;
        if !session.may_carry(INBOUND_ID_KEY, inbound_id) {
            return None;
        }
        let messages = &session.messages;
        let at = messages.iter().rposition(|m| {
            m.role == Role::User && m.extra.get(INBOUND_ID_KEY).and_then(serde_json::Value::as_str) == Some(inbound_id)
        })?;
        if messages[at].extra.contains_key(INBOX_ID_KEY) {
            return Some(Seen::Answered);
        }
        if at + REDELIVERY_WINDOW < messages.len() {
            return None;
        }
        Some(if at + 1 == messages.len() { Seen::Pending } else { Seen::Answered })
    }

    /// A kill between archiving a slice and saving the session leaves the history ahead of
    /// the session: catch up instead of archiving the slice again.
    fn mark_archived(&self, session: &mut Session) -> Result<(), AgentError> {
        catch_up(session, self.services.history(), self.services.sessions().as_ref())
            .map(|_| ())
            .map_err(AgentError::Archive)
    }

    fn append(&self, messages: Vec<ChatMessage>) -> Result<(), AgentError> {
        let mut guard = lock(&self.session);
        let session = guard.as_mut().ok_or(AgentError::NotLoaded)?;
        self.services.sessions().append(session, messages).map_err(AgentError::Session)
    }

    /// The answer a stopped turn leaves: what the person already saw of the reply, marked as
    /// stopped.
    fn stopped_note(&self) -> String {
        let partial = strip_think_blocks(&std::mem::take(&mut *lock(&self.partial)));
        if partial.is_empty() { STOPPED_NOTE.to_owned() } else { format!("{partial}\n\n{STOPPED_NOTE}") }
    }

    /// After a stop or failure: answer dangling tool calls, then add `note` as the answer.
    fn close_turn(&self, note: Option<&str>) -> Result<(), AgentError> {
        let closing = {
            let guard = lock(&self.session);
            guard.as_ref().map(close_interrupted_turn).unwrap_or_default()
        };
        let mut messages: Vec<ChatMessage> = closing.into_iter().filter(|m| m.role == Role::Tool).collect();
        if let Some(note) = note {
            messages.push(ChatMessage::text(Role::Assistant, note).from_kernel());
        }
        self.append(messages)
    }

    async fn command(&self, command: Command) -> Result<TurnReply, AgentError> {
        if command == Command::New {
            self.flush_session();
            let system = self.services.system_prompt(self.key.channel());
            self.consolidate(Scope::Everything, self.fixed_prompt(&system)).await;
        }
        if let Some(reply) = commands::run_memory(&command, &self.memory).await {
            return Ok(TurnReply::Command(reply));
        }
        let mut guard = lock(&self.session);
        let session = guard.as_mut().ok_or(AgentError::NotLoaded)?;
        let usage = lock(&self.usage).clone();
        let reply = commands::run(&command, session, &self.services, usage)?;
        Ok(TurnReply::Command(reply))
    }
}

impl TurnJob {
    /// `/new`: the conversation about to be archived goes to a dated memory file first.
    fn flush_session(&self) {
        let messages = {
            let guard = lock(&self.session);
            let Some(session) = guard.as_ref() else { return };
            session.unconsolidated().to_vec()
        };
        match write_session_flush(
            self.services.workspace(),
            self.key.as_str(),
            &messages,
            self.services.timezone().as_deref(),
        ) {
            Ok(Some(path)) => {
                tracing::info!(session = %self.key, %path, "saved the conversation to memory");
                if let Some(recall) = &self.memory.recall {
                    recall.request_sync();
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(session = %self.key, %error, "cannot save the conversation to memory"),
        }
    }
}

/// A redelivered channel message, as found in the session.
enum Seen {
    /// Stored and answered: nothing to do.
    Answered,
    /// Stored as the last message, never answered.
    Pending,
}

/// How a message the kernel wrote is marked in the session file.
fn source_name(source: TurnSource) -> Option<&'static str> {
    match source {
        TurnSource::User => None,
        TurnSource::Cron => Some("cron"),
        TurnSource::Heartbeat => Some("heartbeat"),
        TurnSource::Subagent => Some("subagent"),
        TurnSource::System => Some("system"),
    }
}

/// Who wrote a message, from its inbox record's `source`.
fn source_of(name: Option<&str>) -> TurnSource {
    match name {
        Some("cron") => TurnSource::Cron,
        Some("heartbeat") => TurnSource::Heartbeat,
        Some("subagent") => TurnSource::Subagent,
        Some("system") => TurnSource::System,
        _ => TurnSource::User,
    }
}

/// The tool-using steps turn `id` took and the calls of its last step without a result,
/// each with its journal key and whether its `started` record is on disk.
fn open_calls(session: &Session, id: &str) -> (u32, Vec<OpenCall>) {
    let Some(start) = session.turn_start(id) else { return (0, Vec::new()) };
    let turn = &session.messages[start..];
    let steps = turn.iter().filter(|m| m.role == Role::Assistant && !m.tool_calls.is_empty()).count();
    let steps = u32::try_from(steps).unwrap_or(u32::MAX);
    let TurnProgress::OpenCalls(open) = journal::progress(&session.messages, start) else { return (steps, Vec::new()) };
    let last =
        turn.iter().rev().find(|m| m.role == Role::Assistant).map(|m| m.tool_calls.as_slice()).unwrap_or_default();
    let open = open
        .into_iter()
        .map(|call| {
            let index = last.iter().position(|c| c.id == call.id).unwrap_or_default();
            OpenCall { key: journal::call_key(id, steps, index), started: session.call_started(id, &call.id), call }
        })
        .collect();
    (steps, open)
}

/// What [`Inbox::accept`] made of a message.
#[derive(Debug)]
pub enum Acceptance {
    /// A slash command, to run (nothing stored).
    Command(Command),
    /// Stored, or found stored and not answered: the inbox entry to answer.
    Pending(String),
    /// A redelivery of a message already answered.
    Answered,
    /// A redelivery of a message stored by an older version, never answered: answer the
    /// session's last message.
    Legacy,
}

/// The durable inbox of one session: takes a message to the session file at once, even while
/// a turn of the session runs (the session's mailbox waits for that turn; this does not).
/// Shares the loaded session with the actor, so the file keeps one writer at a time.
#[derive(Clone)]
pub struct Inbox {
    /// The actor's parts.
    job: TurnJob,
}

impl Inbox {
    /// Waits until this kernel may write the session (in a cluster, until it owns it); call
    /// before [`Inbox::accept`].
    pub async fn own(&self) -> Result<(), AgentError> {
        self.job.own().await
    }

    /// Stores `text` as an `accepted` inbox record (a slash command from the user is returned
    /// instead); a channel message already stored is recognised by its id.
    pub fn accept(
        &self,
        text: &str,
        source: TurnSource,
        origin: Option<&ChannelOrigin>,
    ) -> Result<Acceptance, AgentError> {
        if let Some(command) = Command::parse(text).filter(|_| source == TurnSource::User) {
            return Ok(Acceptance::Command(command));
        }
        self.job.ensure_loaded()?;
        if let Some(origin) = origin {
            let known = lock(&self.job.session).as_ref().and_then(|s| s.inbox_entry_of(&origin.inbound_id));
            match known {
                Some((_, state)) if state.is_closed() => return Ok(Acceptance::Answered),
                Some((id, _)) => return Ok(Acceptance::Pending(id)),
                None => {}
            }
            match self.job.find_inbound(&origin.inbound_id) {
                Some(Seen::Answered) => return Ok(Acceptance::Answered),
                Some(Seen::Pending) => return Ok(Acceptance::Legacy),
                None => {}
            }
        }
        let id = journal::fresh_inbox_id();
        let mut record = InboxRecord::state(&id, InboxState::Accepted);
        record.text = Some(self.job.fit_for_the_model(text));
        record.source = source_name(source).map(str::to_owned);
        if let Some(origin) = origin {
            record.inbound_id = Some(origin.inbound_id.clone());
            record.channel_metadata = Some(origin.metadata.clone());
            record.sender_id = Some(origin.sender_id.clone());
        }
        self.job.with_session(|session, store| {
            // The mark first: a kill between the two leaves a mark with nothing behind it,
            // which costs the next start one look, never a message. A session without a
            // metadata line in place gets both in the append's one whole-file write.
            if session.metadata.get(OPEN_INBOX_KEY) != Some(&serde_json::Value::Bool(true)) {
                session.metadata.insert(OPEN_INBOX_KEY.to_owned(), serde_json::Value::Bool(true));
                if session.header_in_place() {
                    store.save_metadata(session).map_err(AgentError::Session)?;
                }
            }
            store.append_with_records(session, Vec::new(), vec![Record::Inbox(record)]).map_err(AgentError::Session)
        })?;
        Ok(Acceptance::Pending(id))
    }

    /// `/stop` for the messages waiting behind the running turn: each accepted entry whose
    /// turn has not started is closed as stopped (a restart does not answer it either) and
    /// its caller hears "stopped". Returns how many there were.
    pub fn stop_waiting(&self) -> Result<usize, AgentError> {
        self.job.ensure_loaded()?;
        let waiting: Vec<String> = lock(&self.job.session)
            .as_ref()
            .map(|s| {
                s.pending_messages()
                    .into_iter()
                    .filter(|p| p.state == InboxState::Accepted && s.turn_start(&p.id).is_none())
                    .map(|p| p.id)
                    .collect()
            })
            .unwrap_or_default();
        for id in &waiting {
            self.job.control.mark_stopped_waiting(id);
            self.job.close_entry(id, InboxState::Failed, Some(STOPPED_WAITING.to_owned()));
        }
        Ok(waiting.len())
    }

    /// The session's messages accepted and not answered, in order.
    pub fn pending(&self) -> Result<Vec<PendingMessage>, AgentError> {
        self.job.ensure_loaded()?;
        Ok(lock(&self.job.session).as_ref().map(Session::pending_messages).unwrap_or_default())
    }
}

/// The messages replayed to the model: those not yet consolidated, at most
/// [`MAX_REPLAYED_MESSAGES`], starting at a user message so no tool result is orphaned.
fn replayable(session: &Session) -> &[ChatMessage] {
    &session.messages[replay_start(session)..]
}

/// Where [`replayable`] starts in `session.messages`.
fn replay_start(session: &Session) -> usize {
    let consolidated = session.consolidated_in_memory();
    let pending = session.unconsolidated();
    let mut from = pending.len().saturating_sub(MAX_REPLAYED_MESSAGES);
    while from < pending.len() && pending[from].role != Role::User {
        from += 1;
    }
    consolidated + from
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

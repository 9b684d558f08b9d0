//! The agent: sessions and slash commands on top of the turn, memory and kernel services.
//!
//! Code map: [`SessionManager`] routes each message to the [`session_actor::SessionActor`] of
//! its session (created on demand, evicted when idle): first into the session's durable inbox
//! ([`session_actor::Inbox`], an `accepted` record written at once, even while a turn runs),
//! then to the actor's mailbox, which answers it when its turn comes (see
//! [`crate::session::journal`] for the records and what a restart does with them). The
//! session actor persists the user's message, builds the request with the [`crate::context::ContextBuilder`], and runs the turn
//! ([`crate::turn::Engine::run`]) as a task through [`TurnControl::run`]. `/stop` aborts that
//! task through the session's [`TurnControl`], without waiting in the session's mailbox.

pub mod commands;
mod outcome;
pub mod oversize;
pub mod session_actor;
mod turn_control;
pub mod undelivered;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use actix::prelude::*;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::automation::dispatch::RunRequest;
use crate::memory::MemoryActors;
use crate::services::Services;
pub use crate::session::PendingMessage;
use crate::session::SessionKey;
use crate::turn::builtin::TurnSource;
use crate::turn::runner::TurnEvent;
pub use outcome::{AgentError, Background, TurnFailure, TurnReply};
pub use session_actor::ChannelOrigin;
use session_actor::{Acceptance, Inbox, SessionActor, UserTurn};
pub use turn_control::TurnControl;

/// Routes messages to session actors, creating them on demand.
pub struct SessionManager {
    /// Kernel services handed to every session.
    services: Arc<Services>,
    /// Consolidator, Dream and git, shared by every session.
    memory: MemoryActors,
    /// The live sessions, by key.
    sessions: Mutex<HashMap<SessionKey, SessionEntry>>,
    /// The threads session actors run on, a session always on the same one.
    pool: SessionThreads,
}

/// The most session threads a manager runs, whatever the machine.
const MOST_SESSION_THREADS: usize = 4;

/// How many session threads to allow: one per core the process may use, at most
/// [`MOST_SESSION_THREADS`].
pub fn session_threads_for_this_machine() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from).clamp(1, MOST_SESSION_THREADS)
}

/// The arbiters (threads with an event loop) session actors run on, so that one session's
/// work — a blocking `fsync` of a new session file, encoding a long request — holds up only
/// the sessions of its own thread, and sessions use every core. A thread starts when the
/// first session placed on it does (so one session costs one thread, never the whole pool);
/// with no threads allowed, sessions run on the caller's own arbiter. Stopped when dropped.
struct SessionThreads {
    /// One slot per allowed thread, its arbiter once a session needed it.
    arbiters: Mutex<Vec<Option<Arbiter>>>,
}

impl SessionThreads {
    fn allowing(count: usize) -> SessionThreads {
        SessionThreads { arbiters: Mutex::new((0..count).map(|_| None).collect()) }
    }

    /// The arbiter of session `key`, started if it was not: always the same for the same key,
    /// so the session's actor, when evicted and started again, runs where it ran before.
    /// `None` when no threads are allowed.
    fn for_session(&self, key: &SessionKey) -> Option<ArbiterHandle> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.as_str().hash(&mut hasher);
        let mut arbiters = self.arbiters.lock().unwrap_or_else(PoisonError::into_inner);
        let count = arbiters.len() as u64;
        let index = usize::try_from(hasher.finish().checked_rem(count)?).ok()?;
        arbiters.get_mut(index).map(|slot| slot.get_or_insert_with(Arbiter::new).handle())
    }
}

impl Drop for SessionThreads {
    fn drop(&mut self) {
        let arbiters = self.arbiters.get_mut().unwrap_or_else(PoisonError::into_inner);
        for arbiter in arbiters.iter().flatten() {
            arbiter.stop();
        }
    }
}

/// A live session actor, the control of its running turn, and its inbox.
type SessionEntry = (Addr<SessionActor>, Arc<TurnControl>, Inbox);

impl SessionManager {
    /// A manager over `services` whose sessions run on up to one thread per core (see
    /// [`session_threads_for_this_machine`]). Must be used inside an actix system.
    pub fn new(services: Arc<Services>) -> SessionManager {
        SessionManager::with_session_threads(services, session_threads_for_this_machine())
    }

    /// A manager over `services` whose sessions run on up to `threads` threads of their own,
    /// started as sessions need them; with `0`, every session runs on the caller's thread
    /// (a one-shot run has a single session, and a thread hop would only cost). Must be used
    /// inside an actix system.
    pub fn with_session_threads(services: Arc<Services>, threads: usize) -> SessionManager {
        let memory = MemoryActors::start(services.clone());
        SessionManager { services, memory, sessions: Mutex::default(), pool: SessionThreads::allowing(threads) }
    }

    /// The memory actors (Dream's schedule is started through them).
    pub fn memory(&self) -> &MemoryActors {
        &self.memory
    }

    /// The shared services.
    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// Handles one message for session `key`; progress goes to `events`.
    pub async fn send(
        &self,
        key: impl Into<SessionKey>,
        text: &str,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let key = key.into();
        let (addr, control, inbox) = self.session(key.clone());
        if text.trim() == "/stop" {
            return Ok(self.stop_everything(&key, &control, &inbox));
        }
        inbox.own().await?;
        let accepted = inbox.accept(text, TurnSource::User, None)?;
        Self::answer(addr, accepted, Background::default(), events).await
    }

    /// Runs a turn in session `key` on a message the kernel wrote itself (a cron job's
    /// message, the heartbeat's tasks, a helper's result): accepted into the session's inbox
    /// at once, answered after the session's current turn (never interleaved with it),
    /// marked with its `source`, and never read as a slash command.
    pub async fn send_system(
        &self,
        key: impl Into<SessionKey>,
        text: &str,
        source: TurnSource,
        background: Background,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let (addr, _, inbox) = self.session(key);
        inbox.own().await?;
        let accepted = inbox.accept(text, source, None)?;
        Self::answer(addr, accepted, background, events).await
    }

    /// Runs the turn of a kernel's own request (a helper's report, a scheduled job) in its
    /// session, as [`SessionManager::send_system`] does.
    pub async fn run_request(
        &self,
        request: &RunRequest,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let background = Background { cron_job: request.job.clone(), model: request.model.clone() };
        self.send_system(&request.key, &request.text, request.source, background, events).await
    }

    /// Asks the session's actor for what an accepted message needs.
    async fn answer(
        addr: Addr<SessionActor>,
        accepted: Acceptance,
        background: Background,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let Background { cron_job, model } = background;
        let turn = match accepted {
            Acceptance::Command(command) => UserTurn::Command { command },
            Acceptance::Pending(id) => UserTurn::Answer { id, cron_job, model, events },
            Acceptance::Legacy => UserTurn::Resume { events },
            Acceptance::Answered => return Ok(TurnReply::AlreadyAnswered),
        };
        addr.send(turn).await.map_err(|_| AgentError::Gone)?
    }

    /// Records in session `key` a message the assistant sent there on its own (the `message`
    /// tool, from another session): appended as an assistant message after the session's
    /// current turn, without waiting for it.
    pub fn record_sent(&self, key: impl Into<SessionKey>, content: &str) {
        let (addr, _, _) = self.session(key);
        addr.do_send(session_actor::RecordSent { content: content.to_owned() });
    }

    /// Handles one message from a chat channel: it goes into the session's inbox at once
    /// (even while a turn of the session runs) and `persisted` fires; a redelivered message
    /// is answered at most once.
    pub async fn send_from_channel(
        &self,
        key: impl Into<SessionKey>,
        text: &str,
        origin: ChannelOrigin,
        persisted: oneshot::Sender<()>,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let key = key.into();
        let (addr, control, inbox) = self.session(key.clone());
        if text.trim() == "/stop" {
            let _ = persisted.send(());
            return Ok(self.stop_everything(&key, &control, &inbox));
        }
        inbox.own().await?;
        let accepted = inbox.accept(text, TurnSource::User, Some(&origin))?;
        let _ = persisted.send(());
        Self::answer(addr, accepted, Background::default(), events).await
    }

    /// The messages of session `key` accepted and never answered (a restart's work), in the
    /// order they were accepted.
    pub fn pending(&self, key: impl Into<SessionKey>) -> Result<Vec<PendingMessage>, AgentError> {
        self.session(key).2.pending()
    }

    /// Answers inbox entry `id` of session `key` (see [`SessionManager::pending`]). The
    /// request is queued in the session's mailbox before this returns, so entries asked for
    /// in order are answered in order.
    pub fn answer_pending(
        &self,
        key: SessionKey,
        id: &str,
        events: UnboundedSender<TurnEvent>,
    ) -> impl Future<Output = Result<TurnReply, AgentError>> + use<> {
        let (addr, _, _) = self.session(key);
        let request = addr.send(UserTurn::Answer { id: id.to_owned(), cron_job: None, model: None, events });
        async move { request.await.map_err(|_| AgentError::Gone)? }
    }

    /// `/stop`: the session's running turn, the messages waiting behind it and the helpers
    /// it started.
    fn stop_everything(&self, key: &SessionKey, control: &TurnControl, inbox: &Inbox) -> TurnReply {
        let turn = control.stop();
        let waiting = inbox.stop_waiting().unwrap_or_else(|error| {
            tracing::warn!(session = %key, %error, "/stop could not close the waiting messages");
            0
        });
        let helpers = self.services.builtins().stop_session(key.as_str());
        TurnReply::Command(stop_summary(turn, waiting, helpers))
    }

    /// Records in session `key` that a reply could not be delivered, after the session's
    /// current turn and without waiting for it: the turn may be the one that sent the reply.
    pub fn record_undelivered(&self, key: impl Into<SessionKey>, content: &str, error: &str) {
        let (addr, _, _) = self.session(key);
        addr.do_send(session_actor::RecordUndelivered { content: content.to_owned(), error: error.to_owned() });
    }

    /// Answers the last message of `key` if a crash left it unanswered
    /// ([`TurnReply::AlreadyAnswered`] when there is none).
    pub async fn resume(
        &self,
        key: impl Into<SessionKey>,
        events: UnboundedSender<TurnEvent>,
    ) -> Result<TurnReply, AgentError> {
        let (addr, _, _) = self.session(key);
        addr.send(UserTurn::Resume { events }).await.map_err(|_| AgentError::Gone)?
    }

    /// Stops the running turn of `key` (Ctrl-C in the CLI); returns whether one was running.
    pub fn stop(&self, key: impl Into<SessionKey>) -> bool {
        self.session(key).1.stop()
    }

    fn session(&self, key: impl Into<SessionKey>) -> SessionEntry {
        let key = key.into();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = sessions.get(&key).filter(|entry| entry.0.connected()) {
            return entry.clone();
        }
        let control = Arc::new(TurnControl::default());
        let actor = SessionActor::new(key.clone(), self.services.clone(), self.memory.clone(), control.clone());
        let inbox = actor.inbox();
        let addr = match self.pool.for_session(&key) {
            Some(arbiter) => SessionActor::start_in_arbiter(&arbiter, |_| actor),
            None => actor.start(),
        };
        let entry = (addr, control, inbox);
        sessions.insert(key, entry.clone());
        entry
    }
}

/// What `/stop` answers: whether a turn ran, and how many waiting messages and helpers it
/// stopped.
fn stop_summary(turn: bool, waiting: usize, helpers: usize) -> String {
    let count = |n: usize, what: &str| match n {
        1 => format!("one {what}"),
        n => format!("{n} {what}s"),
    };
    let mut others = Vec::new();
    if waiting > 0 {
        others.push(count(waiting, "waiting message"));
    }
    if helpers > 0 {
        others.push(count(helpers, "helper"));
    }
    match (turn, others.is_empty()) {
        (false, true) => "Nothing is running.".to_owned(),
        (true, true) => "Stopping.".to_owned(),
        (_, false) => format!("Stopping, and {}.", others.join(" and ")),
    }
}

/// What the asker of a [`RunRequest`] is told: the reply's text (empty when there was nothing
/// to answer), or why there is none.
pub fn requested_answer(reply: &Result<TurnReply, AgentError>) -> Result<String, String> {
    match reply {
        Ok(TurnReply::Answer(text, _) | TurnReply::Command(text)) => Ok(text.clone()),
        Ok(TurnReply::Stopped) => Err("the turn was stopped".to_owned()),
        Ok(TurnReply::AlreadyAnswered) => Ok(String::new()),
        Err(error) => Err(error.to_string()),
    }
}

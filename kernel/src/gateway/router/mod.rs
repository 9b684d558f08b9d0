//! Routing between channel plugins and sessions: each inbound message goes, after access
//! control, to the `SessionActor` of `channel:chat_id`; it is acknowledged to its channel
//! once persisted; the reply streams back (to channels that stream) and is delivered with
//! retries ([`delivery`], through the [`outbox`]). In cluster mode a [`Relay`] carries the
//! messages and replies of channels run on one kernel between kernels ([`relay`]).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxibot_proto::{Delta, Feature, Inbound, InboundAccepted, Message, Outbound, PeerKind};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

mod approvals;
mod delivery;
pub mod outbox;
pub mod outbox_file;
pub mod outbox_store;
mod relay;
mod reply;
mod requests;

use outbox::{Outbox, RetryPolicy};
use outbox_store::{OutboxStore, Written};
pub use relay::{Relay, Relaying};
use reply::Reply;

use super::access::{Access, Decision};
use super::settings::{AllowFrom, ChannelChanges, GatewaySettings};
use crate::agent::{ChannelOrigin, SessionManager, TurnReply};
use crate::plugin::{PluginEvent, PluginHost};
use crate::provider::Usage;
use crate::services::Services;
use crate::session::SessionKey;
use crate::turn::runner::TurnEvent;

/// Inbound metadata key a channel sets to `true` when it authenticated the client itself.
pub const AUTHENTICATED_KEY: &str = "authenticated";

/// The gateway's routing state. Lives on the actix system's thread (hence `Rc`/`Cell`).
pub struct Router {
    /// The sessions messages go to.
    manager: Rc<SessionManager>,
    /// The kernel services, for the plugin host the channels run in.
    services: Arc<Services>,
    /// The settings in force; `apply_settings` changes what can change while running.
    settings: RefCell<GatewaySettings>,
    access: Access,
    /// Channels that announced streaming.
    streaming: RefCell<HashMap<String, bool>>,
    /// Channels that announced tool hints.
    tool_hints: RefCell<HashSet<String>>,
    /// Channels that announced `approvals`: they get approval requests as messages of their
    /// own type rather than as text.
    approval_requests: RefCell<HashSet<String>>,
    /// Replies on their way to a channel.
    outbox: Outbox,
    /// The last outbound / stream id given out.
    last_id: Cell<u64>,
    /// Cleared at shutdown: new messages are left for the channel to redeliver.
    accepting: Cell<bool>,
    /// Turns and deliveries in progress.
    in_flight: Cell<usize>,
    /// Waits between delivery attempts replacing the default ones (tests).
    retry_waits: Option<Vec<Duration>>,
    /// The chat a person wrote from most recently: channel, chat id and the channel's details
    /// (where the heartbeat reports).
    last_active: RefCell<Option<(String, String, Value)>>,
    /// Sessions whose running turn already sent a message to their own chat with the
    /// `message` tool: the turn's final reply is not sent as well.
    sent_by_tool: RefCell<HashSet<SessionKey>>,
    /// Set once the messages a previous run left unanswered are queued in their sessions: a
    /// new message (or a turn the kernel starts) waits for it, so it is answered after them.
    resumed: tokio::sync::watch::Sender<bool>,
    /// Cluster mode: where messages and replies of channels run on one kernel go between
    /// kernels (see [`relay`]); `None` on one host.
    relay: RefCell<Option<Rc<dyn Relay>>>,
    /// The ids of replies other kernels wrote that this kernel delivered lately.
    relayed: RefCell<relay::Delivered>,
}

impl Router {
    /// A router over `manager`'s sessions and the channels in `services`' plugin host, whose
    /// pending replies are kept in `outbox`.
    pub fn new(
        manager: Rc<SessionManager>,
        services: Arc<Services>,
        settings: GatewaySettings,
        access: Access,
        retry_waits: Option<Vec<Duration>>,
        outbox: Box<dyn OutboxStore>,
    ) -> Rc<Router> {
        Rc::new(Router {
            manager,
            services,
            settings: RefCell::new(settings),
            access,
            streaming: RefCell::default(),
            tool_hints: RefCell::default(),
            approval_requests: RefCell::default(),
            outbox: Outbox::new(outbox),
            last_id: Cell::new(0),
            accepting: Cell::new(true),
            in_flight: Cell::new(0),
            retry_waits,
            last_active: RefCell::default(),
            sent_by_tool: RefCell::default(),
            resumed: tokio::sync::watch::Sender::new(false),
            relay: RefCell::default(),
            relayed: RefCell::default(),
        })
    }

    /// Marks the start's unanswered messages as queued (see [`Router::resume_session`]): new
    /// messages go to their sessions from now on.
    pub fn resumed(&self) {
        self.resumed.send_replace(true);
    }

    /// Waits until the start's unanswered messages are queued in their sessions.
    async fn after_resume(&self) {
        let mut resumed = self.resumed.subscribe();
        let _ = resumed.wait_for(|done| *done).await;
    }

    /// Handles plugin events until the host goes away.
    pub async fn run(self: Rc<Self>, mut events: mpsc::UnboundedReceiver<PluginEvent>) {
        while let Some(event) = events.recv().await {
            match event {
                PluginEvent::Inbound { plugin, inbound } => {
                    let router = self.clone();
                    actix::spawn(async move { router.on_inbound(plugin, inbound).await });
                }
                PluginEvent::Delivery { ack, .. } => {
                    if ack.permanent {
                        self.outbox.refused_for_good(ack.id);
                    }
                    let outcome =
                        if ack.ok { Ok(()) } else { Err(ack.error.unwrap_or_else(|| "delivery failed".into())) };
                    self.outbox.acknowledged(ack.id, outcome);
                }
                PluginEvent::Ready { plugin, kind: PeerKind::Channel, features } => {
                    tracing::info!(channel = %plugin, "channel ready");
                    let mut hints = self.tool_hints.borrow_mut();
                    if features.contains(&Feature::ToolHints) {
                        hints.insert(plugin.clone());
                    } else {
                        hints.remove(&plugin);
                    }
                    self.streaming.borrow_mut().insert(plugin.clone(), features.contains(&Feature::Streaming));
                    drop(hints);
                    let mut approvals = self.approval_requests.borrow_mut();
                    if features.contains(&Feature::Approvals) {
                        approvals.insert(plugin.clone());
                    } else {
                        approvals.remove(&plugin);
                    }
                    drop(approvals);
                    self.outbox.channel_ready(&plugin);
                }
                PluginEvent::Ready { .. } => {}
                PluginEvent::Down { plugin, reason } => {
                    self.outbox.channel_down(&plugin, &reason);
                    if self.accepting.get() {
                        tracing::warn!(plugin = %plugin, %reason, "plugin down; it will be restarted");
                    } else {
                        tracing::info!(plugin = %plugin, %reason, "plugin stopped; the gateway is shutting down");
                    }
                }
            }
        }
    }

    /// Stops taking new messages (shutdown).
    pub fn stop_accepting(&self) {
        self.accepting.set(false);
    }

    /// Who may write through `channel` now; `None` when it is not a running channel.
    fn allow_from(&self, channel: &str) -> Option<AllowFrom> {
        self.settings.borrow().channel(channel).map(|c| c.allow_from.clone())
    }

    /// Whether `channel` is one of this gateway's channels.
    fn serves(&self, channel: &str) -> bool {
        self.settings.borrow().channel(channel).is_some()
    }

    /// The config section of `channel` in force now, when it is one of this gateway's channels.
    pub fn channel_section(&self, channel: &str) -> Option<Value> {
        self.settings.borrow().channel(channel).map(|c| c.raw.clone())
    }

    /// The names of this gateway's channels.
    fn channel_names(&self) -> Vec<String> {
        self.settings.borrow().channels.iter().map(|c| c.name.clone()).collect()
    }

    /// Takes an edited config's gateway settings: the channels' list and `allowFrom` at once.
    /// Returns how the channels changed (the caller starts, stops and restarts their plugins)
    /// and what needs a restart of the gateway (its address, the web UI's token or switch, the
    /// heartbeat).
    pub fn apply_settings(&self, new: GatewaySettings) -> (ChannelChanges, Vec<String>) {
        let mut settings = self.settings.borrow_mut();
        let changes = settings.channel_changes(&new);
        for channel in &changes.allow_from {
            tracing::info!(channel = %channel.name, "allowFrom changed; applied");
        }
        let mut needs_restart = Vec::new();
        if (new.host.as_str(), new.port) != (settings.host.as_str(), settings.port) {
            needs_restart.push("gateway.host/port".to_owned());
        }
        if (&new.token, new.web_ui) != (&settings.token, settings.web_ui) {
            needs_restart.push("gateway.token/webUi".to_owned());
        }
        if new.heartbeat != settings.heartbeat {
            needs_restart.push("gateway.heartbeat".to_owned());
        }
        settings.channels = new.channels;
        settings.delivery_retry = new.delivery_retry;
        (changes, needs_restart)
    }

    /// Forgets a channel whose plugin could not start after an edit enabled it.
    pub fn forget_channel(&self, name: &str) {
        self.settings.borrow_mut().channels.retain(|channel| channel.name != name);
        self.streaming.borrow_mut().remove(name);
    }

    /// Turns, and first attempts of their replies, still running.
    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Replies not yet delivered (kept in the outbox's store for the next start).
    pub fn undelivered(&self) -> usize {
        self.outbox.pending()
    }

    /// Resolves once every change to the outbox so far is on disk (shutdown).
    pub fn outbox_flushed(&self) -> Written {
        self.outbox.store().flushed()
    }

    /// How long and how often replies are retried, under the settings in force.
    fn retry_policy(&self) -> RetryPolicy {
        let policy = RetryPolicy::new(self.settings.borrow().delivery_retry);
        match &self.retry_waits {
            Some(waits) => policy.with_waits(waits.clone()),
            None => policy,
        }
    }

    async fn on_inbound(self: Rc<Self>, channel: String, inbound: Inbound) {
        if !self.accepting.get() {
            return;
        }
        let Some(configured) = self.allow_from(&channel) else {
            tracing::warn!(%channel, "message from a channel that is not configured; dropped");
            return;
        };
        let username = inbound.metadata.get("username").and_then(Value::as_str);
        let is_group = inbound.metadata.get("is_group").and_then(Value::as_bool).unwrap_or(false);
        if configured == AllowFrom::Pairing {
            // `oxibot pairing approve` may have run in another process since.
            self.access.refresh();
        }
        // A channel that authenticated its client itself (the API key or token of a local
        // server, or its loopback bind) says so; pairing codes are for strangers on chat services.
        let authenticated = inbound.metadata.get(AUTHENTICATED_KEY).and_then(Value::as_bool) == Some(true);
        let allow_from =
            if authenticated && configured == AllowFrom::Pairing { AllowFrom::Everyone } else { configured };
        match self.access.decide(&channel, &allow_from, &inbound.sender_id, username, &inbound.chat_id, is_group) {
            Decision::Allow => {}
            Decision::Deny => {
                tracing::info!(%channel, sender = %inbound.sender_id, "message from a sender not allowed; dropped");
                self.accept(&channel, &inbound.id);
                return;
            }
            Decision::SendCode(code) => {
                tracing::info!(%channel, sender = %inbound.sender_id, %code, "pairing code sent; approve with `oxibot pairing approve {code}`");
                self.accept(&channel, &inbound.id);
                let text = format!(
                    "Hi! I don't know you yet. Ask my owner to approve you with:\n\n    oxibot pairing approve {code}"
                );
                let _ =
                    self.deliver(Reply::new(&channel, &inbound.chat_id, text, None, inbound.metadata.clone())).await;
                return;
            }
        }
        *self.last_active.borrow_mut() = Some((channel.clone(), inbound.chat_id.clone(), inbound.metadata.clone()));
        if let Some(command) = approvals::ApprovalCommand::parse(&inbound.content) {
            self.accept(&channel, &inbound.id);
            self.answer_approval(&channel, &inbound, command).await;
            return;
        }
        if let Some(code) = inbound.content.trim().strip_prefix("/pairing approve ") {
            self.accept(&channel, &inbound.id);
            let text = match self.access.approve(code) {
                Ok(p) => format!("Approved {} on {}.", p.sender_id, p.channel),
                Err(error) => format!("Cannot approve: {error}"),
            };
            let _ = self.deliver(Reply::new(&channel, &inbound.chat_id, text, None, inbound.metadata.clone())).await;
            return;
        }
        if let Some(relay) = self.relay_for(&channel) {
            return self.relay_inbound(relay, &channel, &inbound).await;
        }
        self.in_flight.set(self.in_flight.get() + 1);
        self.after_resume().await;
        self.clone().turn(channel, inbound).await;
        self.in_flight.set(self.in_flight.get() - 1);
    }

    /// Runs the turn for an allowed message and delivers its reply.
    async fn turn(self: Rc<Self>, channel: String, inbound: Inbound) {
        let key = SessionKey::new(&channel, &inbound.chat_id);
        let (persisted, persisted_rx) = oneshot::channel();
        let router = self.clone();
        let (accept_channel, accept_id) = (channel.clone(), inbound.id.clone());
        actix::spawn(async move {
            if persisted_rx.await.is_ok() {
                router.accept(&accept_channel, &accept_id);
            }
        });
        let origin = ChannelOrigin {
            inbound_id: inbound.id.clone(),
            metadata: inbound.metadata.clone(),
            sender_id: inbound.sender_id.clone(),
        };
        let approver = self.approver(&channel, &inbound);
        let (events, stream_id) = self.stream_to(&channel, &inbound.chat_id, approver);
        let reply = self.manager.send_from_channel(&key, &inbound.content, origin, persisted, events).await;
        self.deliver_reply(&channel, &inbound.chat_id, reply, stream_id, inbound.metadata).await;
    }

    /// Answers, in order, every message a crash left unanswered in session `key` (gateway
    /// start): each is queued in the session's mailbox before this returns, so messages
    /// arriving later are answered after them.
    pub fn resume_session(self: &Rc<Self>, key: SessionKey) {
        let pending = match self.manager.pending(key.clone()) {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(session = %key, %error, "cannot read the session to answer what it left unanswered");
                return;
            }
        };
        if pending.is_empty() {
            tracing::info!(session = %key, "answering a message left unanswered by a previous run");
            actix::spawn(self.clone().resume(key, Value::Null));
            return;
        }
        for message in pending {
            tracing::info!(session = %key, message = %message.id, "answering a message left unanswered by a previous run");
            let (channel, chat_id) = (key.channel().to_owned(), key.chat_id().to_owned());
            // The person whose message it is approves its calls, as before the restart; a
            // message recorded without its sender has nobody to ask, and its `ask` calls wait
            // out their timeout and are denied (fail closed).
            let approver = message
                .sender_id
                .as_deref()
                .map(|sender| self.approver_of(&channel, sender, &message.channel_metadata));
            let (events, stream_id) = self.stream_to(&channel, &chat_id, approver);
            let reply = self.manager.answer_pending(key.clone(), &message.id, events);
            self.in_flight.set(self.in_flight.get() + 1);
            let router = self.clone();
            actix::spawn(async move {
                let reply = reply.await;
                router.deliver_reply(&channel, &chat_id, reply, stream_id, message.channel_metadata).await;
                router.in_flight.set(router.in_flight.get() - 1);
            });
        }
    }

    /// Answers the last message of session `key`, written before the inbox existed, when a
    /// crash left it unanswered.
    async fn resume(self: Rc<Self>, key: SessionKey, metadata: Value) {
        let (channel, chat_id) = (key.channel(), key.chat_id());
        self.in_flight.set(self.in_flight.get() + 1);
        // Nobody is bound to answer approvals of a resumed turn: its calls that ask time out.
        let (events, stream_id) = self.stream_to(channel, chat_id, None);
        let reply = self.manager.resume(&key, events).await;
        match &reply {
            Ok(TurnReply::AlreadyAnswered) => tracing::info!(session = %key, "nothing to resume"),
            Ok(_) => tracing::info!(session = %key, "answered a message a previous run left unanswered"),
            Err(error) => {
                tracing::warn!(session = %key, %error, "could not answer a message a previous run left unanswered")
            }
        }
        self.deliver_reply(channel, chat_id, reply, stream_id, metadata).await;
        self.in_flight.set(self.in_flight.get() - 1);
    }

    /// An event sink for a turn: deltas go to the channel when it streams; approval requests
    /// go to the chat, answerable by `approver` alone.
    fn stream_to(
        self: &Rc<Self>,
        channel: &str,
        chat_id: &str,
        approver: Option<approvals::Approver>,
    ) -> (mpsc::UnboundedSender<TurnEvent>, Option<u64>) {
        let (events, mut rx) = mpsc::unbounded_channel();
        if !self.streaming.borrow().get(channel).copied().unwrap_or(false) {
            let router = self.clone();
            let (channel, chat_id) = (channel.to_owned(), chat_id.to_owned());
            actix::spawn(async move {
                while let Some(event) = rx.recv().await {
                    if let TurnEvent::ApprovalRequested(request) = event {
                        router.ask_in_chat(&channel, &chat_id, approver.as_ref(), request);
                    }
                }
            });
            return (events, None);
        }
        let stream_id = self.fresh_id();
        let router = self.clone();
        let hints = self.tool_hints.borrow().contains(channel);
        let (channel, chat_id) = (channel.to_owned(), chat_id.to_owned());
        actix::spawn(async move {
            while let Some(event) = rx.recv().await {
                match event {
                    TurnEvent::Delta(text) => {
                        let delta = Message::Delta(Delta { stream_id, chat_id: chat_id.clone(), text });
                        let _ = router.host().send(&channel, delta);
                    }
                    TurnEvent::ToolStarted { name, arguments } if hints => {
                        router.send_tool_hint(&channel, &chat_id, stream_id, &name, &arguments);
                    }
                    TurnEvent::ApprovalRequested(request) => {
                        router.ask_in_chat(&channel, &chat_id, approver.as_ref(), request);
                    }
                    _ => {}
                }
            }
        });
        (events, Some(stream_id))
    }

    /// Delivers a turn's reply (waiting for its first attempt only), unless the turn already
    /// sent its message with the `message` tool.
    async fn deliver_reply(
        self: &Rc<Self>,
        channel: &str,
        chat_id: &str,
        reply: Result<TurnReply, crate::agent::AgentError>,
        stream_id: Option<u64>,
        metadata: Value,
    ) {
        if self.sent_by_tool.borrow_mut().remove(&SessionKey::new(channel, chat_id)) {
            tracing::debug!(%channel, %chat_id, "the turn sent its message with the message tool; no second reply");
            return;
        }
        let mut metadata = metadata;
        let text = match reply {
            Ok(TurnReply::AlreadyAnswered) => return,
            Ok(TurnReply::Answer(text, usage)) => {
                with_usage(&mut metadata, &usage);
                text
            }
            Ok(TurnReply::Command(text)) => text,
            Ok(TurnReply::Stopped) => "(stopped)".to_owned(),
            Err(crate::agent::AgentError::Session(error @ crate::session::SessionError::NotOwner { .. })) => {
                // Cluster mode: another kernel owns the session now and answers the message,
                // which stays in the session's inbox.
                tracing::warn!(%channel, %chat_id, %error, "turn stopped: the session is owned elsewhere");
                return;
            }
            Err(error) => format!("Sorry, something went wrong: {error}"),
        };
        if text.trim().is_empty() {
            return;
        }
        let _ = self.deliver(Reply::new(channel, chat_id, text, stream_id, metadata)).await;
    }

    /// Sends a tool hint once, without waiting for its acknowledgement (a lost hint is no loss).
    fn send_tool_hint(&self, channel: &str, chat_id: &str, stream_id: u64, name: &str, arguments: &str) {
        let hint = Outbound {
            id: self.fresh_id(),
            chat_id: chat_id.to_owned(),
            content: tool_hint(name, arguments),
            media: Vec::new(),
            stream_id: Some(stream_id),
            metadata: serde_json::json!({ TOOL_HINT_KEY: true }),
        };
        let _ = self.host().send(channel, Message::Outbound(hint));
    }

    fn accept(&self, channel: &str, id: &str) {
        let accepted = Message::InboundAccepted(InboundAccepted { id: id.to_owned() });
        if let Err(error) = self.host().send(channel, accepted) {
            tracing::warn!(%channel, %error, "cannot acknowledge a message; the channel may deliver it again");
        }
    }

    fn host(&self) -> &PluginHost {
        self.services.host()
    }

    /// A new outbound or stream id: the clock in microseconds, or one more than the last id
    /// when that is later. Ids of different kernel runs so never meet, and a channel may build
    /// its service's idempotency key from an id alone.
    fn fresh_id(&self) -> u64 {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |t| u64::try_from(t.as_micros()).unwrap_or(0));
        let id = now.max(self.last_id.get() + 1);
        self.last_id.set(id);
        id
    }
}

/// Outbound metadata key marking a tool hint (sent to channels that announced `tool_hints`).
pub const TOOL_HINT_KEY: &str = "_tool_hint";
/// Longest tool hint, in characters.
const TOOL_HINT_CHARS: usize = 120;

/// A tool call in one short line: the tool's name and its arguments with runs of whitespace
/// joined, cut at [`TOOL_HINT_CHARS`].
fn tool_hint(name: &str, arguments: &str) -> String {
    let arguments = arguments.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = format!("{name} {arguments}").trim_end().to_owned();
    if line.chars().count() <= TOOL_HINT_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(TOOL_HINT_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Outbound metadata key carrying the token counts of the turn a reply ends (`usage`).
pub const USAGE_KEY: &str = "usage";

/// Adds the turn's token counts to a reply's metadata as `usage`: `prompt_tokens` (cached
/// ones included), `completion_tokens`, `total_tokens` and `cached_tokens`.
fn with_usage(metadata: &mut Value, usage: &Usage) {
    let counts = serde_json::json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
    });
    match metadata {
        Value::Object(fields) => {
            fields.insert(USAGE_KEY.to_owned(), counts);
        }
        other => *other = serde_json::json!({ USAGE_KEY: counts }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_hint_is_one_short_line() {
        assert_eq!(tool_hint("read_file", "{\n  \"path\": \"notes.md\"\n}"), "read_file { \"path\": \"notes.md\" }");
        assert_eq!(tool_hint("list_dir", ""), "list_dir");
        let long = tool_hint("exec", &"x".repeat(500));
        assert_eq!(long.chars().count(), TOOL_HINT_CHARS);
        assert!(long.ends_with('…'));
    }
}

//! Writing channel plugins: [`ChannelPlugin`] does the handshake and hands the service code a
//! [`ChannelHandle`] to submit users' messages and receive the kernel's replies.
//!
//! ```no_run
//! use oxibot_plugin::{ChannelEvent, ChannelHandle, ChannelPlugin};
//!
//! async fn serve(channel: ChannelHandle) -> Result<(), std::io::Error> {
//!     let token = channel.config()["token"].as_str().unwrap_or_default().to_owned();
//!     // … start polling the chat service with `token`; for each message it reports:
//!     channel.submit(channel.inbound("update-1", "alice", "chat-9", "hello")).await.ok();
//!     // … and only now tell the service that update-1 is handled.
//!     while let Some(event) = channel.next_event().await {
//!         if let ChannelEvent::Outbound(reply) = event {
//!             // … send `reply.content` to `reply.chat_id`, then:
//!             let _ = channel.ack(reply.id, Ok(()));
//!         }
//!     }
//!     Ok(())
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     ChannelPlugin::new("example").streaming().run(serve)
//! }
//! ```
//!
//! **Redelivery.** [`ChannelHandle::submit`] resolves once the kernel has persisted the
//! message. A message not yet accepted when the process ends is lost to the kernel, and the
//! process ends with the kernel (it is restarted along with it). So the service must keep
//! every message it has not seen accepted and deliver it again after a restart: advance a
//! service's cursor (Telegram's `getUpdates` offset, a queue's ack) only after `submit`
//! returned `Ok`.
//!
//! **Lifecycle.** When the kernel says goodbye or closes the connection, pending `submit`s fail
//! with [`ChannelError::Closed`], [`ChannelHandle::next_event`] returns `None`, and the service
//! has a moment to return before the process exits. When the service returns, the plugin says
//! goodbye and exits (status 0 for `()` or `Ok`, 1 for `Err`, 70 for a panic); the kernel then
//! restarts it. Diagnostics go to stderr, as for tool plugins: the kernel logs each line under
//! the plugin's name and shows the last ones when the plugin dies.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use oxibot_proto::{
    ApprovalRequest, DeliveryAck, Delta, ENV_CHANNEL_CONFIG, Feature, Goodbye, Hello, Inbound, Manifest, Message,
    Outbound, PeerKind,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};

use crate::launch::{LaunchEnv, LaunchError};
use crate::link::{self, FrameReader, Link, Outgoing, PANIC_EXIT, Sender, ServeError};

/// How long the service may take to return after the kernel went away.
const WIND_DOWN: Duration = Duration::from_millis(200);

/// The outbound metadata key that marks a tool hint (see [`ChannelPlugin::tool_hints`]).
pub const TOOL_HINT_KEY: &str = "_tool_hint";

/// A channel plugin under construction: its name and what it can do.
#[derive(Debug, Clone)]
pub struct ChannelPlugin {
    /// Appears in the kernel's logs and statuses, and in every [`Inbound`] built by
    /// [`ChannelHandle::inbound`].
    name: String,
    /// Announces [`Feature::Streaming`]: the kernel then sends `Delta`s.
    streaming: bool,
    /// Announces [`Feature::ToolHints`]: the kernel then sends tool hints as `Outbound`s.
    tool_hints: bool,
    /// Announces [`Feature::Approvals`]: the kernel then sends approval requests as
    /// [`ChannelEvent::Approval`]s rather than as text.
    approvals: bool,
}

impl ChannelPlugin {
    /// A channel named `name` (e.g. `telegram`) that does not stream.
    pub fn new(name: impl Into<String>) -> ChannelPlugin {
        ChannelPlugin { name: name.into(), streaming: false, tool_hints: false, approvals: false }
    }

    /// Asks the kernel for [`ChannelEvent::Delta`]s: the channel shows replies as they grow.
    pub fn streaming(mut self) -> ChannelPlugin {
        self.streaming = true;
        self
    }

    /// Asks the kernel for tool hints while a streamed reply is written: each arrives as a
    /// [`ChannelEvent::Outbound`] whose metadata has `_tool_hint: true` (see [`TOOL_HINT_KEY`]).
    pub fn tool_hints(mut self) -> ChannelPlugin {
        self.tool_hints = true;
        self
    }

    /// Asks the kernel for approval requests as [`ChannelEvent::Approval`]s, for a channel that
    /// shows their answers as buttons (see [`crate::chat::approval`]). Without it, a request
    /// arrives as an [`ChannelEvent::Outbound`] whose text says to reply `/approve CODE`.
    pub fn approvals(mut self) -> ChannelPlugin {
        self.approvals = true;
        self
    }

    /// Connects to the kernel and runs `service` until the kernel hangs up or the service
    /// returns. See the module docs for exit statuses.
    pub fn run<F, Fut>(self, service: F) -> ExitCode
    where
        F: FnOnce(ChannelHandle) -> Fut,
        Fut: Future + Send + 'static,
        Fut::Output: ServiceOutcome,
    {
        let name = self.name.clone();
        link::run_main(&name, |env| serve(self, env, service))
    }
}

/// What a channel service returns: `()`, or a `Result` whose error ends the process with a
/// failure status.
pub trait ServiceOutcome: Send + 'static {
    /// Why the service failed, if it did.
    fn failure(self) -> Option<String>;
}

impl ServiceOutcome for () {
    fn failure(self) -> Option<String> {
        None
    }
}

impl<E: Display + Send + 'static> ServiceOutcome for Result<(), E> {
    fn failure(self) -> Option<String> {
        self.err().map(|error| error.to_string())
    }
}

/// Something the kernel asks the channel to do.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelEvent {
    /// Deliver a message; answer with [`ChannelHandle::ack`] and its `id`.
    Outbound(Outbound),
    /// Append text to a reply being written (only for a channel that announced streaming).
    Delta(Delta),
    /// Ask a person to approve a tool call (only for a channel that announced approvals);
    /// answer with [`ChannelHandle::ack`] and its `id` once it is shown.
    Approval(ApprovalRequest),
}

/// Why a message could not go to the kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The connection to the kernel is closed (the process is about to exit).
    #[error("the connection to the kernel is closed")]
    Closed,
    /// The message is larger than a frame may be.
    #[error("the message cannot be sent to the kernel: {0}")]
    TooLarge(String),
}

/// The service's side of the connection. Cheap to clone; every clone talks to the same kernel.
#[derive(Clone)]
pub struct ChannelHandle {
    inner: Arc<Shared>,
}

/// What every clone of a handle shares.
struct Shared {
    /// The channel's name.
    name: String,
    /// The channel's config section, `{}` when the kernel passed none.
    config: Value,
    /// Frames for the kernel.
    outgoing: Sender,
    /// Submitted inbound messages waiting for the kernel's acceptance.
    pending: Mutex<Pending>,
    /// Outbound messages and deltas from the kernel; ends when the kernel hangs up.
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<ChannelEvent>>,
}

/// Waiters for acceptance and whether the connection is gone, under one lock so no submit can
/// slip in after the close.
#[derive(Default)]
struct Pending {
    /// Inbound id → the submits waiting for its acceptance.
    waiters: HashMap<String, Vec<oneshot::Sender<()>>>,
    /// Set once the kernel hung up.
    closed: bool,
}

/// Whether the dispatcher keeps reading.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

impl ChannelHandle {
    fn new(
        name: String,
        config: Value,
        outgoing: Sender,
        events: mpsc::UnboundedReceiver<ChannelEvent>,
    ) -> ChannelHandle {
        let shared =
            Shared { name, config, outgoing, pending: Mutex::default(), events: tokio::sync::Mutex::new(events) };
        ChannelHandle { inner: Arc::new(shared) }
    }

    /// The channel's name, as given to [`ChannelPlugin::new`].
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The channel's config section from the kernel's config (`OXIBOT_CHANNEL_CONFIG`), `{}`
    /// when there is none.
    pub fn config(&self) -> &Value {
        &self.inner.config
    }

    /// An inbound message from this channel with no media and empty metadata. `id` must be
    /// the same when the message is delivered again.
    pub fn inbound(
        &self,
        id: impl Into<String>,
        sender_id: impl Into<String>,
        chat_id: impl Into<String>,
        content: impl Into<String>,
    ) -> Inbound {
        Inbound {
            id: id.into(),
            channel: self.inner.name.clone(),
            sender_id: sender_id.into(),
            chat_id: chat_id.into(),
            content: content.into(),
            media: Vec::new(),
            metadata: Value::Object(serde_json::Map::new()),
        }
    }

    /// Sends a user's message to the kernel and waits until the kernel has persisted it.
    /// Until this returns `Ok`, the service must be ready to deliver the message again.
    pub async fn submit(&self, inbound: Inbound) -> Result<(), ChannelError> {
        let id = inbound.id.clone();
        let frame = link::encode(&Message::Inbound(inbound)).map_err(|e| ChannelError::TooLarge(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.inner.lock();
            if pending.closed {
                return Err(ChannelError::Closed);
            }
            pending.waiters.entry(id).or_default().push(tx);
        }
        self.inner.outgoing.send(Outgoing::Frame(frame)).map_err(|_| ChannelError::Closed)?;
        rx.await.map_err(|_| ChannelError::Closed)
    }

    /// The next thing the kernel asks for, or `None` once the kernel has hung up.
    pub async fn next_event(&self) -> Option<ChannelEvent> {
        self.inner.events.lock().await.recv().await
    }

    /// Reports whether the outbound message `id` reached the chat service (`Err` says why
    /// not).
    pub fn ack(&self, id: u64, outcome: Result<(), String>) -> Result<(), ChannelError> {
        let ack = DeliveryAck { id, ok: outcome.is_ok(), error: outcome.err(), permanent: false };
        self.send(&Message::DeliveryAck(ack))
    }

    /// Acknowledges outbound message `id` as undeliverable for good, for `reason`: the
    /// kernel gives it up at once instead of retrying (use it when no later attempt could
    /// succeed, such as an HTTP reply whose request is gone).
    pub fn refuse(&self, id: u64, reason: String) -> Result<(), ChannelError> {
        let ack = DeliveryAck { id, ok: false, error: Some(reason), permanent: true };
        self.send(&Message::DeliveryAck(ack))
    }

    fn send(&self, message: &Message) -> Result<(), ChannelError> {
        if self.inner.lock().closed {
            return Err(ChannelError::Closed);
        }
        let frame = link::encode(message).map_err(|e| ChannelError::TooLarge(e.to_string()))?;
        self.inner.outgoing.send(Outgoing::Frame(frame)).map_err(|_| ChannelError::Closed)
    }

    /// Handles one message from the kernel.
    fn route(&self, message: Message, events: &mpsc::UnboundedSender<ChannelEvent>) -> Flow {
        match message {
            Message::InboundAccepted(accepted) => self.accept(&accepted.id),
            Message::Outbound(outbound) => {
                let _ = events.send(ChannelEvent::Outbound(outbound));
            }
            Message::Delta(delta) => {
                let _ = events.send(ChannelEvent::Delta(delta));
            }
            Message::ApprovalRequest(request) => {
                let _ = events.send(ChannelEvent::Approval(request));
            }
            Message::Ping(ping) => {
                let _ = self.send(&Message::Pong(ping));
            }
            Message::Goodbye(_) => return Flow::Stop,
            _ => {}
        }
        Flow::Continue
    }

    /// Wakes every submit of `id`; an id nobody waits for is ignored.
    fn accept(&self, id: &str) {
        let waiters = self.inner.lock().waiters.remove(id).unwrap_or_default();
        for waiter in waiters {
            let _ = waiter.send(());
        }
    }

    /// Marks the connection gone and fails every pending submit.
    fn close(&self) {
        let mut pending = self.inner.lock();
        pending.closed = true;
        pending.waiters.clear();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A poisoned lock only means a thread panicked while holding it; the map is intact.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn serve<F, Fut>(plugin: ChannelPlugin, env: LaunchEnv, service: F) -> Result<ExitCode, ServeError>
where
    F: FnOnce(ChannelHandle) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: ServiceOutcome,
{
    let config = parse_config(std::env::var(ENV_CHANNEL_CONFIG).ok().as_deref())?;
    let mut hello = Hello::new(plugin.name.clone(), PeerKind::Channel, env.token.clone());
    if plugin.streaming {
        hello.features.push(Feature::Streaming);
    }
    if plugin.tool_hints {
        hello.features.push(Feature::ToolHints);
    }
    if plugin.approvals {
        hello.features.push(Feature::Approvals);
    }
    let mut link = Link::open(&env, hello, Manifest::default()).await?;
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let handle = ChannelHandle::new(plugin.name, config, link.outgoing.clone(), events_rx);
    let mut task = tokio::spawn(service(handle.clone()));
    let outcome = tokio::select! {
        read = dispatch(&mut link.reader, &handle, events_tx) => {
            handle.close();
            wind_down(&mut task).await;
            read.map(|()| ExitCode::SUCCESS)
        }
        finished = &mut task => {
            let exit = service_ended(handle.name(), finished, &link.outgoing);
            handle.close();
            Ok(exit)
        }
    };
    link.close().await;
    outcome
}

/// The channel config from the environment variable's text; absent means `{}`.
fn parse_config(raw: Option<&str>) -> Result<Value, LaunchError> {
    match raw.map(str::trim).filter(|text| !text.is_empty()) {
        None => Ok(Value::Object(serde_json::Map::new())),
        Some(text) => serde_json::from_str(text).map_err(|e| LaunchError::ChannelConfig { reason: e.to_string() }),
    }
}

/// Routes the kernel's messages until it says goodbye or closes the connection.
async fn dispatch(
    reader: &mut FrameReader,
    handle: &ChannelHandle,
    events: mpsc::UnboundedSender<ChannelEvent>,
) -> Result<(), ServeError> {
    while let Some(message) = reader.next().await? {
        if handle.route(message, &events) == Flow::Stop {
            break;
        }
    }
    Ok(())
}

/// Gives the service a moment to notice the closed connection and return, then stops it.
async fn wind_down<T>(task: &mut JoinHandle<T>) {
    if tokio::time::timeout(WIND_DOWN, &mut *task).await.is_err() {
        task.abort();
    }
}

/// Says goodbye with the reason the service ended and picks the exit status.
fn service_ended<T: ServiceOutcome>(name: &str, finished: Result<T, JoinError>, outgoing: &Sender) -> ExitCode {
    let (reason, exit) = match finished {
        Ok(outcome) => match outcome.failure() {
            None => ("the channel service finished".to_owned(), ExitCode::SUCCESS),
            Some(error) => (format!("the channel service failed: {error}"), ExitCode::FAILURE),
        },
        Err(error) if error.is_panic() => {
            let reason = link::panic_message(error.into_panic().as_ref());
            (format!("the channel service panicked: {reason}"), ExitCode::from(PANIC_EXIT))
        }
        Err(_) => ("the channel service was cancelled".to_owned(), ExitCode::FAILURE),
    };
    crate::error!("{name}: {reason}");
    let _ = link::queue_message(outgoing, &Message::Goodbye(Goodbye { reason }));
    exit
}

#[cfg(test)]
mod tests;

//! One live plugin connection: calls multiplexed by id over one socket, with one error cell.
//!
//! Callers use [`Connection::call`] directly (no actor hop on the hot path). The connection's
//! reader task routes each `result` to the waiting caller and, on a channel's connection, each
//! `inbound` and `delivery_ack` to the host's [`EventBus`]. When the connection ends, the
//! plugin's instance task records the cause in the error cell and fails every pending call
//! with it at once; calls made later fail immediately with the same error.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use interprocess::local_socket::tokio::Stream;
use oxibot_proto::{Call, CallContext, Cancel, Log, Message, ToolResult};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::error::PluginError;
use super::events::{EventBus, PluginEvent};
use super::process::{OutputTail, log_at};
use super::wire::{FrameReader, Outgoing, Shared, write_frames};

/// Why a connection ended, as first noticed by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseCause {
    /// The plugin closed the socket (after a `goodbye`, if it sent one).
    Closed {
        /// The reason in the plugin's `goodbye`, if any.
        goodbye: Option<String>,
    },
    /// The plugin broke the protocol (garbage, oversize or truncated frame).
    Violation(String),
    /// A call ran past its timeout.
    Hung {
        /// The tool that did not answer.
        tool: String,
        /// Its timeout.
        after: Duration,
    },
    /// The process exited.
    Exited,
    /// The kernel is shutting the plugin down.
    Shutdown,
}

impl fmt::Display for CloseCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseCause::Closed { goodbye: Some(reason) } => write!(f, "it said goodbye: {reason}"),
            CloseCause::Closed { goodbye: None } => f.write_str("it closed the connection"),
            CloseCause::Violation(what) => write!(f, "protocol violation: {what}"),
            CloseCause::Hung { tool, after } => {
                write!(f, "'{tool}' did not answer within {}", super::error::seconds(*after))
            }
            CloseCause::Exited => f.write_str("its process exited"),
            CloseCause::Shutdown => f.write_str("the kernel shut it down"),
        }
    }
}

type Reply = Result<ToolResult, PluginError>;

/// Calls in flight and the error cell, under one lock so no call slips in after the drain.
#[derive(Default)]
struct State {
    /// Call id → where to deliver its result.
    pending: HashMap<u64, oneshot::Sender<Reply>>,
    /// Set once when the connection ends; every later call fails with it.
    closed: Option<PluginError>,
}

struct Inner {
    /// The plugin's name, for errors.
    plugin: String,
    /// Encoded frames for the writer task.
    outgoing: mpsc::UnboundedSender<Outgoing>,
    /// Pending calls and the error cell.
    state: Mutex<State>,
    /// Source of call ids.
    next_id: AtomicU64,
    /// Tells the instance task that a call timed out, so it kills the hung plugin.
    trouble: mpsc::UnboundedSender<CloseCause>,
    /// Set as soon as the connection is known to be going down (end of stream, protocol
    /// violation, hang), before the error cell is filled, so new callers wait for the
    /// replacement instead of queueing on a dead connection.
    closing: AtomicBool,
    /// Where a channel's unsolicited messages go; `None` on a tool's connection, whose
    /// channel messages are ignored.
    channel_events: Option<Arc<EventBus>>,
    /// The plugin's last output lines, which its `log` lines join.
    tail: OutputTail,
}

/// A cheap, cloneable handle to a live plugin connection.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

/// The parts of a connection that only the plugin's instance task holds.
pub struct ConnectionTasks {
    /// Ends with the cause when the plugin closes the stream or breaks the protocol.
    pub reader: JoinHandle<CloseCause>,
    /// Receives timeouts reported by callers.
    pub trouble: mpsc::UnboundedReceiver<CloseCause>,
}

impl Connection {
    /// Starts the reader and writer tasks for a connection that finished its handshake.
    ///
    /// `channel_events` is set for a channel plugin: its `inbound` and `delivery_ack`
    /// messages become [`PluginEvent`]s there. `tail` is the process's output tail, which the
    /// plugin's `log` lines join.
    pub fn start(
        plugin: &str,
        stream: Arc<Stream>,
        reader: FrameReader,
        channel_events: Option<Arc<EventBus>>,
        tail: OutputTail,
    ) -> (Connection, ConnectionTasks) {
        let (outgoing, queue) = mpsc::unbounded_channel();
        let (trouble_tx, trouble) = mpsc::unbounded_channel();
        tokio::spawn(write_frames(Shared(stream), queue));
        let inner = Arc::new(Inner {
            plugin: plugin.to_owned(),
            outgoing,
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            trouble: trouble_tx,
            closing: AtomicBool::new(false),
            channel_events,
            tail,
        });
        let reader = tokio::spawn(read_loop(reader, inner.clone()));
        (Connection { inner }, ConnectionTasks { reader, trouble })
    }

    /// Runs one tool call, waiting at most `timeout` for its result.
    ///
    /// If the caller stops waiting (the future is dropped), the plugin gets a `cancel`. If the
    /// timeout expires, the plugin gets a `cancel` and is reported as hung.
    pub async fn call(&self, tool: &str, arguments: Value, context: CallContext, timeout: Duration) -> Reply {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let call = Message::Call(Call { id, tool: tool.to_owned(), arguments, context });
        let frame = oxibot_proto::encode(&call)
            .map_err(|e| PluginError::Encode { plugin: self.inner.plugin.clone(), reason: e.to_string() })?;
        let (tx, rx) = oneshot::channel();
        {
            let mut state = self.inner.lock();
            if let Some(error) = &state.closed {
                return Err(error.clone());
            }
            state.pending.insert(id, tx);
        }
        let _ = self.inner.outgoing.send(Outgoing::Frame(frame));
        let mut guard = CancelOnDrop { inner: &self.inner, id, armed: true };
        let outcome = tokio::time::timeout(timeout, rx).await;
        match outcome {
            Ok(Ok(reply)) => {
                guard.armed = false;
                reply
            }
            Ok(Err(_)) => {
                guard.armed = false;
                Err(self.closed_error())
            }
            Err(_) => {
                self.inner.closing.store(true, Ordering::Release);
                let _ = self.inner.trouble.send(CloseCause::Hung { tool: tool.to_owned(), after: timeout });
                Err(PluginError::Timeout { plugin: self.inner.plugin.clone(), tool: tool.to_owned(), after: timeout })
            }
        }
    }

    /// Records why the connection ended and fails every pending call with it.
    pub fn fail_all(&self, error: PluginError) {
        let pending = {
            let mut state = self.inner.lock();
            state.closed.get_or_insert(error.clone());
            std::mem::take(&mut state.pending)
        };
        for (_, waiter) in pending {
            let _ = waiter.send(Err(error.clone()));
        }
    }

    /// Queues a message for the plugin (used for `goodbye` on shutdown).
    pub fn send(&self, message: &Message) {
        if let Ok(frame) = oxibot_proto::encode(message) {
            let _ = self.inner.outgoing.send(Outgoing::Frame(frame));
        }
    }

    /// Queues a message for the plugin, or says why it cannot go out: the connection is
    /// going down, or the message does not fit in a frame.
    pub fn try_send(&self, message: &Message) -> Result<(), PluginError> {
        if self.is_closing() {
            return Err(self.inner.lock().closed.clone().unwrap_or_else(|| PluginError::NotRunning {
                plugin: self.inner.plugin.clone(),
                state: "restarting".into(),
            }));
        }
        let frame = oxibot_proto::encode(message)
            .map_err(|e| PluginError::Encode { plugin: self.inner.plugin.clone(), reason: e.to_string() })?;
        self.inner.outgoing.send(Outgoing::Frame(frame)).map_err(|_| self.closed_error())
    }

    /// Whether the connection is going down (new calls should wait for the replacement).
    pub fn is_closing(&self) -> bool {
        self.inner.closing.load(Ordering::Acquire)
    }

    /// Number of calls waiting for a result.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().pending.len()
    }

    fn closed_error(&self) -> PluginError {
        self.inner.lock().closed.clone().unwrap_or(PluginError::ShuttingDown)
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Emits a channel's event; a tool plugin sending channel messages is ignored.
    fn channel_event(&self, event: impl FnOnce(String) -> PluginEvent) {
        match &self.channel_events {
            Some(bus) => bus.emit(event(self.plugin.clone())),
            None => tracing::trace!(plugin = %self.plugin, "ignoring a channel message from a tool plugin"),
        }
    }
}

/// Withdraws a call whose caller stopped waiting and tells the plugin to cancel it.
struct CancelOnDrop<'a> {
    inner: &'a Inner,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.inner.lock().pending.remove(&self.id);
        if let Ok(frame) = oxibot_proto::encode(&Message::Cancel(Cancel { id: self.id })) {
            let _ = self.inner.outgoing.send(Outgoing::Frame(frame));
        }
    }
}

/// Routes incoming messages until the stream ends; returns why it ended.
async fn read_loop(reader: FrameReader, inner: Arc<Inner>) -> CloseCause {
    let cause = route_messages(reader, &inner).await;
    inner.closing.store(true, Ordering::Release);
    cause
}

async fn route_messages(mut reader: FrameReader, inner: &Inner) -> CloseCause {
    let mut goodbye = None;
    loop {
        match reader.next().await {
            Ok(Some(Message::Result(result))) => deliver(inner, result),
            Ok(Some(Message::Log(log))) => forward_log(inner, &log),
            Ok(Some(Message::Ping(ping))) => {
                if let Ok(frame) = oxibot_proto::encode(&Message::Pong(ping)) {
                    let _ = inner.outgoing.send(Outgoing::Frame(frame));
                }
            }
            Ok(Some(Message::Goodbye(bye))) => {
                // The plugin closes the connection next: new calls wait for the replacement.
                inner.closing.store(true, Ordering::Release);
                goodbye = Some(bye.reason);
            }
            Ok(Some(Message::Inbound(inbound))) => {
                inner.channel_event(|plugin| PluginEvent::Inbound { plugin, inbound })
            }
            Ok(Some(Message::DeliveryAck(ack))) => inner.channel_event(|plugin| PluginEvent::Delivery { plugin, ack }),
            Ok(Some(other)) => tracing::trace!(plugin = %inner.plugin, ?other, "ignoring message"),
            Ok(None) => return CloseCause::Closed { goodbye },
            Err(error) => return CloseCause::Violation(error.to_string()),
        }
    }
}

fn deliver(inner: &Inner, result: ToolResult) {
    // A result for a call that was cancelled or timed out has no waiter; drop it.
    if let Some(waiter) = inner.lock().pending.remove(&result.id) {
        let _ = waiter.send(Ok(result));
    }
}

/// Logs a plugin's `log` line at its level, and keeps it with the plugin's stderr lines, so an
/// error message about the plugin's end shows it too.
fn forward_log(inner: &Inner, log: &Log) {
    log_at(&inner.plugin, &log.level, &log.message);
    inner.tail.push(&format!("{}: {}", log.level, log.message));
}

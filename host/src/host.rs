//! `PluginHost`: starts every plugin under a `PluginActor`, routes tool calls, and connects
//! channel plugins to their one subscriber (events in, [`PluginHost::send`] out).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use actix::prelude::*;
use oxibot_proto::{CallContext, Message, PeerKind, ToolResult, ToolSpec};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::actor::{PluginActor, Shutdown};
use super::connection::Connection;
use super::error::PluginError;
use super::events::{EventBus, PluginEvent};
use super::registry::ToolRegistry;
use super::rundir::RunDir;
use super::shared::{HostConfig, HostShared};
use super::slot::SlotState;
use super::spec::PluginSpec;

/// One plugin as the host tracks it.
struct Slot {
    /// Its name.
    name: String,
    /// How it is started (for status output).
    spec: PluginSpec,
    /// Its supervisor actor.
    addr: Addr<PluginActor>,
    /// Its published state.
    state: watch::Receiver<SlotState>,
    /// The kind it last announced (guessed from the executable's name before that).
    kind: Arc<Mutex<PeerKind>>,
    /// How often it was restarted after dying (counted by its actor).
    restarts: Arc<AtomicU32>,
}

/// A plugin's status for `oxibot tools list` and `oxibot status`.
#[derive(Debug, Clone)]
pub struct PluginStatus {
    /// Its name.
    pub name: String,
    /// The name it announced in its last `hello`, when that differs from `name` (a plugin
    /// configured without a name is named after its command, e.g. `python3`, until then).
    pub announced: Option<String>,
    /// `Tool` or `Channel`, as it last announced itself (before its first start: guessed
    /// from the executable's name).
    pub kind: PeerKind,
    /// `running`, `starting`, `restarting`, `failed` or `stopped`.
    pub state: &'static str,
    /// Why it is restarting or failed.
    pub reason: Option<String>,
    /// How often it was restarted after dying since the host started, including instances
    /// that died before their handshake.
    pub restarts: u32,
    /// Its process id while running.
    pub pid: Option<u32>,
    /// Names of its registered tools (while it runs).
    pub tools: Vec<String>,
    /// Tools it offered that are not registered, and why (an invalid name, a clash).
    pub refused: Vec<String>,
    /// The command line that starts it.
    pub command: String,
    /// Where it was found.
    pub origin: String,
    /// The line about its state its manifest carried while it runs (the MCP bridge: the
    /// revision its server speaks).
    pub detail: Option<String>,
}

/// Runs the plugins and routes calls to them. Must be created inside an actix `System`.
pub struct PluginHost {
    shared: Arc<HostShared>,
    /// The plugins, in precedence order; [`PluginHost::add`] and [`PluginHost::remove`] change
    /// it while the kernel runs (a channel enabled or disabled in the config).
    slots: RwLock<Vec<Slot>>,
    /// The precedence index the next added plugin gets (after every plugin so far).
    next_index: AtomicUsize,
}

impl PluginStatus {
    /// The name to show a person: the one the plugin announced, followed by the configured
    /// one in parentheses when they differ (`wordcount (python3)`).
    pub fn display_name(&self) -> String {
        match &self.announced {
            Some(announced) => format!("{announced} ({})", self.name),
            None => self.name.clone(),
        }
    }
}

impl PluginHost {
    /// Starts one supervised actor per plugin on the current arbiter.
    ///
    /// The current arbiter's thread must live as long as the plugins: the launcher ties each
    /// plugin to the thread that spawned it.
    pub fn start(specs: Vec<PluginSpec>, config: HostConfig) -> std::io::Result<PluginHost> {
        let events = Arc::new(EventBus::default());
        let registry = ToolRegistry::new(config.reserved.clone());
        let shared = Arc::new(HostShared { run_dir: RunDir::new(), config, registry, events });
        let count = specs.len();
        let slots = specs.into_iter().enumerate().map(|(index, spec)| start_slot(spec, index, &shared)).collect();
        Ok(PluginHost { shared, slots: RwLock::new(slots), next_index: AtomicUsize::new(count) })
    }

    /// Starts one more plugin while the kernel runs, after every other in precedence. Must be
    /// called inside the actix `System`, like [`PluginHost::start`].
    pub fn add(&self, spec: PluginSpec) -> Result<(), PluginError> {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        if slots.iter().any(|slot| slot.name == spec.name) {
            return Err(PluginError::AlreadyRunning { plugin: spec.name });
        }
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        tracing::info!(plugin = %spec.name, "starting plugin");
        slots.push(start_slot(spec, index, &self.shared));
        Ok(())
    }

    /// Stops one plugin for good and forgets it: goodbye, then its process is reaped (bounded
    /// wait); its tools are no longer offered. Returns `false` when no plugin has that name.
    pub async fn remove(&self, plugin: &str) -> bool {
        let removed = {
            let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
            let Some(position) = slots.iter().position(|slot| slot.name == plugin) else { return false };
            slots.remove(position)
        };
        tracing::info!(plugin, "stopping plugin");
        removed.addr.do_send(Shutdown);
        let mut state = removed.state.clone();
        let stopped = state.wait_for(|s| matches!(s, SlotState::Stopped | SlotState::Failed { .. }));
        let _ = tokio::time::timeout(STOP_LIMIT, stopped).await;
        self.shared.registry.release(plugin);
        true
    }

    /// The plugins, read-locked for a moment (never held across an await).
    fn slots(&self) -> RwLockReadGuard<'_, Vec<Slot>> {
        self.slots.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The queue of unsolicited plugin events, starting with those emitted since the host
    /// started (up to [`super::events::BACKLOG_LIMIT`]).
    ///
    /// There is one subscriber, the gateway: subscribing again ends the previous queue.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<PluginEvent> {
        self.shared.events.subscribe()
    }

    /// Queues `message` (an `Outbound`, `Delta`, `InboundAccepted` or `ApprovalRequest`) for a
    /// running channel.
    ///
    /// Fails at once, without waiting, when the channel is not running; the caller keeps the
    /// message and tries again after the channel's next `Ready` event. Queued is not delivered:
    /// an `Outbound` is delivered when its `Delivery` event says so.
    pub fn send(&self, plugin: &str, message: Message) -> Result<(), PluginError> {
        let slots = self.slots();
        let slot = slots
            .iter()
            .find(|slot| slot.name == plugin)
            .ok_or_else(|| PluginError::UnknownPlugin { plugin: plugin.to_owned() })?;
        if !matches!(
            message,
            Message::Outbound(_) | Message::Delta(_) | Message::InboundAccepted(_) | Message::ApprovalRequest(_)
        ) {
            return Err(PluginError::NotForChannel {
                plugin: plugin.to_owned(),
                message: super::wire::describe(&message).to_owned(),
            });
        }
        let conn = match &*slot.state.borrow() {
            SlotState::Ready { kind: PeerKind::Channel, conn, .. } => conn.clone(),
            SlotState::Ready { kind, .. } => {
                return Err(PluginError::NotAChannel { plugin: plugin.to_owned(), kind: String::from(kind.clone()) });
            }
            other => {
                return Err(PluginError::NotRunning { plugin: plugin.to_owned(), state: other.label().to_owned() });
            }
        };
        conn.try_send(&message)
    }

    /// Calls `tool`, waiting for its plugin to be ready if it is (re)starting.
    ///
    /// `timeout` overrides the tool's own timeout; it bounds the wait plus the call.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        context: CallContext,
        timeout: Option<Duration>,
    ) -> Result<ToolResult, PluginError> {
        let route = match self.shared.registry.route(tool) {
            Some(route) => route,
            None => {
                self.wait_settled(self.startup_limit()).await;
                self.shared.registry.route(tool).ok_or_else(|| self.unknown_tool(tool))?
            }
        };
        let timeout = timeout
            .or(route.spec.timeout_secs.map(Duration::from_secs))
            .unwrap_or(self.shared.config.default_call_timeout);
        let started = Instant::now();
        let mut slot = route.slot;
        // A read-only call that meets a dying instance is safe to run again on its
        // replacement; anything else might have had effects, so its error stands.
        let mut retry = route.spec.read_only.then(|| (arguments.clone(), context.clone()));
        let (mut arguments, mut context) = (arguments, context);
        loop {
            let conn = ready_connection(&route.plugin, &mut slot, timeout, started).await?;
            let remaining = timeout.saturating_sub(started.elapsed());
            match conn.call(tool, arguments, context, remaining).await {
                Err(PluginError::PluginClosed { .. }) if retry.is_some() => {
                    (arguments, context) = retry.take().unwrap_or_default();
                }
                outcome => return outcome,
            }
        }
    }

    /// The manifest entry of one tool, if registered.
    pub fn tool_spec(&self, tool: &str) -> Option<Arc<ToolSpec>> {
        self.shared.registry.route(tool).map(|route| route.spec)
    }

    /// Every registered tool.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.shared.registry.specs()
    }

    /// Every registered tool as one JSON array (cached until a plugin's tools change).
    pub fn tools_json(&self) -> Arc<str> {
        self.shared.registry.specs_json()
    }

    /// The status of every plugin, in discovery order.
    pub fn statuses(&self) -> Vec<PluginStatus> {
        self.slots().iter().map(|slot| status_of(slot, &self.shared.registry)).collect()
    }

    /// The longest any plugin may take to start: the handshake timeout, or longer for a
    /// plugin whose spec allows more.
    pub fn startup_limit(&self) -> Duration {
        let longest = self.slots().iter().filter_map(|slot| slot.spec.startup_timeout).max();
        longest.map_or(self.shared.config.handshake_timeout, |t| t.max(self.shared.config.handshake_timeout))
    }

    /// Waits until every plugin is running, failed or stopped, or `limit` passes.
    pub async fn wait_settled(&self, limit: Duration) {
        let states: Vec<_> = self.slots().iter().map(|slot| slot.state.clone()).collect();
        let waits = states.into_iter().map(|mut state| async move {
            let _ = state.wait_for(SlotState::is_settled).await;
        });
        let _ = tokio::time::timeout(limit, futures_join_all(waits)).await;
    }

    /// Says goodbye to every plugin and waits (bounded) until their processes are gone.
    pub async fn shutdown(&self) {
        let states: Vec<_> = self
            .slots()
            .iter()
            .map(|slot| {
                slot.addr.do_send(Shutdown);
                slot.state.clone()
            })
            .collect();
        let waits = states.into_iter().map(|mut state| async move {
            let _ = state.wait_for(|s| matches!(s, SlotState::Stopped | SlotState::Failed { .. })).await;
        });
        let _ = tokio::time::timeout(STOP_LIMIT, futures_join_all(waits)).await;
    }

    fn unknown_tool(&self, tool: &str) -> PluginError {
        let hint = match self.shared.registry.suggest(tool) {
            Some(name) => format!(" (did you mean '{name}'?)"),
            None => {
                let names: Vec<String> = self.tools().into_iter().map(|t| t.name).collect();
                if names.is_empty() {
                    " (no tools are available)".to_owned()
                } else {
                    format!(" (available: {})", names.join(", "))
                }
            }
        };
        PluginError::UnknownTool { tool: tool.to_owned(), hint }
    }
}

/// How long a stopping plugin gets to say goodbye and exit before the kernel moves on.
const STOP_LIMIT: Duration = Duration::from_secs(2);

/// Starts the supervised actor of one plugin with precedence `index`.
fn start_slot(spec: PluginSpec, index: usize, shared: &Arc<HostShared>) -> Slot {
    let (state_tx, state) = watch::channel(SlotState::Starting);
    let state_tx = Arc::new(state_tx);
    let kind = Arc::new(Mutex::new(spec.expected_kind()));
    let restarts = Arc::new(AtomicU32::new(0));
    let actor = PluginActor::new(spec.clone(), index, shared.clone(), state_tx, kind.clone(), restarts.clone());
    let addr = Supervisor::start(move |_| actor);
    Slot { name: spec.name.clone(), spec, addr, state, kind, restarts }
}

/// Waits for a ready instance whose connection is not already going down.
async fn ready_connection(
    plugin: &str,
    slot: &mut watch::Receiver<SlotState>,
    timeout: Duration,
    started: Instant,
) -> Result<Connection, PluginError> {
    // The common case, without timers: the plugin is up and healthy.
    match &*slot.borrow_and_update() {
        SlotState::Ready { conn, .. } if !conn.is_closing() => return Ok(conn.clone()),
        SlotState::Idle { wake, .. } => wake.do_send(super::slot::Wake),
        _ => {}
    }
    loop {
        let remaining = timeout.saturating_sub(started.elapsed());
        let conn = wait_ready(plugin, slot, remaining).await?;
        if !conn.is_closing() {
            return Ok(conn);
        }
        // The instance is going down; wait for the actor to publish what comes next.
        if tokio::time::timeout(remaining, slot.changed()).await.is_err() {
            return Err(PluginError::NotReady {
                plugin: plugin.to_owned(),
                state: "restarting".into(),
                waited: timeout,
            });
        }
    }
}

/// Waits for the plugin to be ready and returns its connection.
async fn wait_ready(
    plugin: &str,
    slot: &mut watch::Receiver<SlotState>,
    limit: Duration,
) -> Result<Connection, PluginError> {
    let wait = slot.wait_for(|s| matches!(s, SlotState::Ready { .. } | SlotState::Failed { .. } | SlotState::Stopped));
    let timed_out = tokio::time::timeout(limit, wait).await.is_err();
    let state = slot.borrow().clone();
    match state {
        SlotState::Ready { conn, .. } => Ok(conn),
        SlotState::Failed { reason } => Err(PluginError::Failed { plugin: plugin.to_owned(), reason }),
        SlotState::Stopped => Err(PluginError::ShuttingDown),
        other if timed_out => {
            Err(PluginError::NotReady { plugin: plugin.to_owned(), state: other.label().to_owned(), waited: limit })
        }
        _ => Err(PluginError::ShuttingDown),
    }
}

fn status_of(slot: &Slot, registry: &ToolRegistry) -> PluginStatus {
    let state = slot.state.borrow().clone();
    let (pid, tools, reason) = match &state {
        SlotState::Ready { pid, .. } => (Some(*pid), registry.tools_of(&slot.name), None),
        SlotState::Idle { .. } => (None, registry.tools_of(&slot.name), None),
        SlotState::Restarting { reason } | SlotState::Failed { reason } => (None, Vec::new(), Some(reason.clone())),
        SlotState::Starting | SlotState::Stopped => (None, Vec::new(), None),
    };
    let announced = match &state {
        SlotState::Ready { announced, .. } | SlotState::Idle { announced, .. } if *announced != slot.name => {
            Some(announced.clone())
        }
        _ => None,
    };
    PluginStatus {
        name: slot.name.clone(),
        announced,
        kind: slot.kind.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        state: state.label(),
        reason,
        restarts: slot.restarts.load(Ordering::Relaxed),
        pid,
        tools,
        refused: registry.refused(&slot.name),
        command: slot.spec.command_line(),
        origin: slot.spec.origin.to_string(),
        detail: match &state {
            SlotState::Ready { detail, .. } => detail.clone(),
            _ => None,
        },
    }
}

/// Awaits all futures (a tiny join_all, to avoid a dependency for it).
async fn futures_join_all<F: std::future::Future<Output = ()>>(futures: impl IntoIterator<Item = F>) {
    for future in futures {
        future.await;
    }
}

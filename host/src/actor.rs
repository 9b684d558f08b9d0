//! `PluginActor`: owns one plugin's lifecycle — spawn, handshake, serve, die, restart.
//!
//! The actor runs one *instance* at a time as a future on its context. When the instance
//! ends (the process died, hung, or broke the protocol), the actor consults its
//! [`RestartTracker`]: it either stops itself so actix's `Supervisor` restarts it — the
//! `restarting` hook publishes the new state and `started` spawns a fresh instance after the
//! backoff — or it gives up and stays alive in the `Failed` state so status queries still see
//! it. Handlers never panic: a panic would end the task that runs both the actor and its
//! `Supervisor`, so nothing would be left to restart the plugin.
//!
//! A tool plugin whose manifest the host remembers (it announced `static_manifest` when it
//! last ran, see [`super::manifest_cache`]) is not started at first: the actor registers the
//! remembered tools, publishes [`SlotState::Idle`], and starts the plugin when a call sends
//! [`Wake`]. From then on it is supervised like any other.
//!
//! A plugin that failed to start lately, with nothing about it changed since, is not started
//! at all when the host skips broken plugins (see [`super::broken`]): the actor reports it
//! failed with the remembered reason. One given up after failing to start is remembered.
//!
//! Tool and channel plugins share this path. An instance emits [`PluginEvent::Ready`] once it
//! is published as ready and [`PluginEvent::Down`] once its process is gone and its reader has
//! stopped, so no event of an instance follows its `Down`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix::prelude::*;
use oxibot_proto::{Feature, Goodbye, Message as Wire, PeerKind, ToolSpec};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::claims::Claimant;
use super::connection::{CloseCause, Connection, ConnectionTasks};
use super::error::{PluginError, StartError};
use super::events::PluginEvent;
use super::handshake;
use super::manifest_cache::Remembered;
use super::policy::{RestartTracker, Verdict};
use super::process::{Launch, PluginProcess};
use super::rundir::random_hex;
use super::shared::HostShared;
use super::slot::{Evict, SlotState, Wake};
use super::spec::{Origin, PluginSpec};

/// How an instance ended.
enum InstanceEnd {
    /// It never finished starting.
    StartFailed(StartError),
    /// Its tools clash with a plugin of higher precedence; restarting cannot help.
    Conflict(String),
    /// It served for a while, then died.
    Died {
        /// What the kernel noticed first.
        cause: CloseCause,
        /// The exit status as text.
        status: String,
        /// How long it ran.
        ran_for: Duration,
    },
    /// The host asked it to stop.
    Stopped,
}

/// Supervises one plugin process.
pub struct PluginActor {
    /// How to start the plugin.
    spec: Arc<PluginSpec>,
    /// Precedence in discovery order (lower wins a tool-name clash).
    index: usize,
    /// Run directory, policy and tool registry shared by all plugin actors.
    shared: Arc<HostShared>,
    /// Published state; callers wait on it.
    state: Arc<watch::Sender<SlotState>>,
    /// The kind the plugin last announced, kept across instances for status output.
    kind: Arc<Mutex<PeerKind>>,
    /// Restart history, kept across actor restarts.
    tracker: RestartTracker,
    /// Restarts after a death since the host started (also of instances that died before
    /// their handshake), shared with the host's status.
    restarts: Arc<AtomicU32>,
    /// Delay before the next instance starts.
    next_delay: Duration,
    /// Stops the running instance (sends it `goodbye`); `None` when none runs.
    stop_instance: Option<oneshot::Sender<()>>,
    /// Set once the plugin must not be started again.
    finished: bool,
    /// Set once an instance was launched: an actor restarted by its supervisor never idles.
    launched: bool,
    /// Whether the last instance never finished starting: a plugin given up then is
    /// remembered as broken.
    start_failed: bool,
}

impl PluginActor {
    /// A supervisor for `spec`; start it with `Supervisor::start`. `kind` is updated from each
    /// instance's `hello`.
    pub fn new(
        spec: PluginSpec,
        index: usize,
        shared: Arc<HostShared>,
        state: Arc<watch::Sender<SlotState>>,
        kind: Arc<Mutex<PeerKind>>,
        restarts: Arc<AtomicU32>,
    ) -> PluginActor {
        PluginActor {
            spec: Arc::new(spec),
            index,
            shared,
            state,
            kind,
            tracker: RestartTracker::default(),
            restarts,
            next_delay: Duration::ZERO,
            stop_instance: None,
            finished: false,
            launched: false,
            start_failed: false,
        }
    }

    /// Offers the remembered tools without starting the plugin, if the host remembers them
    /// for exactly this program and they can be registered. Returns whether it idles.
    fn idle_if_remembered(&mut self, ctx: &mut Context<Self>) -> bool {
        if self.spec.expected_kind() != PeerKind::Tool {
            return false;
        }
        let Some(remembered) = self.shared.config.manifest_cache.as_ref().and_then(|cache| cache.lookup(&self.spec))
        else {
            return false;
        };
        let evict = ctx.address().recipient();
        if self
            .shared
            .registry
            .claim(&claimant(&self.spec, self.index), &remembered.tools, &self.state, &evict)
            .is_err()
        {
            // A clash: starting it reports the conflict the usual way.
            return false;
        }
        *self.kind.lock().unwrap_or_else(PoisonError::into_inner) = PeerKind::Tool;
        tracing::debug!(plugin = %self.spec.name, tools = remembered.tools.len(), "plugin idle until its first call");
        self.state.send_replace(SlotState::Idle { wake: ctx.address().recipient(), announced: remembered.announced });
        true
    }

    /// Reports the plugin failed without starting it, in one line, when it failed to start
    /// lately and nothing about it changed since. Returns whether it was skipped.
    fn skip_if_broken(&mut self) -> bool {
        let Some(failure) = self.shared.config.broken.as_ref().and_then(|broken| broken.skipped(&self.spec)) else {
            return false;
        };
        let reason = super::broken::skipped_reason(&failure);
        tracing::warn!(plugin = %self.spec.name, "{reason}");
        self.finished = true;
        self.state.send_replace(SlotState::Failed { reason });
        true
    }

    fn launch_instance(&mut self, ctx: &mut Context<Self>) {
        self.launched = true;
        let (stop_tx, stop_rx) = oneshot::channel();
        self.stop_instance = Some(stop_tx);
        let instance = Instance {
            spec: self.spec.clone(),
            index: self.index,
            shared: self.shared.clone(),
            state: self.state.clone(),
            kind: self.kind.clone(),
            evict: ctx.address().recipient(),
        };
        ctx.spawn(instance.run(stop_rx).into_actor(self).map(|end, actor, ctx| actor.instance_ended(end, ctx)));
    }

    fn instance_ended(&mut self, end: InstanceEnd, ctx: &mut Context<Self>) {
        self.stop_instance = None;
        let (reason, ran_for) = match end {
            InstanceEnd::Stopped => {
                // An evicted plugin stays reported as failed, with the clash as its reason.
                if !matches!(*self.state.borrow(), SlotState::Failed { .. }) {
                    self.finish(SlotState::Stopped, ctx);
                }
                return;
            }
            InstanceEnd::Conflict(reason) => {
                self.finish(SlotState::Failed { reason }, ctx);
                return;
            }
            InstanceEnd::StartFailed(error) => {
                self.start_failed = true;
                (format!("failed to start: {error}"), Duration::ZERO)
            }
            InstanceEnd::Died { cause, status, ran_for } => {
                self.start_failed = false;
                (format!("{cause}; {status}"), ran_for)
            }
        };
        if self.finished {
            return;
        }
        match self.tracker.record_death(&self.shared.config.restart, ran_for, Instant::now()) {
            Verdict::RestartAfter(delay) => {
                tracing::warn!(plugin = %self.spec.name, %reason, delay_ms = delay.as_millis() as u64, "plugin died; restarting");
                self.next_delay = delay;
                self.restarts.fetch_add(1, Ordering::Relaxed);
                self.state.send_replace(SlotState::Restarting { reason });
                // A dead instance is unrecoverable actor state: stop, and let the Supervisor
                // rebuild us through `restarting` and `started`.
                ctx.stop();
            }
            Verdict::GiveUp { restarts } => {
                let reason = format!(
                    "restarted {restarts} times within {}s; last failure: {reason}",
                    self.shared.config.restart.window.as_secs()
                );
                tracing::error!(plugin = %self.spec.name, %reason, "plugin failed; not restarting it");
                if self.start_failed
                    && let Some(broken) = &self.shared.config.broken
                {
                    broken.record(&self.spec, &reason);
                }
                self.finish(SlotState::Failed { reason }, ctx);
            }
        }
    }

    fn finish(&mut self, state: SlotState, _ctx: &mut Context<Self>) {
        self.finished = true;
        self.state.send_replace(state);
    }
}

impl Actor for PluginActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.finished {
            return;
        }
        if !self.launched && (self.skip_if_broken() || self.idle_if_remembered(ctx)) {
            return;
        }
        let delay = std::mem::take(&mut self.next_delay);
        if delay.is_zero() {
            self.launch_instance(ctx);
        } else {
            ctx.run_later(delay, |actor, ctx| actor.launch_instance(ctx));
        }
    }
}

impl Supervised for PluginActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        self.stop_instance = None;
    }
}

/// Asks the plugin to stop for good (kernel shutdown). Resolves once it is stopped.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<Shutdown> for PluginActor {
    type Result = ();

    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) {
        match self.stop_instance.take() {
            Some(stop) => {
                // The instance future sends goodbye, reaps the process and reports Stopped.
                let _ = stop.send(());
            }
            None => self.finish(SlotState::Stopped, ctx),
        }
        self.finished = true;
    }
}

impl Handler<Wake> for PluginActor {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        if self.finished || !matches!(*self.state.borrow(), SlotState::Idle { .. }) {
            return;
        }
        tracing::debug!(plugin = %self.spec.name, "first call: starting the plugin");
        self.state.send_replace(SlotState::Starting);
        self.launch_instance(ctx);
    }
}

impl Handler<Evict> for PluginActor {
    type Result = ();

    fn handle(&mut self, evict: Evict, ctx: &mut Context<Self>) {
        tracing::error!(plugin = %self.spec.name, reason = %evict.reason, "plugin disabled");
        if let Some(stop) = self.stop_instance.take() {
            let _ = stop.send(());
        }
        self.finish(SlotState::Failed { reason: evict.reason }, ctx);
    }
}

/// Everything one instance needs, moved into its future.
struct Instance {
    spec: Arc<PluginSpec>,
    index: usize,
    shared: Arc<HostShared>,
    state: Arc<watch::Sender<SlotState>>,
    kind: Arc<Mutex<PeerKind>>,
    /// Where the registry sends `Evict` if a plugin of higher precedence takes a tool name.
    evict: Recipient<Evict>,
}

impl Instance {
    async fn run(self, stop: oneshot::Receiver<()>) -> InstanceEnd {
        let (mut process, handshaken) = match self.start().await {
            Ok(started) => started,
            Err(error) => return InstanceEnd::StartFailed(error),
        };
        let pid = process.pid();
        let tools = handshaken.manifest.tools.clone();
        let (kind, features) = (handshaken.hello.kind.clone(), handshaken.hello.features.clone());
        *self.kind.lock().unwrap_or_else(PoisonError::into_inner) = kind.clone();
        match self.shared.registry.claim(&claimant(&self.spec, self.index), &tools, &self.state, &self.evict) {
            Ok(refused) => {
                for reason in refused {
                    tracing::warn!(plugin = %self.spec.name, %reason, "tool not registered");
                }
            }
            Err(clash) => {
                let _ = process.kill_and_reap(Duration::from_millis(200)).await;
                return InstanceEnd::Conflict(clash);
            }
        }
        self.remember(&handshaken.hello.name, &features, &tools);
        if let Some(broken) = &self.shared.config.broken {
            broken.forget(&self.spec);
        }
        let channel_events = (kind == PeerKind::Channel).then(|| self.shared.events.clone());
        let (conn, tasks) = Connection::start(
            &self.spec.name,
            handshaken.stream,
            handshaken.reader,
            channel_events,
            process.tail().clone(),
        );
        tracing::info!(plugin = %self.spec.name, pid, kind = %String::from(kind.clone()), tools = tools.len(), "plugin ready");
        self.state.send_replace(SlotState::Ready {
            conn: conn.clone(),
            pid,
            tools,
            kind: kind.clone(),
            features: features.clone(),
            announced: handshaken.hello.name.clone(),
            detail: handshaken.manifest.detail.clone(),
        });
        // The reader task runs on this single-threaded arbiter and cannot run before this
        // future yields, so `Ready` precedes the instance's first inbound event.
        self.shared.events.emit(PluginEvent::Ready { plugin: self.spec.name.clone(), kind, features });
        let started = Instant::now();
        let (cause, reader) = watch_instance(tasks, &mut process, stop).await;
        let status = settle_process(&mut process, &cause, &conn).await;
        let ran_for = started.elapsed();
        let cause = prefer_goodbye(cause, stop_reader(reader).await);
        self.shared
            .events
            .emit(PluginEvent::Down { plugin: self.spec.name.clone(), reason: format!("{cause}; {status}") });
        if cause == CloseCause::Shutdown {
            conn.fail_all(PluginError::ShuttingDown);
            return InstanceEnd::Stopped;
        }
        let error = PluginError::PluginClosed {
            plugin: self.spec.name.clone(),
            cause: cause.to_string(),
            status: status.clone(),
            stderr_tail: process.tail().lines(),
        };
        conn.fail_all(error);
        InstanceEnd::Died { cause, status, ran_for }
    }

    /// Keeps what a `static_manifest` plugin announced for its next start, and forgets what a
    /// plugin that stopped announcing it said before.
    fn remember(&self, announced: &str, features: &[Feature], tools: &[ToolSpec]) {
        let Some(cache) = &self.shared.config.manifest_cache else { return };
        if features.contains(&Feature::StaticManifest) {
            cache.store(&self.spec, Remembered { announced: announced.to_owned(), tools: tools.to_vec() });
        } else {
            cache.forget(&self.spec);
        }
    }

    /// Listens, spawns, and completes the handshake.
    async fn start(&self) -> Result<(PluginProcess, handshake::Handshaken), StartError> {
        let socket = self
            .shared
            .run_dir
            .socket_path(&self.spec.name)
            .map_err(|source| StartError::Listen { path: std::env::temp_dir().display().to_string(), source })?;
        let token = random_hex(16).map_err(|source| StartError::Listen { path: "/dev/urandom".into(), source })?;
        let listener = handshake::listen(&socket)?;
        let launch = Launch { launcher: self.shared.config.launcher.as_deref(), socket: &socket, token: &token };
        let mut process = PluginProcess::spawn(&self.spec, &launch)?;
        let limit = self.spec.startup_timeout.unwrap_or(self.shared.config.handshake_timeout);
        match handshake::accept(listener, &socket, &mut process, &token, limit).await {
            Ok(handshaken) => Ok((process, handshaken)),
            Err(error) => {
                let _ = process.kill_and_reap(Duration::from_millis(200)).await;
                Err(error)
            }
        }
    }
}

/// Waits for the first sign that the instance is over. Returns the cause and the reader
/// task if it is still running.
/// How the registry sees the plugin of `spec` when it claims tool names.
fn claimant(spec: &PluginSpec, index: usize) -> Claimant<'_> {
    Claimant { plugin: &spec.name, index, bundled: spec.origin == Origin::Bundled, replaces: &spec.replaces }
}

async fn watch_instance(
    mut tasks: ConnectionTasks,
    process: &mut PluginProcess,
    stop: oneshot::Receiver<()>,
) -> (CloseCause, Option<JoinHandle<CloseCause>>) {
    let cause = tokio::select! {
        cause = &mut tasks.reader => {
            return (cause.unwrap_or_else(|e| CloseCause::Violation(format!("reader task failed: {e}"))), None);
        }
        Some(cause) = tasks.trouble.recv() => cause,
        _ = process.wait() => CloseCause::Exited,
        Ok(()) = stop => CloseCause::Shutdown,
    };
    (cause, Some(tasks.reader))
}

/// Lets the reader drain what the dead process sent (its socket ends with the process), then
/// stops it, so nothing of this instance is routed after its `Down`. Returns the reader's
/// cause if it ended on its own.
async fn stop_reader(reader: Option<JoinHandle<CloseCause>>) -> Option<CloseCause> {
    let mut reader = reader?;
    match tokio::time::timeout(Duration::from_millis(200), &mut reader).await {
        Ok(ended) => ended.ok(),
        Err(_) => {
            reader.abort();
            let _ = reader.await;
            None
        }
    }
}

/// A process seen exiting before its `goodbye` was read: the goodbye says more.
fn prefer_goodbye(cause: CloseCause, reader: Option<CloseCause>) -> CloseCause {
    match (cause, reader) {
        (CloseCause::Exited, Some(said @ CloseCause::Closed { goodbye: Some(_) })) => said,
        (cause, _) => cause,
    }
}

/// Makes sure the process is gone and returns its exit status as text.
async fn settle_process(process: &mut PluginProcess, cause: &CloseCause, conn: &Connection) -> String {
    match cause {
        CloseCause::Closed { .. } | CloseCause::Exited => {
            let status = process.reap(Duration::from_millis(200)).await;
            if status == "still running" {
                return process.kill_and_reap(Duration::from_millis(500)).await;
            }
            status
        }
        CloseCause::Shutdown => {
            conn.send(&Wire::Goodbye(Goodbye { reason: "the kernel is shutting down".into() }));
            let status = process.reap(Duration::from_millis(300)).await;
            if status == "still running" {
                return process.kill_and_reap(Duration::from_millis(500)).await;
            }
            status
        }
        CloseCause::Violation(_) | CloseCause::Hung { .. } => process.kill_and_reap(Duration::from_millis(500)).await,
    }
}

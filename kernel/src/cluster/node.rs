//! `Node`: this kernel's connection to the cluster. The NATS client runs on a small runtime of
//! its own (one worker thread), so a caller on any runtime — actix's arbiters, a test's, or a
//! plain thread through [`Node::block_on`] — can use it, and it outlives no caller's runtime.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use tokio::sync::mpsc;

use super::claim::{Claim, ClaimState};
use super::error::ClusterError;
use super::keys::{
    CHANNELS_BUCKET, FIRED_BUCKET, LEADERS_BUCKET, NODES_BUCKET, SCHEDULER_KEY, SESSIONS_BUCKET, decode_key,
    firing_key, session_key,
};
use super::streams::{self, INBOUND_STREAM, OUTBOUND_STREAM, Reading, Taken};
use crate::config::cluster::ClusterConfig;

/// Copies of each bucket a clustered NATS keeps (JetStream replicas).
const CLUSTERED_REPLICAS: usize = 3;

/// How long a cron firing is remembered: longer than any failover takes.
const FIRED_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// How long a session's message handed to its owner may stay unacknowledged before it is
/// delivered again (its owner died between taking it and writing it to the session's inbox).
const SESSION_ACK_WAIT: Duration = Duration::from_secs(5);

/// How long a reply handed to its channel's owner may go without word from it (its reader
/// says "still delivering" every third of this while the channel takes its time) before it is
/// delivered again: the owner died.
const CHANNEL_ACK_WAIT: Duration = Duration::from_secs(5);

/// How long a session's consumer stays once no kernel reads it, at least: longer than a
/// takeover, and than any pause of an owner's pulls (the TTL counts too, see
/// [`session_reader_idle`]).
const SESSION_READER_IDLE: Duration = Duration::from_secs(5);

/// How long connecting to the first server may take before the kernel gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// This kernel's place in the cluster.
pub struct Node {
    /// `cluster.node`: written as the value of every key this kernel owns.
    name: String,
    /// How long ownership lasts without renewal (`cluster.ttlSeconds`).
    ttl: Duration,
    /// The runtime the client and every renewal run on; shut down in the background on drop
    /// (dropping it inside another runtime would panic).
    runtime: Option<tokio::runtime::Runtime>,
    /// Session ownership: one key per session.
    sessions: kv::Store,
    /// Leader keys (`scheduler`).
    leaders: kv::Store,
    /// Channel ownership: one key per channel that runs on one kernel at a time.
    channels: kv::Store,
    /// Cron firings (job and due time), kept for [`FIRED_WINDOW`].
    fired: kv::Store,
    /// The live nodes: one key per node, what it runs as its value.
    nodes: kv::Store,
    /// Publishes to the streams.
    jetstream: jetstream::Context,
    /// Channel messages on their way to their session's owner.
    inbound: jetstream::stream::Stream,
    /// Replies on their way to their channel's owner.
    outbound: jetstream::stream::Stream,
    /// The connection: it reconnects by itself, with growing waits, whenever it is lost.
    client: async_nats::Client,
    /// The configured servers, for the status.
    servers: String,
    /// When the sessions' ownership bucket was made (ns since the Unix epoch): the first half
    /// of a fencing token, so the claims of a bucket made anew outrank the old bucket's.
    epoch: u64,
    /// The sessions this kernel claimed, for the fence of the session store; a claim that was
    /// dropped is gone from here too.
    owned: Mutex<HashMap<String, Weak<ClaimState>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("name", &self.name).field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl Node {
    /// Connects to `config.nats` and opens (or creates) the buckets; fails when no server
    /// answers or JetStream is off.
    pub async fn connect(config: &ClusterConfig) -> Result<Arc<Node>, ClusterError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("oxibot-cluster")
            .enable_all()
            .build()
            .map_err(|error| ClusterError::Runtime(format!("cannot start: {error}")))?;
        let ttl = Duration::from_secs(config.ttl_seconds);
        let (servers, name) =
            (config.servers().into_iter().map(str::to_owned).collect::<Vec<_>>(), config.node.clone());
        let opened = match runtime.spawn(open_buckets(servers, name.clone(), ttl)).await {
            Ok(opened) => opened,
            Err(error) => Err(ClusterError::Runtime(format!("failed while connecting: {error}"))),
        };
        let Buckets { client, sessions, leaders, channels, fired, nodes, jetstream, inbound, outbound } = match opened {
            Ok(buckets) => buckets,
            Err(error) => {
                // Dropping a runtime inside another one would panic.
                runtime.shutdown_background();
                return Err(error);
            }
        };
        tracing::info!(node = %name, servers = %config.nats, ttl_s = config.ttl_seconds, "joined the cluster");
        let servers = config.nats.clone();
        let owned = Mutex::new(HashMap::new());
        let created = sessions.stream.cached_info().created.unix_timestamp_nanos();
        let epoch = u64::try_from(created).unwrap_or(0);
        let runtime = Some(runtime);
        Ok(Arc::new(Node {
            name,
            ttl,
            runtime,
            sessions,
            leaders,
            channels,
            fired,
            nodes,
            jetstream,
            inbound,
            outbound,
            client,
            servers,
            epoch,
            owned,
        }))
    }

    /// This kernel's node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long ownership lasts without renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The configured NATS servers (`cluster.nats`).
    pub fn servers(&self) -> &str {
        &self.servers
    }

    /// The connection's state: `connected`, `disconnected` (the client is reconnecting) or
    /// `connecting`.
    pub fn connection(&self) -> &'static str {
        match self.client.connection_state() {
            async_nats::connection::State::Connected => "connected",
            async_nats::connection::State::Disconnected => "disconnected",
            async_nats::connection::State::Pending => "connecting",
        }
    }

    /// Takes session `key` for this kernel if no kernel owns it; `None` when another does.
    /// The claim renews itself until it is released, dropped, or lost.
    pub async fn claim_session(&self, key: &str) -> Result<Option<Claim>, ClusterError> {
        let claim = self.claim(self.sessions.clone(), session_key(key)).await?;
        if let Some(claim) = &claim {
            let mut owned = self.owned.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            owned.retain(|_, state| state.strong_count() > 0);
            owned.insert(key.to_owned(), claim.state());
        }
        Ok(claim)
    }

    /// The node that owns session `key` now, if any.
    pub async fn session_owner(&self, key: &str) -> Result<Option<String>, ClusterError> {
        self.owner(self.sessions.clone(), session_key(key)).await
    }

    /// Takes channel `channel` for this kernel (its plugin runs here while the claim holds)
    /// if no kernel owns it; `None` when another does.
    pub async fn claim_channel(&self, channel: &str) -> Result<Option<Claim>, ClusterError> {
        self.claim(self.channels.clone(), session_key(channel)).await
    }

    /// The node that runs channel `channel` now, if any.
    pub async fn channel_owner(&self, channel: &str) -> Result<Option<String>, ClusterError> {
        self.owner(self.channels.clone(), session_key(channel)).await
    }

    /// Publishes a message of session `key` (message id `id`: a second one within the
    /// de-duplication window is dropped) and waits until JetStream stored it.
    pub async fn publish_inbound(&self, key: &str, id: &str, payload: Vec<u8>) -> Result<(), ClusterError> {
        let (jetstream, subject, id) = (self.jetstream.clone(), streams::inbound_subject(key), id.to_owned());
        let published = self.spawn(async move { streams::publish(&jetstream, subject, &id, payload).await })?;
        published.await.map_err(|error| ClusterError::Runtime(format!("failed while publishing: {error}")))?
    }

    /// Publishes a reply for channel `channel` (message id `id`) and waits until JetStream stored it.
    pub async fn publish_outbound(&self, channel: &str, id: &str, payload: Vec<u8>) -> Result<(), ClusterError> {
        let (jetstream, subject, id) = (self.jetstream.clone(), streams::outbound_subject(channel), id.to_owned());
        let published = self.spawn(async move { streams::publish(&jetstream, subject, &id, payload).await })?;
        published.await.map_err(|error| ClusterError::Runtime(format!("failed while publishing: {error}")))?
    }

    /// Hands session `key`'s messages, one at a time and in order, to `to` while this kernel
    /// owns the session (the task ends when it no longer does, or when aborted).
    pub fn consume_session(
        self: &Arc<Node>,
        key: &str,
        to: mpsc::UnboundedSender<Taken>,
    ) -> Result<tokio::task::JoinHandle<()>, ClusterError> {
        let reading = Reading {
            name: session_reader_name(key),
            filter: streams::inbound_subject(key),
            ack_wait: self.ttl.max(SESSION_ACK_WAIT),
            inactive_after: Some(session_reader_idle(self.ttl)),
        };
        let (node, key, stream) = (Arc::downgrade(self), key.to_owned(), self.inbound.clone());
        let owns = move || node.upgrade().is_some_and(|node| node.fencing_token(&key).is_some());
        self.spawn(streams::consume(stream, reading, to, owns))
    }

    /// Whether the inbound stream keeps a consumer for session `key` (one is removed by the
    /// server once no kernel read it for [`session_reader_idle`]).
    pub async fn has_session_reader(&self, key: &str) -> Result<bool, ClusterError> {
        let (stream, name) = (self.inbound.clone(), session_reader_name(key));
        let asked = self.spawn(async move { streams::has_consumer(&stream, &name).await })?;
        asked.await.map_err(|error| ClusterError::Runtime(format!("failed while asking: {error}")))?
    }

    /// How long a session's consumer stays after its last read with this cluster's TTL.
    pub fn session_reader_idle(&self) -> Duration {
        session_reader_idle(self.ttl)
    }

    /// Hands channel `channel`'s replies, one at a time, to `to` while `keep()` holds.
    pub fn consume_channel(
        &self,
        channel: &str,
        to: mpsc::UnboundedSender<Taken>,
        keep: impl Fn() -> bool + Send + 'static,
    ) -> Result<tokio::task::JoinHandle<()>, ClusterError> {
        let reading = Reading {
            name: format!("out-{}", session_key(channel)),
            filter: streams::outbound_subject(channel),
            ack_wait: CHANNEL_ACK_WAIT,
            inactive_after: None,
        };
        self.spawn(streams::consume(self.outbound.clone(), reading, to, keep))
    }

    /// The sessions with messages in the inbound stream that no consumer acknowledged yet.
    pub async fn sessions_waiting(&self) -> Result<Vec<String>, ClusterError> {
        let stream = self.inbound.clone();
        let listed = self.spawn(async move { streams::waiting_subjects(&stream).await })?;
        let subjects =
            listed.await.map_err(|error| ClusterError::Runtime(format!("failed while listing: {error}")))??;
        Ok(subjects.iter().filter_map(|subject| decode_key(subject.strip_prefix("oxibot.in.")?)).collect())
    }

    /// Becomes the one scheduler of cron jobs and the heartbeat if no kernel is; `None` when
    /// another kernel leads.
    pub async fn try_lead_scheduler(&self) -> Result<Option<Claim>, ClusterError> {
        self.claim(self.leaders.clone(), SCHEDULER_KEY.to_owned()).await
    }

    /// Gives up the scheduler's lead if this kernel's claim of it still has `revision`.
    pub(crate) async fn resign_scheduler(&self, revision: u64) -> Result<(), ClusterError> {
        let leaders = self.leaders.clone();
        let deleted = self.spawn(async move { leaders.delete_expect_revision(SCHEDULER_KEY, Some(revision)).await })?;
        deleted
            .await
            .map_err(|error| ClusterError::Runtime(format!("failed while resigning: {error}")))?
            .map_err(|error| ClusterError::request("resigning the scheduler's lead", error))
    }

    /// Records that this kernel fires job `job` due at `due_ms`; `false` when a kernel already
    /// did (a scheduler before a failover), so the job is not run again for that due time.
    pub async fn first_firing(&self, job: &str, due_ms: i64) -> Result<bool, ClusterError> {
        let (fired, key, node) = (self.fired.clone(), firing_key(job, due_ms), bytes::Bytes::from(self.name.clone()));
        let created = self.spawn(async move { fired.create(&key, node).await })?;
        match created
            .await
            .map_err(|error| ClusterError::Runtime(format!("failed while recording a firing: {error}")))?
        {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(ClusterError::request("recording a cron firing", error)),
        }
    }

    /// The node that schedules now, if any.
    pub async fn scheduler(&self) -> Result<Option<String>, ClusterError> {
        self.owner(self.leaders.clone(), SCHEDULER_KEY.to_owned()).await
    }

    /// Says the cluster this kernel is alive and what it runs (`record`, JSON); it drops out
    /// of [`Node::members`] a TTL after it last said so.
    pub async fn announce(&self, record: Vec<u8>) -> Result<(), ClusterError> {
        let (nodes, key) = (self.nodes.clone(), session_key(&self.name));
        let put = self.spawn(async move { nodes.put(key, record.into()).await })?;
        put.await
            .map_err(|error| ClusterError::Runtime(format!("failed while announcing: {error}")))?
            .map_err(|error| ClusterError::request("announcing this node", error))?;
        Ok(())
    }

    /// The changes to the list of nodes from now on (on the cluster's runtime).
    pub(crate) async fn watch_nodes(&self) -> Result<kv::Watch, ClusterError> {
        self.nodes.watch_all().await.map_err(|error| ClusterError::request("watching the nodes", error))
    }

    /// Takes this kernel off the list of nodes at once (it is leaving).
    pub async fn withdraw(&self) -> Result<(), ClusterError> {
        let (nodes, key) = (self.nodes.clone(), session_key(&self.name));
        let deleted = self.spawn(async move { nodes.delete(key).await })?;
        deleted
            .await
            .map_err(|error| ClusterError::Runtime(format!("failed while leaving: {error}")))?
            .map_err(|error| ClusterError::request("taking this node off the list", error))
    }

    /// The records of the nodes that announced themselves within the TTL, by node.
    pub async fn members(&self) -> Result<Vec<(String, Vec<u8>)>, ClusterError> {
        let nodes = self.nodes.clone();
        let read = self.spawn(async move { live_records(&nodes).await })?;
        read.await.map_err(|error| ClusterError::Runtime(format!("failed while listing nodes: {error}")))?
    }

    /// The first half of every fencing token: when the ownership bucket was made.
    pub fn fencing_epoch(&self) -> u64 {
        self.epoch
    }

    /// The fencing token of this kernel's ownership of session `key`: its claim's revision
    /// while the claim is held and within its TTL; `None` otherwise.
    pub fn fencing_token(&self, key: &str) -> Option<u64> {
        let owned = self.owned.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        owned.get(key)?.upgrade()?.valid_token().map(|token| token.revision)
    }

    /// Runs `future` on the cluster's runtime and waits for it, blocking this thread: for
    /// synchronous stores, never from an actor's handler.
    pub fn block_on<F>(&self, future: F) -> Result<F::Output, ClusterError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (done, result) = std::sync::mpsc::sync_channel(1);
        self.spawn(async move {
            let _ = done.send(future.await);
        })?;
        result.recv().map_err(|_| ClusterError::Runtime("stopped before answering".to_owned()))
    }

    /// Runs `future` on the cluster's runtime.
    pub(crate) fn spawn<F>(&self, future: F) -> Result<tokio::task::JoinHandle<F::Output>, ClusterError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = self.runtime.as_ref().ok_or_else(|| ClusterError::Runtime("is shut down".to_owned()))?;
        Ok(runtime.spawn(future))
    }

    async fn claim(&self, bucket: kv::Store, key: String) -> Result<Option<Claim>, ClusterError> {
        let (name, ttl) = (bytes::Bytes::from(self.name.clone()), self.ttl);
        let taken = self.spawn(Claim::take(name, ttl, bucket, key))?;
        taken.await.map_err(|error| ClusterError::Runtime(format!("failed while claiming: {error}")))?
    }

    async fn owner(&self, bucket: kv::Store, key: String) -> Result<Option<String>, ClusterError> {
        let read = self.spawn(async move { bucket.get(key).await })?;
        let value = read
            .await
            .map_err(|error| ClusterError::Runtime(format!("failed while reading: {error}")))?
            .map_err(|error| ClusterError::request("reading an owner", error))?;
        Ok(value.filter(|value| !value.is_empty()).map(|value| String::from_utf8_lossy(&value).into_owned()))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The connection and its buckets.
struct Buckets {
    client: async_nats::Client,
    sessions: kv::Store,
    leaders: kv::Store,
    channels: kv::Store,
    fired: kv::Store,
    nodes: kv::Store,
    jetstream: jetstream::Context,
    inbound: jetstream::stream::Stream,
    outbound: jetstream::stream::Stream,
}

/// Connects and opens the buckets, creating the ownership ones with `ttl` as their messages'
/// age limit: a key not renewed within it disappears, and with it the ownership.
async fn open_buckets(servers: Vec<String>, name: String, ttl: Duration) -> Result<Buckets, ClusterError> {
    let client = async_nats::ConnectOptions::new()
        .name(&name)
        .connection_timeout(CONNECT_TIMEOUT)
        .event_callback(|event| async move { log_event(&event) })
        .connect(servers.clone())
        .await
        .map_err(|source| ClusterError::Connect { servers: servers.join(","), source })?;
    // A clustered NATS (three JetStream servers or more) keeps each bucket on three of them,
    // so losing one loses nothing.
    let replicas = if client.server_info().cluster.is_some() { CLUSTERED_REPLICAS } else { 1 };
    let jetstream = jetstream::new(client.clone());
    let sessions = open_bucket(&jetstream, SESSIONS_BUCKET, ttl, replicas).await?;
    let leaders = open_bucket(&jetstream, LEADERS_BUCKET, ttl, replicas).await?;
    let channels = open_bucket(&jetstream, CHANNELS_BUCKET, ttl, replicas).await?;
    let fired = open_bucket(&jetstream, FIRED_BUCKET, FIRED_WINDOW, replicas).await?;
    let nodes = open_bucket(&jetstream, NODES_BUCKET, ttl, replicas).await?;
    let inbound = streams::open_stream(&jetstream, INBOUND_STREAM, "oxibot.in.>", replicas).await?;
    let outbound = streams::open_stream(&jetstream, OUTBOUND_STREAM, "oxibot.out.>", replicas).await?;
    Ok(Buckets { client, sessions, leaders, channels, fired, nodes, jetstream, inbound, outbound })
}

/// Every key of `bucket` with its value, by decoded key (the bucket holds few keys).
async fn live_records(bucket: &kv::Store) -> Result<Vec<(String, Vec<u8>)>, ClusterError> {
    use futures_util::StreamExt as _;
    let mut keys = bucket.keys().await.map_err(|error| ClusterError::request("listing nodes", error))?;
    let mut records = Vec::new();
    while let Some(key) = keys.next().await {
        let key = key.map_err(|error| ClusterError::request("listing nodes", error))?;
        let value = bucket.get(&key).await.map_err(|error| ClusterError::request("reading a node", error))?;
        if let Some(value) = value.filter(|value| !value.is_empty()) {
            records.push((decode_key(&key).unwrap_or(key), value.to_vec()));
        }
    }
    records.sort();
    Ok(records)
}

/// Logs what happens to the connection (the client reconnects by itself after a loss).
fn log_event(event: &async_nats::Event) {
    match event {
        async_nats::Event::Connected => tracing::info!("connected to NATS"),
        async_nats::Event::Disconnected => tracing::warn!("lost the connection to NATS; reconnecting"),
        other => tracing::debug!(event = %other, "NATS connection event"),
    }
}

/// The bucket `bucket`, created with one value per key and `ttl` as its age limit when it
/// does not exist yet (kernels of one cluster must agree on `cluster.ttlSeconds`), on
/// `replicas` servers. The bucket's
/// stream is made here as the key-value convention lays it out (`KV_<bucket>`, subjects
/// `$KV.<bucket>.>`): the client's own bucket creation first reads the account's limits in a
/// form nats-server 2.9 does not answer.
async fn open_bucket(
    jetstream: &jetstream::Context,
    bucket: &'static str,
    ttl: Duration,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    if let Ok(store) = jetstream.get_key_value(bucket).await {
        return Ok(store);
    }
    let config = jetstream::stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age: ttl,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: jetstream::stream::DiscardPolicy::New,
        num_replicas: replicas,
        ..jetstream::stream::Config::default()
    };
    // Another kernel may create it at the same moment: then opening it is enough.
    let created = jetstream.get_or_create_stream(config).await;
    let opened = jetstream.get_key_value(bucket).await;
    opened.map_err(|error| match created {
        Err(created) => ClusterError::Bucket { bucket, source: created.into() },
        Ok(_) => ClusterError::Bucket { bucket, source: error.into() },
    })
}

/// The durable consumer of session `key`'s messages.
fn session_reader_name(key: &str) -> String {
    format!("in-{}", session_key(key))
}

/// How long a session's consumer stays once no kernel pulls from it with ownership TTL `ttl`:
/// three TTLs (a takeover takes one), and [`SESSION_READER_IDLE`] at least.
fn session_reader_idle(ttl: Duration) -> Duration {
    (ttl * 3).max(SESSION_READER_IDLE)
}

//! The gateway in cluster mode: the cron scheduler and the heartbeat run only on the kernel
//! that leads the cluster's scheduling ([`lead_scheduling`]); they start when this kernel gains
//! the lead and stop when it loses it. A channel's plugin runs only on the kernel that owns the
//! channel ([`serve_channel`]: started when this kernel takes the channel, stopped when it loses
//! it); the messages of such a channel reach their session's owner through the inbound stream,
//! and its replies the channel's kernel through the outbound stream ([`ClusterRelay`],
//! [`read_relayed_messages`], [`take_waiting_sessions`]). Sessions are claimed by the agent layer (see
//! `crate::cluster::SessionClaims`); a session left with messages accepted and unanswered by
//! a kernel that died is taken over and answered ([`take_over_orphans`]); the cluster's part
//! of `/health` comes from [`crate::cluster::Member::report`].

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::Actor as _;

use super::resume;
use super::router::Router;
use crate::automation::dispatch::Dispatcher;
use crate::automation::heartbeat::{HeartbeatActor, HeartbeatSettings};
use crate::automation::scheduling::{FirstFiring, Scheduler};
use oxibot_proto::{Inbound, Outbound};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::router::{Relay, Relaying};
use crate::cluster::{Member, Taken};
use crate::cron::Tz;
use crate::cron::actor::Halt;
use crate::plugin::PluginSpec;
use crate::services::Services;
use crate::session::SessionKey;

/// How often a kernel that does not lead tries to (the key of a dead leader is free after the
/// TTL, so the lead moves within the TTL and this).
const TRY_LEAD_EVERY: Duration = Duration::from_millis(500);

/// How often a kernel looks for sessions a dead kernel left with unanswered messages while one
/// may have died (a scan of the session directory reading each file's first and last line, and
/// a question to the cluster for each such session no kernel here owns): a takeover comes this
/// long after the dead kernel's claims expire.
const ORPHANS_EVERY: Duration = Duration::from_millis(250);

/// How often a kernel looks for such sessions when no node was seen leaving.
const ORPHANS_CHECK_EVERY: Duration = Duration::from_secs(30);

/// How often a kernel looks for sessions with messages waiting in the inbound stream and no owner.
const WAITING_EVERY: Duration = Duration::from_secs(1);

/// What the scheduling kernel runs.
pub struct Scheduling {
    /// The cron jobs' clock.
    pub timezone: Tz,
    /// Where due jobs and beats become turns.
    pub dispatcher: Dispatcher,
    /// The heartbeat's settings, when it is on.
    pub heartbeat: Option<HeartbeatSettings>,
}

/// Runs for the gateway's life: tries to lead the cluster's scheduling, runs the scheduler and
/// the heartbeat while it leads, stops them when the lead is lost, and tries again.
pub async fn lead_scheduling(member: Arc<Member>, services: Arc<Services>, scheduling: Scheduling) {
    let workspace = services.workspace().to_path_buf();
    loop {
        match member.try_lead(&workspace).await {
            Ok(Some(lead)) => {
                tracing::info!(node = %member.node().name(), "this kernel leads the cluster's cron jobs and heartbeat");
                let first = first_firing(&member);
                let dispatcher = scheduling.dispatcher.clone();
                let scheduler = Scheduler::start_leading(&workspace, scheduling.timezone, dispatcher, Some(first));
                let heartbeat = scheduling.heartbeat.as_ref().map(|settings| {
                    let engine = services.engine().clone();
                    let (dispatcher, services) = (scheduling.dispatcher.clone(), services.clone());
                    HeartbeatActor::new(workspace.clone(), settings, engine, dispatcher, services).start()
                });
                lead.lost().await;
                tracing::warn!("this kernel lost the lead of the cluster's cron jobs; they stop here");
                scheduler.actor().do_send(Halt);
                if let Some(heartbeat) = heartbeat {
                    heartbeat.do_send(Halt);
                }
                drop(lead);
                member.lead_ended();
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "cannot ask the cluster who leads the cron jobs; trying again"),
        }
        tokio::time::sleep(TRY_LEAD_EVERY).await;
    }
}

/// Runs for the gateway's life: tries to take channel `spec.name` (every
/// [`crate::cluster::CHANNEL_TRY_EVERY`]), runs its plugin and delivers the replies other
/// kernels relay to it while this kernel owns the channel, stops both when the claim lapses,
/// and tries again. Ends when the gateway shuts down (its plugins are stopped there, and the
/// claim released after them).
pub async fn serve_channel(member: Arc<Member>, services: Arc<Services>, router: Rc<Router>, spec: PluginSpec) {
    let (channels, name) = (member.channels().clone(), spec.name.clone());
    while !channels.leaving() {
        match channels.try_take(&name).await {
            Ok(true) if !channels.leaving() => {
                match services.host().add(spec.clone()) {
                    Ok(()) => tracing::info!(channel = %name, "this kernel owns the channel; its plugin runs here"),
                    Err(error) => tracing::error!(channel = %name, %error, "cannot start the channel's plugin"),
                }
                let replies = relay_replies(&member, &router, &name);
                let lost = channels.lost(&name).await;
                if let Some((consumer, delivering)) = replies {
                    consumer.abort();
                    delivering.abort();
                }
                if lost {
                    tracing::warn!(channel = %name, "this kernel lost the channel; its plugin stops here");
                    services.host().remove(&name).await;
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(channel = %name, %error, "cannot ask the cluster who runs the channel"),
        }
        tokio::time::sleep(crate::cluster::CHANNEL_TRY_EVERY).await;
    }
}

/// Starts delivering the replies other kernels relay to `channel` (this kernel runs it): the
/// stream's consumer and the task that hands each to the router.
fn relay_replies(
    member: &Arc<Member>,
    router: &Rc<Router>,
    channel: &str,
) -> Option<(tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>)> {
    let (to, mut replies) = mpsc::unbounded_channel::<Taken>();
    let (channels, name) = (member.channels().clone(), channel.to_owned());
    let keep = move || channels.holds(&name) && !channels.leaving();
    let consumer = match member.node().consume_channel(channel, to, keep) {
        Ok(consumer) => consumer,
        Err(error) => {
            tracing::warn!(%channel, %error, "cannot read the replies other kernels send through the channel");
            return None;
        }
    };
    let (router, channel) = (router.clone(), channel.to_owned());
    let delivering = actix::spawn(async move {
        while let Some(Taken { payload, done }) = replies.recv().await {
            match serde_json::from_slice::<Outbound>(&payload) {
                Ok(outbound) => {
                    let delivered = router.deliver_relayed(&channel, outbound).await;
                    let _ = done.send(delivered);
                }
                Err(error) => {
                    tracing::error!(%channel, %error, "a relayed reply cannot be read; dropped");
                    let _ = done.send(true);
                }
            }
        }
    });
    Some((consumer, delivering))
}

/// A channel's message on its way to its session's owner, as published.
#[derive(Debug, Serialize, Deserialize)]
struct RelayedInbound {
    /// The channel it came through.
    channel: String,
    /// The message.
    inbound: Inbound,
}

/// The router's relay in cluster mode: messages of channels run on one kernel go through the
/// inbound stream to their session's owner, replies through the outbound stream to the
/// channel's owner.
pub struct ClusterRelay {
    member: Arc<Member>,
}

impl ClusterRelay {
    /// The relay of `member`'s cluster.
    pub fn new(member: Arc<Member>) -> ClusterRelay {
        ClusterRelay { member }
    }
}

impl Relay for ClusterRelay {
    fn relays(&self, channel: &str) -> bool {
        self.member.channels().is_exclusive(channel)
    }

    fn runs_here(&self, channel: &str) -> bool {
        self.member.channels().holds(channel)
    }

    /// Published under `channel:id` (a channel's redelivery within two minutes is dropped);
    /// a session no kernel owns is then taken by this one.
    fn publish_inbound(&self, channel: &str, inbound: &Inbound) -> Relaying {
        let member = self.member.clone();
        let key = SessionKey::new(channel, &inbound.chat_id).as_str().to_owned();
        let id = format!("{channel}:{}", inbound.id);
        let payload = serde_json::to_vec(&RelayedInbound { channel: channel.to_owned(), inbound: inbound.clone() });
        Box::pin(async move {
            let payload = payload.map_err(|error| error.to_string())?;
            member.node().publish_inbound(&key, &id, payload).await.map_err(|error| error.to_string())?;
            if let Err(error) = member.claims().try_own(&key).await {
                tracing::warn!(session = %key, %error, "cannot claim the session; a kernel takes it later");
            }
            Ok(())
        })
    }

    /// Published under the outbound id: a reply published twice is delivered once.
    fn publish_outbound(&self, channel: &str, outbound: &Outbound) -> Relaying {
        let member = self.member.clone();
        let (channel, id) = (channel.to_owned(), outbound.id.to_string());
        let payload = serde_json::to_vec(outbound);
        Box::pin(async move {
            let payload = payload.map_err(|error| error.to_string())?;
            member.node().publish_outbound(&channel, &id, payload).await.map_err(|error| error.to_string())
        })
    }
}

/// Runs for the gateway's life: hands the messages the inbound stream holds for the sessions
/// this kernel owns to the router, one at a time per session, each acknowledged in the stream
/// once its session's inbox holds it.
pub async fn read_relayed_messages(member: Arc<Member>, router: Rc<Router>) {
    let (to, mut taken) = mpsc::unbounded_channel();
    member.claims().read_sessions_into(to);
    while let Some(Taken { payload, done }) = taken.recv().await {
        match serde_json::from_slice::<RelayedInbound>(&payload) {
            Ok(relayed) => {
                actix::spawn(router.clone().turn_relayed(relayed.channel, relayed.inbound, done));
            }
            Err(error) => {
                tracing::error!(%error, "a relayed message cannot be read; dropped");
                let _ = done.send(true);
            }
        }
    }
}

/// Runs for the gateway's life: every [`WAITING_EVERY`], takes the sessions whose messages wait
/// in the inbound stream and that no kernel owns (their owner died before taking them), so
/// their messages are read here. Only a session seen waiting twice in a row: a message just
/// published is the publishing kernel's to take.
pub async fn take_waiting_sessions(member: Arc<Member>) {
    let mut before: Vec<String> = Vec::new();
    loop {
        match member.node().sessions_waiting().await {
            Ok(keys) => {
                for key in keys.iter().filter(|key| before.contains(key)) {
                    if let Ok(true) = member.claims().try_own(key).await {
                        tracing::debug!(session = %key, "this kernel reads the session's waiting messages");
                    }
                }
                before = keys;
            }
            Err(error) => tracing::warn!(%error, "cannot ask the cluster which sessions have messages waiting"),
        }
        tokio::time::sleep(WAITING_EVERY).await;
    }
}

/// Runs for the gateway's life: answers the sessions of `channels` that hold messages accepted
/// and never answered and that no kernel owns — those of a kernel that died mid-turn, whose
/// claim expired. It looks for them (every [`ORPHANS_EVERY`], the TTL if shorter) only while a
/// dead kernel's claims may be running out: for two TTLs from the start (the start's own
/// resumption, in a cluster), and for a TTL and a second after another node leaves or stops
/// announcing itself; besides, once every [`ORPHANS_CHECK_EVERY`] whatever happened. Two
/// kernels may both try; the session's claim, taken first, lets one of them answer.
pub async fn take_over_orphans(
    member: Arc<Member>,
    services: Arc<Services>,
    router: Rc<Router>,
    channels: Vec<String>,
) {
    let ttl = member.node().ttl();
    let every = ttl.min(ORPHANS_EVERY);
    let mut departures = member.departures();
    let mut look_until = Instant::now() + ttl * 2;
    let mut next_check = Instant::now() + ORPHANS_CHECK_EVERY;
    loop {
        let now = Instant::now();
        if now < look_until || now >= next_check {
            next_check = now + ORPHANS_CHECK_EVERY;
            take_orphans_once(&member, &services, &router, &channels).await;
        }
        tokio::select! {
            changed = departures.changed() => {
                if changed.is_ok() {
                    look_until = Instant::now() + ttl + Duration::from_secs(1);
                } else {
                    // The cluster's watch ended (shutting down): look on the slow schedule.
                    tokio::time::sleep(every).await;
                }
            }
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Claims every session of `channels` left unanswered that no kernel owns, and resumes each
/// one claimed here.
async fn take_orphans_once(member: &Arc<Member>, services: &Arc<Services>, router: &Rc<Router>, channels: &[String]) {
    tracing::debug!("looking for sessions a kernel left unanswered");
    let names: Vec<&str> = channels.iter().map(String::as_str).collect();
    let owned = services.ownership().map(|ownership| ownership.owned()).unwrap_or_default();
    let orphans: Vec<SessionKey> = resume::unanswered(services.sessions().as_ref(), &names)
        .into_iter()
        .filter(|key| !owned.iter().any(|mine| mine == key.as_str()))
        .collect();
    // All at once: a dead kernel's sessions expire together.
    let claims = member.claims();
    let taken = futures_util::future::join_all(orphans.iter().map(|key| claims.try_own(key.as_str()))).await;
    for (key, taken) in orphans.into_iter().zip(taken) {
        match taken {
            Ok(true) => {
                tracing::info!(session = %key, "taking over a session a kernel left with unanswered messages");
                router.resume_session(key);
            }
            Ok(false) => {}
            Err(error) => tracing::warn!(session = %key, %error, "cannot claim a session left unanswered"),
        }
    }
}

/// The cluster's record of cron firings: a job fires for a due time only if no kernel did (an
/// unreachable cluster lets it fire: a late duplicate is better than a lost reminder).
fn first_firing(member: &Arc<Member>) -> FirstFiring {
    let node = member.node().clone();
    Arc::new(move |job: &str, due_ms: i64| {
        let (node, job) = (node.clone(), job.to_owned());
        Box::pin(async move {
            node.first_firing(&job, due_ms).await.unwrap_or_else(|error| {
                tracing::warn!(%job, %error, "cannot record a cron firing in the cluster; firing anyway");
                true
            })
        })
    })
}

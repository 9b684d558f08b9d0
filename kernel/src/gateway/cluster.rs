//! The gateway in cluster mode: the cron scheduler and the heartbeat run only on the kernel
//! that leads the cluster's scheduling ([`lead_scheduling`]); they start when this kernel gains
//! the lead and stop when it loses it. A channel's plugin runs only on the kernel that owns the
//! channel ([`serve_channel`]: started when this kernel takes the channel, stopped when it loses
//! it). Sessions are claimed by the agent layer (see
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
use crate::cluster::{ChannelClaims, Member};
use crate::cron::Tz;
use crate::cron::actor::Halt;
use crate::services::Services;

/// How often a kernel that does not lead tries to (the key of a dead leader is free after the
/// TTL, so the lead moves within the TTL and this).
const TRY_LEAD_EVERY: Duration = Duration::from_millis(500);

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
/// [`crate::cluster::CHANNEL_TRY_EVERY`]), runs its plugin while this kernel owns the channel,
/// stops it when the claim lapses, and tries again. Ends when the gateway shuts down (its
/// plugins are stopped there, and the claim released after them).
pub async fn serve_channel(channels: Arc<ChannelClaims>, services: Arc<Services>, spec: crate::plugin::PluginSpec) {
    let name = spec.name.clone();
    while !channels.leaving() {
        match channels.try_take(&name).await {
            Ok(true) if !channels.leaving() => {
                match services.host().add(spec.clone()) {
                    Ok(()) => tracing::info!(channel = %name, "this kernel owns the channel; its plugin runs here"),
                    Err(error) => tracing::error!(channel = %name, %error, "cannot start the channel's plugin"),
                }
                if channels.lost(&name).await {
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

/// Runs for the gateway's life: every TTL, answers the sessions of `channels` that hold
/// messages accepted and never answered and that no kernel owns — those of a kernel that died
/// mid-turn, whose claim expired. (At start, too: in a cluster the start's own resumption is
/// this.) Two kernels may both try; the session's claim lets one of them answer.
pub async fn take_over_orphans(
    member: Arc<Member>,
    services: Arc<Services>,
    router: Rc<Router>,
    channels: Vec<String>,
) {
    let every = member.node().ttl();
    loop {
        let names: Vec<&str> = channels.iter().map(String::as_str).collect();
        let owned = services.ownership().map(|ownership| ownership.owned()).unwrap_or_default();
        for key in resume::unanswered(services.sessions().as_ref(), &names) {
            if owned.iter().any(|mine| mine == key.as_str()) {
                continue;
            }
            match member.node().session_owner(key.as_str()).await {
                Ok(None) => {
                    tracing::info!(session = %key, "taking over a session a kernel left with unanswered messages");
                    router.resume_session(key);
                }
                Ok(Some(_)) => {}
                Err(error) => tracing::warn!(session = %key, %error, "cannot ask who owns a session"),
            }
        }
        tokio::time::sleep(every).await;
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

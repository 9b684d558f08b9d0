//! `Member`: what a gateway runs of cluster mode. It joins the cluster at start (the
//! [`Node`]), claims sessions for the agent layer ([`SessionClaims`]), competes for the lead
//! of the cron scheduler and the heartbeat ([`Member::try_lead`]: the workspace's scheduler
//! lock, then the cluster's `scheduler` leader key), and answers the cluster part of the
//! gateway's `/health` ([`Member::report`]) from what it knows without asking the server. It
//! keeps the channel claims too ([`ChannelClaims`]: which channel plugins run on this kernel).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use serde_json::{Value, json};

use super::channels::ChannelClaims;
use super::claim::{Claim, ClaimState};
use super::error::ClusterError;
use super::node::Node;
use super::sessions::SessionClaims;
use crate::config::cluster::ClusterConfig;
use crate::cron::storage::{JobStorage, Lease};
use crate::cron::store::JobStore;
use crate::session::ownership::SessionOwnership;

/// This gateway's membership in the cluster.
#[derive(Debug)]
pub struct Member {
    /// The connection.
    node: Arc<Node>,
    /// The sessions this kernel owns.
    claims: Arc<SessionClaims>,
    /// The channels this kernel runs, and who runs the others.
    channels: Arc<ChannelClaims>,
    /// The scheduler's leader as last seen (this kernel's name while it leads).
    leader: Mutex<Option<String>>,
    /// This kernel's lead of the scheduler, while it has one, to give it up when leaving.
    lead: Mutex<Weak<ClaimState>>,
    /// The nodes of the cluster as last seen (each one's record: its name and how many
    /// sessions it owns), by name.
    nodes: Mutex<Vec<Value>>,
    /// How many other nodes left or died since this one joined (see `departures.rs`).
    departures: tokio::sync::watch::Receiver<u64>,
}

/// This kernel's lead of the scheduler: held until dropped or lost.
#[derive(Debug)]
pub struct Lead {
    /// The workspace's scheduler lock (keeps out an `oxibot agent` on this host).
    _local: Lease,
    /// The cluster's `scheduler` key.
    claim: Claim,
}

impl Lead {
    /// Resolves when the lead is lost: another kernel took the key, or this kernel could not
    /// renew it within its TTL (its token is no longer trusted).
    pub async fn lost(&self) {
        while self.claim.token().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Member {
    /// Connects to `config`'s cluster; an error names the servers.
    pub async fn join(config: &ClusterConfig) -> Result<Arc<Member>, ClusterError> {
        let node = Node::connect(config).await?;
        let claims = Arc::new(SessionClaims::new(Arc::clone(&node)));
        let channels = Arc::new(ChannelClaims::new(Arc::clone(&node)));
        let (departed, departures) = tokio::sync::watch::channel(0);
        node.spawn(super::departures::watch(Arc::downgrade(&node), departed))?;
        let member = Arc::new(Member {
            node,
            claims,
            channels,
            leader: Mutex::default(),
            lead: Mutex::new(Weak::new()),
            nodes: Mutex::default(),
            departures,
        });
        member.node.spawn(announce_while_alive(Arc::downgrade(&member)))?;
        Ok(member)
    }

    /// Tells the cluster this kernel is alive and how many sessions it owns, and reads what
    /// the other nodes told it.
    async fn announce(&self) -> Result<(), ClusterError> {
        let record = json!({"node": self.node.name(), "sessions": self.claims.owned().len()});
        self.node.announce(record.to_string().into_bytes()).await?;
        let records = self.node.members().await?;
        let seen = records.iter().filter_map(|(_, record)| serde_json::from_slice(record).ok()).collect();
        *self.nodes.lock().unwrap_or_else(PoisonError::into_inner) = seen;
        Ok(())
    }

    /// Changes each time another node leaves the cluster or stops announcing itself.
    pub fn departures(&self) -> tokio::sync::watch::Receiver<u64> {
        self.departures.clone()
    }

    /// The connection.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// The session claims, as the agent layer takes them.
    pub fn claims(&self) -> Arc<SessionClaims> {
        Arc::clone(&self.claims)
    }

    /// The channel claims: which channels run here.
    pub fn channels(&self) -> &Arc<ChannelClaims> {
        &self.channels
    }

    /// Becomes the scheduler of `workspace`'s jobs if no process on this host and no kernel
    /// of the cluster is; `None` when another one is (the leader seen is remembered for the
    /// report).
    pub async fn try_lead(&self, workspace: &Path) -> Result<Option<Lead>, ClusterError> {
        let local = match JobStore::new(workspace).try_scheduler_lease() {
            Ok(Some(local)) => Some(local),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "cannot take the workspace's scheduler lock");
                None
            }
        };
        let lead = match local {
            Some(local) => self.node.try_lead_scheduler().await?.map(|claim| Lead { _local: local, claim }),
            None => None,
        };
        let leader = match &lead {
            Some(lead) => {
                *self.lead.lock().unwrap_or_else(PoisonError::into_inner) = lead.claim.state();
                Some(self.node.name().to_owned())
            }
            None => self.node.scheduler().await?,
        };
        *self.leader.lock().unwrap_or_else(PoisonError::into_inner) = leader;
        Ok(lead)
    }

    /// Forgets the leader seen (this kernel's lead ended).
    pub fn lead_ended(&self) {
        *self.leader.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Leaves the cluster (the gateway shuts down): gives up this kernel's sessions and its
    /// lead of the scheduler at once, so other kernels take them without waiting for the TTL.
    pub async fn leave(&self) {
        self.claims.release_all().await;
        let lead = self.lead.lock().unwrap_or_else(PoisonError::into_inner).upgrade();
        if let Some(token) = lead.and_then(|state| state.valid_token())
            && let Err(error) = self.node.resign_scheduler(token.revision).await
        {
            tracing::warn!(%error, "cannot give up the scheduler's lead; another kernel takes it after the TTL");
        }
        if let Err(error) = self.node.withdraw().await {
            tracing::warn!(%error, "cannot take this node off the cluster's list; it drops out after the TTL");
        }
        tracing::info!(node = %self.node.name(), "left the cluster");
    }

    /// The cluster part of `/health`: this node, the NATS servers and the connection's state,
    /// the sessions this node owns (and when it took each), the scheduler's leader, each
    /// channel's node and the cluster's nodes with how many sessions each owns, as last seen.
    pub fn report(&self) -> Value {
        let leader = self.leader.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner).clone();
        json!({
            "node": self.node.name(),
            "nats": self.node.servers(),
            "connection": self.node.connection(),
            "ttl_secs": self.node.ttl().as_secs(),
            "sessions": self.claims.owned(),
            "sessions_taken_ms": self.claims.owned_since(),
            "scheduler": leader,
            "channels": self.channels.report(),
            "nodes": nodes,
        })
    }
}

/// Runs while the member lives: announces it every third of the TTL (see [`Member::announce`]).
async fn announce_while_alive(member: Weak<Member>) {
    loop {
        let Some(alive) = member.upgrade() else { return };
        if let Err(error) = alive.announce().await {
            tracing::debug!(%error, "cannot announce this node to the cluster; trying again");
        }
        let every = alive.node.ttl() / 3;
        drop(alive);
        tokio::time::sleep(every).await;
    }
}

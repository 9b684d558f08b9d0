//! `ChannelClaims`: which kernel of the cluster runs each channel's plugin. A channel (one
//! Telegram bot, one Slack app) must be served by one kernel at a time, or two pollers race for
//! its updates: its plugin runs only on the kernel holding the channel's key in the
//! `oxibot_channels` bucket, a [`Claim`] like a session's (create-only CAS, renewed within the
//! TTL). The other kernels try to take the key every [`TRY_EVERY`] and start the plugin when they
//! get it (the owner died, or left and released it); an owner whose claim lapses stops its
//! plugin. Channels listed in `cluster.localChannels` are not claimed: every kernel runs them.
//!
//! This type keeps the claims and what each kernel was last seen to run; the loop that starts
//! and stops the plugins is the gateway's (`gateway::cluster::serve_channel`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::plugin::PluginSpec;
use serde_json::Value;

use super::claim::Claim;
use super::error::ClusterError;
use super::node::Node;

/// How often a kernel that does not run a channel tries to take it: a dead owner's channel
/// runs elsewhere within the TTL and this (plus the plugin's start).
pub const TRY_EVERY: Duration = Duration::from_millis(250);

/// How often an owner checks that its claim still holds.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The channels of this kernel's cluster and who runs them.
#[derive(Debug)]
pub struct ChannelClaims {
    /// The connection.
    node: Arc<Node>,
    /// The plugins of the channels run on one kernel at a time, until the gateway takes them.
    exclusive: Mutex<Vec<PluginSpec>>,
    /// The claims held, by channel name.
    held: Mutex<HashMap<String, Claim>>,
    /// Each channel's kernel as last seen (`None`: nobody yet); local channels are this node's.
    owners: Mutex<BTreeMap<String, Option<String>>>,
    /// The channels run on one kernel at a time, by name.
    exclusive_names: Mutex<std::collections::HashSet<String>>,
    /// Set when the gateway shuts down: no channel is taken or started any more.
    leaving: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ChannelClaims {
    /// No channel yet, on `node`'s cluster.
    pub fn new(node: Arc<Node>) -> ChannelClaims {
        ChannelClaims {
            node,
            exclusive: Mutex::default(),
            held: Mutex::default(),
            owners: Mutex::default(),
            exclusive_names: Mutex::default(),
            leaving: AtomicBool::new(false),
        }
    }

    /// The channels of this gateway: `exclusive` ones run where they are owned, `local` ones
    /// (their names) run on every kernel.
    pub fn configure(&self, exclusive: Vec<PluginSpec>, local: &[String]) {
        let mut owners = lock(&self.owners);
        for spec in &exclusive {
            owners.insert(spec.name.clone(), None);
            lock(&self.exclusive_names).insert(spec.name.clone());
        }
        for name in local {
            owners.insert(name.clone(), Some(self.node.name().to_owned()));
        }
        *lock(&self.exclusive) = exclusive;
    }

    /// The plugins of the exclusive channels, once (for the gateway's loops).
    pub fn take_exclusive(&self) -> Vec<PluginSpec> {
        std::mem::take(&mut *lock(&self.exclusive))
    }

    /// Whether this kernel holds `channel` now: takes it when no kernel does (remembering the
    /// owner seen otherwise).
    pub async fn try_take(&self, channel: &str) -> Result<bool, ClusterError> {
        if self.holds(channel) {
            return Ok(true);
        }
        let owner = match self.node.claim_channel(channel).await? {
            Some(claim) => {
                lock(&self.held).insert(channel.to_owned(), claim);
                Some(self.node.name().to_owned())
            }
            None => self.node.channel_owner(channel).await?,
        };
        let taken = owner.as_deref() == Some(self.node.name());
        lock(&self.owners).insert(channel.to_owned(), owner);
        Ok(taken)
    }

    /// Whether `channel` runs on one kernel at a time (not on every kernel).
    pub fn is_exclusive(&self, channel: &str) -> bool {
        lock(&self.exclusive_names).contains(channel)
    }

    /// Whether this kernel holds `channel` with a token its clock still trusts.
    pub fn holds(&self, channel: &str) -> bool {
        lock(&self.held).get(channel).is_some_and(|claim| claim.token().is_some())
    }

    /// Resolves when this kernel's claim of `channel` lapses (then forgotten) or the gateway
    /// starts leaving; `true` for a lost claim.
    pub async fn lost(&self, channel: &str) -> bool {
        while self.holds(channel) {
            if self.leaving() {
                return false;
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
        lock(&self.held).remove(channel);
        lock(&self.owners).insert(channel.to_owned(), None);
        !self.leaving()
    }

    /// Whether the gateway is shutting down.
    pub fn leaving(&self) -> bool {
        self.leaving.load(Ordering::SeqCst)
    }

    /// Takes and starts no channel any more (the gateway shuts down; its plugins stop next).
    pub fn stop_taking(&self) {
        self.leaving.store(true, Ordering::SeqCst);
    }

    /// Gives up every channel this kernel holds and waits until the server took note, so
    /// another kernel starts them at once; call it after the plugins stopped.
    pub async fn release_all(&self) {
        let claims: Vec<(String, Claim)> = lock(&self.held).drain().collect();
        for (channel, claim) in claims {
            let released = match self.node.spawn(claim.release()) {
                Ok(task) => task.await.map_err(|error| error.to_string()).and_then(|r| r.map_err(|e| e.to_string())),
                Err(error) => Err(error.to_string()),
            };
            if let Err(error) = released {
                tracing::warn!(%channel, %error, "cannot release the channel; another kernel takes it after the TTL");
            }
        }
    }

    /// Each channel and the node running it as last seen (`null`: none yet), for `/health`.
    pub fn report(&self) -> Value {
        let owners = lock(&self.owners);
        Value::Object(owners.iter().map(|(name, owner)| (name.clone(), owner.clone().into())).collect())
    }
}

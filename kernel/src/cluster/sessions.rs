//! `SessionClaims`: the sessions this kernel owns in the cluster, as the agent layer asks for
//! them ([`SessionOwnership`]). A session's claim is taken before the kernel writes anything
//! of it (the inbox record of its first message included), kept (renewed in the background)
//! while the session's actor lives, and released when the actor stops. While another kernel
//! owns the session, [`SessionOwnership::acquire`] waits, trying again every
//! [`RETRY_EVERY`]: the message is not accepted meanwhile (the channel keeps it, unacknowledged),
//! and it is taken in as soon as the owner releases the session or dies (after the TTL). A
//! cluster that does not answer (the client reconnecting) is asked again the same way.
//!
//! A session taken here is read from the inbound stream too (its durable consumer, see
//! `streams.rs`) once the gateway reads the sessions' messages ([`SessionClaims::read_sessions_into`]):
//! a message published by the kernel that runs its channel reaches the session's owner.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;

use super::claim::Claim;
use super::node::Node;
use super::streams::Taken;
use crate::session::SessionError;
use crate::session::ownership::{Acquiring, Owned, SessionOwnership};

/// How often a kernel waiting for a session another kernel owns tries again.
pub const RETRY_EVERY: Duration = Duration::from_millis(250);

/// This kernel's session claims.
#[derive(Debug)]
pub struct SessionClaims {
    /// The cluster connection.
    node: Arc<Node>,
    /// The claims held, by session key; a lost one stays until the session is acquired again.
    held: Arc<Mutex<HashMap<String, Claim>>>,
    /// Where the messages of the sessions this kernel owns go, once the gateway reads them.
    inbox: Arc<Inbox>,
}

/// The inbound stream's messages of the sessions this kernel owns: one consumer per session,
/// started when the session is taken and stopped when it is released (or by itself once the
/// claim is lost).
#[derive(Debug, Default)]
struct Inbox {
    /// The gateway's receiver of the sessions' messages (none before the gateway runs).
    to: Mutex<Option<mpsc::UnboundedSender<Taken>>>,
    /// The consumers running, by session key.
    consumers: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
}

impl Inbox {
    /// Starts reading session `key`'s messages (again), if the gateway reads them.
    fn start(&self, node: &Arc<Node>, key: &str) {
        let Some(to) = lock(&self.to).clone() else { return };
        match node.consume_session(key, to) {
            Ok(task) => {
                if let Some(old) = lock(&self.consumers).insert(key.to_owned(), task) {
                    old.abort();
                }
            }
            Err(error) => tracing::warn!(session = %key, %error, "cannot read the session's messages"),
        }
    }

    /// Stops reading session `key`'s messages.
    fn stop(&self, key: &str) {
        if let Some(task) = lock(&self.consumers).remove(key) {
            task.abort();
        }
    }
}

impl SessionClaims {
    /// No claims yet, on `node`'s cluster.
    pub fn new(node: Arc<Node>) -> SessionClaims {
        SessionClaims { node, held: Arc::default(), inbox: Arc::default() }
    }

    /// Sends the messages of every session this kernel owns from now on to `to`, in order per
    /// session, each acknowledged in the stream once `to`'s reader says it is handled.
    pub fn read_sessions_into(&self, to: mpsc::UnboundedSender<Taken>) {
        *lock(&self.inbox.to) = Some(to);
        for key in self.owned() {
            self.inbox.start(&self.node, &key);
        }
    }

    /// Whether this kernel owns session `key` now: it takes the session when no kernel does
    /// (and reads its messages from then on), without waiting for another owner.
    pub async fn try_own(&self, key: &str) -> Result<bool, SessionError> {
        let owned = try_acquire(&self.node, &self.held, key).await?;
        if owned == Some(Owned::Taken) {
            self.inbox.start(&self.node, key);
        }
        Ok(owned.is_some())
    }
}

/// Takes `key`'s claim if no kernel holds it; `Some(Held)` when this kernel's claim is valid.
async fn try_acquire(
    node: &Arc<Node>,
    held: &Mutex<HashMap<String, Claim>>,
    key: &str,
) -> Result<Option<Owned>, SessionError> {
    if node.fencing_token(key).is_some() {
        return Ok(Some(Owned::Held));
    }
    // A lost claim is given up for good (a new one is a new ownership); a claim another
    // caller just took for this kernel is kept.
    lock(held).retain(|other, claim| other != key || claim.token().is_some());
    let claim = node.claim_session(key).await.map_err(|error| cluster_failure(key, &error))?;
    Ok(claim.map(|claim| {
        tracing::info!(session = %key, node = %node.name(), "this kernel owns the session now");
        lock(held).insert(key.to_owned(), claim);
        Owned::Taken
    }))
}

/// The cluster's failure as a session error (logged; the claim is tried again).
fn cluster_failure(key: &str, error: &super::ClusterError) -> SessionError {
    tracing::warn!(session = %key, %error, "cannot claim the session; trying again");
    SessionError::NotOwner { key: key.to_owned(), node: format!("unreachable cluster: {error}") }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionClaims {
    /// Gives up every session this kernel holds and waits until the server took note, so
    /// other kernels can take them at once (a gateway shutting down).
    pub async fn release_all(&self) {
        let claims: Vec<(String, Claim)> = lock(&self.held).drain().collect();
        for (key, claim) in claims {
            self.inbox.stop(&key);
            let released = match self.node.spawn(claim.release()) {
                Ok(task) => task.await.map_err(|error| error.to_string()).and_then(|r| r.map_err(|e| e.to_string())),
                Err(error) => Err(error.to_string()),
            };
            if let Err(error) = released {
                tracing::warn!(session = %key, %error, "cannot release the session; it is free after the TTL");
            }
        }
    }
}

impl SessionOwnership for SessionClaims {
    fn acquire(&self, key: &str) -> Acquiring {
        let (node, held, key) = (Arc::clone(&self.node), Arc::clone(&self.held), key.to_owned());
        let inbox = Arc::clone(&self.inbox);
        Box::pin(async move {
            let mut told = false;
            loop {
                match try_acquire(&node, &held, &key).await {
                    Ok(Some(owned)) => {
                        if owned == Owned::Taken {
                            inbox.start(&node, &key);
                        }
                        return Ok(owned);
                    }
                    Ok(None) if !told => {
                        let owner = node.session_owner(&key).await.ok().flatten().unwrap_or_default();
                        tracing::info!(session = %key, %owner, "another kernel owns the session; waiting for it");
                        told = true;
                    }
                    Ok(None) => {}
                    // The client reconnects meanwhile (a NATS server lost): try again.
                    Err(_) => {}
                }
                tokio::time::sleep(RETRY_EVERY).await;
            }
        })
    }

    fn release(&self, key: &str) {
        self.inbox.stop(key);
        let Some(claim) = lock(&self.held).remove(key) else { return };
        let key = key.to_owned();
        let released = self.node.spawn(async move {
            if let Err(error) = claim.release().await {
                tracing::warn!(session = %key, %error, "cannot release the session; it is free after the TTL");
            }
        });
        if let Err(error) = released {
            tracing::warn!(%error, "cannot release a session");
        }
    }

    fn owned(&self) -> Vec<String> {
        self.owned_since().into_keys().collect()
    }
}

impl SessionClaims {
    /// The sessions this kernel owns now, each with when it took it (milliseconds since the
    /// Unix epoch), in key order.
    pub fn owned_since(&self) -> std::collections::BTreeMap<String, u64> {
        lock(&self.held)
            .iter()
            .filter(|(key, _)| self.node.fencing_token(key).is_some())
            .map(|(key, claim)| (key.clone(), claim.taken_at_ms()))
            .collect()
    }
}

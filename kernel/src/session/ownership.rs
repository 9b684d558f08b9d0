//! `SessionOwnership`: who may run a session's turns when several kernels share the sessions
//! (cluster mode). The single-host kernel has none and runs every session; a kernel in a
//! cluster claims a session before it writes to it and gives the claim up when the session's
//! actor stops. Defined here, below the cluster, so the agent layer can use it without
//! knowing how ownership is kept (`crate::cluster::SessionClaims` is the implementation).

use std::future::Future;
use std::pin::Pin;

use super::SessionError;

/// How a session came to be owned by this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// It already was, without a break: what this kernel holds in memory is current.
    Held,
    /// It was just taken (first time, or again after the claim was lost): another kernel may
    /// have written the session meanwhile, so it is read again from storage.
    Taken,
}

/// A future of [`SessionOwnership::acquire`].
pub type Acquiring = Pin<Box<dyn Future<Output = Result<Owned, SessionError>> + Send>>;

/// Exclusive ownership of sessions among the kernels sharing them.
pub trait SessionOwnership: Send + Sync + std::fmt::Debug {
    /// Resolves once this kernel owns session `key`: at once when it holds it, else when no
    /// other kernel does (it waits, retrying, while another one owns it). An error means the
    /// session cannot be had at all (the cluster's claims retry instead while NATS is away).
    fn acquire(&self, key: &str) -> Acquiring;

    /// Gives session `key` up (its actor stopped), so another kernel can take it at once.
    fn release(&self, key: &str);

    /// The sessions this kernel owns now.
    fn owned(&self) -> Vec<String>;
}

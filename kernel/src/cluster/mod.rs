//! Cluster mode (issue 31): several kernels sharing one NATS JetStream, each
//! session run by exactly one of them. Compiled only with the `cluster` cargo feature and used
//! only when `config.json` has a `cluster` section; without it no NATS code runs.
//!
//! What is here: the connection ([`Node`], its own small runtime so synchronous stores can use
//! it too), exclusive ownership of a key in a JetStream key-value bucket ([`Claim`]: created
//! with create-only compare-and-swap, kept alive by revision-checked updates within the TTL,
//! lost after the TTL when its kernel dies), session ownership on top of it with the claim's
//! revision as the fencing token of the session store ([`FencedSessions`]), and the election of
//! the one scheduler of cron jobs and the heartbeat ([`ClusterJobs`], a [`JobStorage`] whose
//! lease is a leader key), channel ownership ([`ChannelClaims`]: a channel's plugin runs on
//! one kernel at a time), and the two work queues between kernels (`streams.rs`: a channel's
//! messages to their session's owner, replies to their channel's kernel; [`Taken`] is one
//! message handed to the gateway). What is not here yet (session logs in JetStream, among
//! others) is listed in ARCHITECTURE.md.
//!
//! [`JobStorage`]: crate::cron::storage::JobStorage

mod channels;
mod claim;
mod departures;
mod error;
mod fence;
mod fence_file;
mod jobs;
mod keys;
mod member;
mod node;
mod sessions;
mod streams;

pub use channels::{ChannelClaims, TRY_EVERY as CHANNEL_TRY_EVERY};
pub use claim::{Claim, Token};
pub use error::ClusterError;
pub use fence::FencedSessions;
pub use jobs::ClusterJobs;
pub use member::{Lead, Member};
pub use node::Node;
pub use sessions::SessionClaims;
pub use streams::Taken;

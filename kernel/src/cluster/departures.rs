//! Departures: which nodes of the cluster stopped announcing themselves. Every member puts its
//! record in the nodes bucket every third of the TTL (see `member.rs`); this watches the bucket
//! and counts a node as gone once its last put is a TTL old (it died, or lost NATS and with it
//! every claim it held) or once it deletes its key (it left). Each departure bumps a counter the
//! gateway waits on, so it looks for the sessions a dead kernel left only when one may have
//! died, instead of reading every session file several times a second.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use async_nats::jetstream::kv::Operation;
use futures_util::StreamExt as _;
use tokio::sync::watch;
use tokio::time::Instant;

use super::keys::{decode_key, session_key};
use super::node::Node;

/// How often the last puts are checked against the TTL.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// How long to wait before watching the bucket again after the watch failed.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// Watches `node`'s cluster for departures of other nodes while `node` lives, bumping
/// `departed` for each.
pub(crate) async fn watch(node: Weak<Node>, departed: watch::Sender<u64>) {
    let mut last_put: HashMap<String, Instant> = HashMap::new();
    loop {
        let Some(alive) = node.upgrade() else { return };
        let (me, ttl) = (session_key(alive.name()), alive.ttl());
        let watched = alive.watch_nodes().await;
        drop(alive);
        let mut entries = match watched {
            Ok(entries) => entries,
            Err(error) => {
                tracing::debug!(%error, "cannot watch the cluster's nodes; trying again");
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
        };
        let mut ticks = tokio::time::interval(CHECK_EVERY);
        loop {
            tokio::select! {
                entry = entries.next() => match entry {
                    Some(Ok(entry)) if entry.key != me => {
                        if entry.operation == Operation::Put {
                            last_put.insert(entry.key, Instant::now());
                        } else if last_put.remove(&entry.key).is_some() {
                            tracing::info!(node = %name_of(&entry.key), "a node left the cluster");
                            departed.send_modify(|count| *count += 1);
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => tracing::debug!(%error, "watching the cluster's nodes paused"),
                    None => break,
                },
                _ = ticks.tick() => {
                    if node.strong_count() == 0 {
                        return;
                    }
                    let silent: Vec<String> =
                        last_put.iter().filter(|(_, at)| at.elapsed() >= ttl).map(|(name, _)| name.clone()).collect();
                    for name in silent {
                        last_put.remove(&name);
                        tracing::info!(node = %name_of(&name), "a node stopped announcing itself; its sessions are looked for");
                        departed.send_modify(|count| *count += 1);
                    }
                }
            }
        }
        tokio::time::sleep(RETRY_AFTER).await;
    }
}

/// A node's name from its key in the bucket.
fn name_of(key: &str) -> String {
    decode_key(key).unwrap_or_else(|| key.to_owned())
}

//! Delivery faults a test asks the loopback channel for in its config section, to show what
//! the kernel does when a chat service refuses or loses replies:
//!
//! | key | effect |
//! |---|---|
//! | `failFirst: N` | the first `N` outbound messages this process receives are acked with an error |
//! | `announce: true` | each outbound message is first written to the clients as `TRY <id> <chat_id>` |
//! | `holdWithoutClient: true` | a reply arriving while no client is connected waits, unacked, for the next client |
//! | `stallAcks: true` | outbound messages are shown to the clients but never acknowledged (a service that stores a reply, then loses the connection before it answers) |
//! | `seenIdsFile: "<path>"` | the channel de-duplicates by outbound id, across its restarts: an id written in that file (one per line) is acknowledged without being shown again, and written there once more; an id shown is written there |

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use oxibot_plugin::Outbound;
use serde::Deserialize;

/// The faults asked for; none by default.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Faults {
    /// How many outbound messages to refuse first.
    #[serde(default)]
    fail_first: u32,
    /// Whether each outbound message is announced with its id.
    #[serde(default)]
    announce: bool,
    /// Whether a reply without a client waits for one.
    #[serde(default)]
    hold_without_client: bool,
    /// Whether outbound messages are shown but never acknowledged.
    #[serde(default)]
    stall_acks: bool,
    /// Where the ids of the outbound messages shown are kept (de-duplication by id).
    #[serde(default)]
    seen_ids_file: Option<PathBuf>,
}

/// The faults and what they have done so far in this process.
#[derive(Debug, Default)]
pub struct FaultState {
    /// What the config asked for.
    faults: Faults,
    /// Outbound messages refused so far.
    refused: AtomicU32,
    /// Replies waiting for a client.
    held: Mutex<Vec<Outbound>>,
}

impl FaultState {
    /// The state of `faults`, nothing done yet.
    pub fn new(faults: Faults) -> FaultState {
        FaultState { faults, ..FaultState::default() }
    }

    /// The `TRY` line announcing `outbound`, when announcing was asked for.
    pub fn announcement(&self, outbound: &Outbound) -> Option<String> {
        self.faults.announce.then(|| format!("TRY {} {}\n", outbound.id, outbound.chat_id))
    }

    /// The error to refuse the next outbound message with, while `failFirst` lasts.
    pub fn refusal(&self) -> Option<String> {
        let refused = self.refused.fetch_add(1, Ordering::Relaxed);
        (refused < self.faults.fail_first)
            .then(|| format!("refused on purpose ({} of failFirst {})", refused + 1, self.faults.fail_first))
    }

    /// Whether acknowledgements are withheld.
    pub fn stalls_acks(&self) -> bool {
        self.faults.stall_acks
    }

    /// Whether outbound `id` was shown before (by this process or an earlier one), when the
    /// channel de-duplicates; a repeat is written to the file again, so a test can count it.
    pub fn seen_before(&self, id: u64) -> bool {
        let Some(path) = &self.faults.seen_ids_file else { return false };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let seen = text.lines().any(|line| line == id.to_string());
        if seen {
            self.remember(id);
        }
        seen
    }

    /// Notes that outbound `id` was shown, when the channel de-duplicates.
    pub fn remember(&self, id: u64) {
        let Some(path) = &self.faults.seen_ids_file else { return };
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| writeln!(file, "{id}").and_then(|()| file.sync_data()));
        if let Err(error) = written {
            eprintln!("loopback: cannot write {}: {error}", path.display());
        }
    }

    /// Keeps `outbound` for the next client when asked to; gives it back otherwise.
    pub fn hold(&self, outbound: Outbound) -> Option<Outbound> {
        if !self.faults.hold_without_client {
            return Some(outbound);
        }
        self.held.lock().unwrap_or_else(PoisonError::into_inner).push(outbound);
        None
    }

    /// The replies held for a client, taken.
    pub fn take_held(&self) -> Vec<Outbound> {
        std::mem::take(&mut *self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

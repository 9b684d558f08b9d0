//! Who may talk to the assistant: each channel's `allowFrom`, and pairing — an unknown sender
//! in a direct chat gets a one-time code, which the owner approves with
//! `oxibot pairing approve <code>`. Approvals are kept in a [`PairingStore`] (today
//! `<data dir>/pairing.json`, see [`super::pairing_store`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

pub use super::pairing_store::PendingPairing;
use super::pairing_store::{PairingFile, PairingStore, Pairings};
use super::settings::AllowFrom;

/// What to do with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Hand it to the assistant.
    Allow,
    /// Drop it; nothing reaches the model.
    Deny,
    /// Drop it and send the sender this pairing code (first contact only).
    SendCode(String),
}

/// A pairing operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    /// No pending request has this code.
    #[error("no pending pairing has the code {0} (see `oxibot pairing list`)")]
    UnknownCode(String),
    /// The file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    File {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The pairing store and the access decisions built on it.
pub struct Access {
    /// Where approvals and codes are kept (shared with other processes).
    store: Box<dyn PairingStore>,
    /// The file the default store keeps, for error messages.
    path: PathBuf,
    /// The approvals as last read, for deciding without reading the store each time.
    state: Mutex<Pairings>,
}

impl Access {
    /// The store at `path` (usually `<data dir>/pairing.json`); a missing or unreadable
    /// file starts empty.
    pub fn open(path: &Path) -> Access {
        Access::with_store(Box::new(PairingFile::new(path)), path)
    }

    /// Decisions over `store`; `path` names it in error messages.
    pub fn with_store(store: Box<dyn PairingStore>, path: &Path) -> Access {
        let state = Mutex::new(store.load());
        Access { store, path: path.to_path_buf(), state }
    }

    /// Whether a message from `sender_id` (or `username`) in a direct or group chat may pass.
    pub fn decide(
        &self,
        channel: &str,
        allow: &AllowFrom,
        sender_id: &str,
        username: Option<&str>,
        chat_id: &str,
        is_group: bool,
    ) -> Decision {
        let listed = |ids: &[String]| {
            ids.iter().any(|id| id == sender_id || username.is_some_and(|u| id.trim_start_matches('@') == u))
        };
        match allow {
            AllowFrom::Everyone => Decision::Allow,
            AllowFrom::Only(ids) if listed(ids) => Decision::Allow,
            AllowFrom::Only(_) => Decision::Deny,
            AllowFrom::Pairing => {
                if self.lock().approved.get(channel).is_some_and(|ids| listed(ids)) {
                    return Decision::Allow;
                }
                let mut decision = Decision::Deny;
                let updated = self.store.update(&mut |state| {
                    if state.approved.get(channel).is_some_and(|ids| listed(ids)) {
                        decision = Decision::Allow;
                        return false;
                    }
                    if is_group || state.pending.values().any(|p| p.channel == channel && p.sender_id == sender_id) {
                        return false;
                    }
                    let code = new_code(state);
                    let pending = PendingPairing {
                        channel: channel.to_owned(),
                        sender_id: sender_id.to_owned(),
                        chat_id: chat_id.to_owned(),
                        issued: now(),
                    };
                    state.pending.insert(code.clone(), pending);
                    decision = Decision::SendCode(code);
                    true
                });
                match updated {
                    Ok(state) => *self.lock() = state,
                    Err(error) => {
                        tracing::warn!(path = %self.path.display(), %error, "cannot save pairing state; no code sent");
                        return Decision::Deny;
                    }
                }
                decision
            }
        }
    }

    /// Approves the request with `code`: its sender may talk from now on.
    pub fn approve(&self, code: &str) -> Result<PendingPairing, PairingError> {
        let code = code.trim().to_ascii_uppercase();
        let mut approved = None;
        let state = self
            .store
            .update(&mut |state| {
                let Some(pending) = state.pending.remove(&code) else { return false };
                let senders = state.approved.entry(pending.channel.clone()).or_default();
                if !senders.contains(&pending.sender_id) {
                    senders.push(pending.sender_id.clone());
                }
                approved = Some(pending);
                true
            })
            .map_err(|source| self.write_error(source))?;
        *self.lock() = state;
        approved.ok_or(PairingError::UnknownCode(code))
    }

    /// Approves `sender_ids` on `channel` without a code (bringing over approvals made
    /// elsewhere, e.g. by nanobot); returns the ids that were not approved yet.
    pub fn approve_senders(&self, channel: &str, sender_ids: &[String]) -> Result<Vec<String>, PairingError> {
        let mut added: Vec<String> = Vec::new();
        let state = self
            .store
            .update(&mut |state| {
                let approved = state.approved.entry(channel.to_owned()).or_default();
                added.clear();
                for id in sender_ids {
                    if !approved.contains(id) && !added.contains(id) {
                        added.push(id.clone());
                    }
                }
                approved.extend(added.iter().cloned());
                !added.is_empty()
            })
            .map_err(|source| self.write_error(source))?;
        *self.lock() = state;
        Ok(added)
    }

    /// Codes waiting for approval.
    pub fn pending(&self) -> Vec<(String, PendingPairing)> {
        self.reload().pending.clone().into_iter().collect()
    }

    /// Approved senders per channel.
    pub fn approved(&self) -> BTreeMap<String, Vec<String>> {
        self.reload().approved.clone()
    }

    /// Re-reads approvals made by another process (cheap: a small file).
    pub fn refresh(&self) {
        drop(self.reload());
    }

    /// The pairings as stored now (another process — `oxibot pairing approve` — may have
    /// changed them).
    fn reload(&self) -> MutexGuard<'_, Pairings> {
        let fresh = self.store.load();
        let mut state = self.lock();
        *state = fresh;
        state
    }

    fn write_error(&self, source: std::io::Error) -> PairingError {
        PairingError::File { action: "write", path: self.path.clone(), source }
    }

    fn lock(&self) -> MutexGuard<'_, Pairings> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A fresh 6-character code (no 0/O/1/I), unique among pending ones.
fn new_code(state: &Pairings) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0) as u64
        ^ (u64::from(std::process::id()) << 32);
    loop {
        let mut code = String::with_capacity(6);
        for _ in 0..6 {
            // xorshift64: good enough to make codes hard to guess by accident.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            code.push(char::from(ALPHABET[(seed % ALPHABET.len() as u64) as usize]));
        }
        if !state.pending.contains_key(&code) {
            return code;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil;
    use crate::testing::TempDir;

    #[test]
    fn senders_approved_elsewhere_are_added_once_and_let_in() {
        let dir = TempDir::new("access-import");
        let path = dir.path().join("pairing.json");
        let access = Access::open(&path);
        let ids = vec!["42".to_owned(), "7".to_owned(), "42".to_owned()];
        assert_eq!(access.approve_senders("telegram", &ids).unwrap(), ["42", "7"]);
        assert!(access.approve_senders("telegram", &ids).unwrap().is_empty(), "a second time adds nothing");
        assert_eq!(Access::open(&path).approved()["telegram"], ["42", "7"]);
        assert_eq!(access.decide("telegram", &AllowFrom::Pairing, "7", None, "7", false), Decision::Allow);
    }

    #[test]
    fn everyone_and_listed_senders_pass_and_others_do_not() {
        let dir = TempDir::new("access-list");
        let access = Access::open(&dir.path().join("pairing.json"));
        assert_eq!(access.decide("t", &AllowFrom::Everyone, "1", None, "1", false), Decision::Allow);
        let only = AllowFrom::Only(vec!["42".into(), "@sam".into()]);
        assert_eq!(access.decide("t", &only, "42", None, "42", false), Decision::Allow);
        assert_eq!(access.decide("t", &only, "9", Some("sam"), "9", false), Decision::Allow);
        assert_eq!(access.decide("t", &only, "9", None, "9", false), Decision::Deny);
    }

    #[test]
    fn an_unknown_sender_in_a_direct_chat_gets_one_code_and_approval_lets_them_in_for_good() {
        let dir = TempDir::new("access-pair");
        let path = dir.path().join("pairing.json");
        let access = Access::open(&path);
        let Decision::SendCode(code) = access.decide("telegram", &AllowFrom::Pairing, "77", None, "77", false) else {
            panic!("no code")
        };
        assert_eq!(code.len(), 6);
        assert_eq!(
            access.decide("telegram", &AllowFrom::Pairing, "77", None, "77", false),
            Decision::Deny,
            "the code is sent once"
        );
        assert_eq!(
            access.decide("telegram", &AllowFrom::Pairing, "88", None, "g", true),
            Decision::Deny,
            "no codes in groups"
        );
        // The owner approves from another process.
        let pending = Access::open(&path).approve(&code.to_lowercase()).unwrap();
        assert_eq!((pending.channel.as_str(), pending.sender_id.as_str()), ("telegram", "77"));
        access.refresh();
        assert_eq!(access.decide("telegram", &AllowFrom::Pairing, "77", None, "77", false), Decision::Allow);
        assert_eq!(
            Access::open(&path).decide("telegram", &AllowFrom::Pairing, "77", None, "77", false),
            Decision::Allow,
            "approvals persist"
        );
        assert!(matches!(access.approve(&code), Err(PairingError::UnknownCode(_))));
    }

    #[test]
    fn a_corrupt_pairing_file_is_moved_aside_and_a_new_code_goes_to_a_fresh_file() {
        let dir = TempDir::new("access-corrupt");
        let path = dir.path().join("pairing.json");
        let garbage = "{\"approved\": {\"telegram\": [\"42\"";
        std::fs::write(&path, garbage).unwrap();
        let access = Access::open(&path);
        let copies = fsutil::corrupt_copies(&path);
        assert_eq!(copies.len(), 1, "the unreadable file is kept aside");
        let Decision::SendCode(code) = access.decide("telegram", &AllowFrom::Pairing, "77", None, "77", false) else {
            panic!("no code")
        };
        assert_eq!(std::fs::read_to_string(&copies[0]).unwrap(), garbage, "the copy is never written over");
        assert!(std::fs::read_to_string(&path).unwrap().contains(&code), "the new code is in a fresh file");
    }
}

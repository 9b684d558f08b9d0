//! Where pairing approvals and codes are kept: the [`PairingStore`] trait, and its one
//! implementation today, [`PairingFile`] (`<data dir>/pairing.json`). A store may be shared
//! by several writers (the gateway issuing codes, `oxibot pairing approve` in another
//! process, later several kernels): every change is an [`PairingStore::update`] that reads what
//! is stored now and writes the edit with no other writer in between.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::FlockOperation;
use serde::{Deserialize, Serialize};

use crate::fsutil::{self, CorruptFile, StateFileError, write_atomic};

/// A pairing request waiting for the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingPairing {
    /// The channel.
    pub channel: String,
    /// The sender's id.
    pub sender_id: String,
    /// The chat the code was sent to.
    pub chat_id: String,
    /// When the code was issued (seconds since the epoch).
    pub issued: u64,
}

/// Approved senders and codes waiting for approval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pairings {
    /// Approved sender ids per channel.
    #[serde(default)]
    pub approved: BTreeMap<String, Vec<String>>,
    /// Codes issued and not yet approved.
    #[serde(default)]
    pub pending: BTreeMap<String, PendingPairing>,
}

/// Keeps [`Pairings`].
pub trait PairingStore: Send + Sync {
    /// What is stored now (another writer may have changed it); empty when nothing is stored
    /// or it cannot be read (reported).
    fn load(&self) -> Pairings;
    /// Applies `edit` to what is stored now and, when it says it changed something, stores
    /// the result, with no other writer in between; returns the state after the edit.
    fn update(&self, edit: &mut dyn FnMut(&mut Pairings) -> bool) -> io::Result<Pairings>;
}

/// Pairings in a JSON file, edited under an advisory lock on `<file>.lock`; a file that does
/// not parse is moved aside and reported (see [`fsutil::parse_state`]), never written over.
#[derive(Debug)]
pub struct PairingFile {
    path: PathBuf,
    /// Set when the file did not parse and could not be moved aside: it is then never
    /// written, so what it holds is not lost.
    left_in_place: AtomicBool,
}

impl PairingFile {
    /// The store at `path` (usually `<data dir>/pairing.json`).
    pub fn new(path: &Path) -> PairingFile {
        PairingFile { path: path.to_path_buf(), left_in_place: AtomicBool::new(false) }
    }

    /// Takes the lock every writer holds while it reads, edits and writes.
    fn lock(&self) -> io::Result<File> {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(self.path.with_file_name(name))?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive)?;
        Ok(file)
    }
}

impl PairingStore for PairingFile {
    fn load(&self) -> Pairings {
        match fsutil::read_state(&self.path) {
            Ok(state) => state.unwrap_or_default(),
            Err(StateFileError::Corrupt(CorruptFile::LeftInPlace { .. })) => {
                self.left_in_place.store(true, Ordering::Relaxed);
                Pairings::default()
            }
            Err(StateFileError::Corrupt(CorruptFile::MovedAside { .. })) => Pairings::default(),
            Err(error) => {
                tracing::warn!(%error, "cannot read the pairing state");
                Pairings::default()
            }
        }
    }

    fn update(&self, edit: &mut dyn FnMut(&mut Pairings) -> bool) -> io::Result<Pairings> {
        let _lock = self.lock()?;
        let mut state = self.load();
        if !edit(&mut state) {
            return Ok(state);
        }
        if self.left_in_place.load(Ordering::Relaxed) {
            return Err(io::Error::other("it does not parse and could not be moved aside; fix or remove it"));
        }
        let bytes = serde_json::to_vec_pretty(&state).map_err(io::Error::other)?;
        write_atomic(&self.path, &bytes)?;
        Ok(state)
    }
}

//! Small file-system helpers shared by the stores: whole-file replacement that a crash can
//! never leave half-written, and the one policy for a JSON state file that does not parse
//! (`pairing.json`, `cron/jobs.json`, `local-secrets.json`, `outbox.jsonl`): it is moved aside to
//! `<name>.corrupt-<unix seconds>`, reported with a warning naming the file and the parse
//! error, and never written over.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, RenameFlags};
use serde::de::DeserializeOwned;

/// Whole-file replacement lives in the plugin host, which caches manifests with it.
pub use oxibot_host::fsutil::write_atomic;

/// What a copy moved aside is named after: `<name>.corrupt-<unix seconds>` (with `-<n>` when
/// that name is taken).
pub const CORRUPT_SUFFIX: &str = ".corrupt-";

/// A JSON state file that did not parse.
#[derive(Debug, thiserror::Error)]
pub enum CorruptFile {
    /// It was moved aside and is kept there.
    #[error(
        "{} could not be read ({reason}); it was moved to {} and is kept there: fix it and move it back, or delete it",
        path.display(), backup.display()
    )]
    MovedAside {
        /// The state file.
        path: PathBuf,
        /// Where it is now.
        backup: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// It could not be moved aside; it is left alone, and must not be written over.
    #[error("{} could not be read ({reason}) and could not be moved aside ({source}); it is left as it is", path.display())]
    LeftInPlace {
        /// The state file.
        path: PathBuf,
        /// The parse error.
        reason: String,
        /// Why the move failed.
        #[source]
        source: io::Error,
    },
}

/// A JSON state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// It exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The state file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// It did not parse.
    #[error(transparent)]
    Corrupt(#[from] CorruptFile),
}

/// Reads the JSON state file `path` (`None` when there is none); one that does not parse is
/// moved aside and reported (see [`parse_state`]).
pub fn read_state<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateFileError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(parse_state(path, &bytes)?)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StateFileError::Read { path: path.to_path_buf(), source }),
    }
}

/// Parses `bytes`, just read from the state file `path`. When they do not parse, the file is
/// renamed to `<name>.corrupt-<unix seconds>` next to it (never over an existing file) and a
/// warning names the file and the parse error: the caller may start afresh and write a new
/// file, and what was there is kept.
pub fn parse_state<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, CorruptFile> {
    serde_json::from_slice(bytes).map_err(|error| move_aside(path, error.to_string()))
}

/// Moves the state file `path`, found unusable for `reason`, aside as [`parse_state`] does
/// and warns: for stores that parse their file themselves (the outbox's log of lines).
pub fn move_aside(path: &Path, reason: String) -> CorruptFile {
    let corrupt = set_aside(path, reason);
    tracing::warn!(file = %path.display(), error = %corrupt, "a state file does not parse");
    corrupt
}

/// Moves the unreadable `path` to the first free `<name>.corrupt-<unix seconds>[-<n>]`.
fn set_aside(path: &Path, reason: String) -> CorruptFile {
    let seconds = chrono::Utc::now().timestamp();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for n in 0..100 {
        let suffix = if n == 0 { format!("{seconds}") } else { format!("{seconds}-{n}") };
        let backup = path.with_file_name(format!("{name}{CORRUPT_SUFFIX}{suffix}"));
        match rename_no_replace(path, &backup) {
            Ok(()) => return CorruptFile::MovedAside { path: path.to_path_buf(), backup, reason },
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return CorruptFile::LeftInPlace { path: path.to_path_buf(), reason, source },
        }
    }
    let source = io::Error::new(io::ErrorKind::AlreadyExists, "too many copies already");
    CorruptFile::LeftInPlace { path: path.to_path_buf(), reason, source }
}

/// Renames `from` to `to` unless `to` exists (atomically where the file system can).
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    match rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            // A file system without RENAME_NOREPLACE: check, then rename (the callers hold
            // their file's lock, or are its only writer).
            if to.exists() {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            fs::rename(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

/// Copies of `path` moved aside as corrupt, oldest first.
pub fn corrupt_copies(path: &Path) -> Vec<PathBuf> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!("{name}{CORRUPT_SUFFIX}");
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut copies: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .map(|entry| entry.path())
        .collect();
    copies.sort();
    copies
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn a_state_file_that_does_not_parse_is_moved_aside_and_kept_as_it_was() {
        let dir = TempDir::new("state-file");
        let path = dir.path().join("state.json");
        fs::write(&path, "{\"half\": ").unwrap();
        let error = read_state::<serde_json::Value>(&path).unwrap_err();
        let StateFileError::Corrupt(CorruptFile::MovedAside { backup, .. }) = &error else { panic!("{error}") };
        assert!(backup.file_name().unwrap().to_string_lossy().starts_with("state.json.corrupt-"), "{error}");
        assert_eq!(fs::read_to_string(backup).unwrap(), "{\"half\": ");
        assert!(!path.exists());
        assert!(read_state::<serde_json::Value>(&path).unwrap().is_none(), "a new file may be started");
        fs::write(&path, "[").unwrap();
        let second = read_state::<serde_json::Value>(&path).unwrap_err();
        let StateFileError::Corrupt(CorruptFile::MovedAside { backup: other, .. }) = &second else {
            panic!("{second}")
        };
        assert_ne!(other, backup, "a second bad file gets its own name");
        assert_eq!(corrupt_copies(&path).len(), 2);
    }

    #[test]
    fn write_atomic_replaces_the_whole_file_and_leaves_no_temporary_file() {
        let dir = TempDir::new("atomic");
        let path = dir.path().join("sub/cursor");
        write_atomic(&path, b"a long first version").unwrap();
        write_atomic(&path, b"7").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "7");
        let names: Vec<_> = fs::read_dir(dir.path().join("sub")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["cursor"]);
    }
}

//! The store's side of a session's fence: a small file per session next to the session files
//! (`<sessions>/.fences/<key>.fence`) holding the highest fencing token that wrote the session:
//! the ownership bucket's creation time (so a bucket made anew, its revisions starting over,
//! outranks the old one) and the claim's revision.
//! A write takes the file's exclusive lock, is refused when the file names a newer token than
//! the writer's, records the writer's token when it is newer, and keeps the lock until the
//! write is done. So a kernel that still trusts an old token (a clock that ran slow, a pause
//! between its own check and its write, a TTL configured longer than the bucket's) cannot
//! write once a newer owner has written: the check and the write happen under one lock that
//! every kernel sharing the files takes.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

use super::keys::session_key;
use crate::session::SessionError;

/// A session's fence, held (locked) while this kernel writes the session.
#[derive(Debug)]
pub(crate) struct HeldFence {
    /// The locked file; closing it releases the lock.
    _file: File,
}

/// A fencing token as the fence file keeps it: the bucket's epoch, then the claim's revision.
pub(crate) type FileToken = (u64, u64);

/// Locks session `key`'s fence in `dir` for a write with `token` by node `node`; refused with
/// [`SessionError::NotOwner`] when a newer owner wrote the session.
pub(crate) fn hold(dir: &Path, key: &str, token: FileToken, node: &str) -> Result<HeldFence, SessionError> {
    let path = dir.join(format!("{}.fence", session_key(key)));
    let mut file = open_creating_dir(dir, &path)?;
    let failed = |source: std::io::Error| SessionError::Write { path: path.clone(), source };
    rustix::fs::flock(&file, FlockOperation::LockExclusive).map_err(|errno| failed(errno.into()))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(failed)?;
    let recorded = parse(&text);
    if recorded > token {
        tracing::warn!(session = %key, ?token, ?recorded, "a newer owner wrote the session; this write is refused");
        return Err(SessionError::NotOwner { key: key.to_owned(), node: node.to_owned() });
    }
    if recorded < token {
        file.set_len(0).map_err(failed)?;
        file.seek(SeekFrom::Start(0)).map_err(failed)?;
        file.write_all(format!("{} {}\n", token.0, token.1).as_bytes()).map_err(failed)?;
    }
    Ok(HeldFence { _file: file })
}

/// The token a fence file holds; (0, 0) for an empty or unreadable one (any owner outranks it).
fn parse(text: &str) -> FileToken {
    let mut numbers = text.split_whitespace().map(|number| number.parse::<u64>().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Opens (or makes) the fence file at `path`, making `dir` first when it is missing.
fn open_creating_dir(dir: &Path, path: &PathBuf) -> Result<File, SessionError> {
    let open = || OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
    match open() {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|source| SessionError::Write { path: dir.to_path_buf(), source })?;
            open().map_err(|source| SessionError::Write { path: path.clone(), source })
        }
        opened => opened.map_err(|source| SessionError::Write { path: path.clone(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_token_is_recorded_and_an_older_one_is_refused_afterwards() {
        let dir = std::env::temp_dir().join(format!("oxibot-fence-{}", std::process::id()));
        let fences = dir.join(".fences");
        drop(hold(&fences, "telegram:1", (100, 7), "kernel-a").expect("the first writer is let in"));
        drop(hold(&fences, "telegram:1", (100, 7), "kernel-a").expect("the same token again is let in"));
        drop(hold(&fences, "telegram:1", (100, 12), "kernel-b").expect("a newer owner is let in"));
        let refused = hold(&fences, "telegram:1", (100, 7), "kernel-a").expect_err("the older owner wrote again");
        assert!(matches!(refused, SessionError::NotOwner { ref node, .. } if node == "kernel-a"), "{refused:?}");
        drop(hold(&fences, "telegram:2", (100, 3), "kernel-a").expect("another session has its own fence"));
        // A bucket made anew counts its revisions from 1 again: its claims outrank the old ones.
        drop(hold(&fences, "telegram:1", (200, 1), "kernel-a").expect("a claim of a newer bucket is let in"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

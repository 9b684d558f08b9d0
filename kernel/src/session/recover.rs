//! Recovering the temporary files a killed writer left beside a session file
//! (`.<name>.<pid>.<n>.tmp`, see `SessionStore::write_whole`): a complete temporary file that
//! holds at least as many messages as the session file is the newer version and replaces it;
//! every other one is removed. Files of a writer that is still running are left alone.

use std::fs;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use super::format;

/// Recovers, then removes, the stale temporary files of the session file `path`.
pub(super) fn stale_temp_files(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    for temp in stale_temps(dir, name) {
        match newer_than(&temp, path) {
            Some(true) => match fs::rename(&temp, path) {
                Ok(()) => {
                    info!(from = %temp.display(), to = %path.display(), "recovered a session file a killed writer left");
                    continue;
                }
                Err(error) => warn!(path = %temp.display(), %error, "cannot recover a temporary session file"),
            },
            Some(false) => {}
            None => warn!(path = %temp.display(), "dropping an incomplete temporary session file"),
        }
        if let Err(error) = fs::remove_file(&temp) {
            warn!(path = %temp.display(), %error, "cannot remove a stale temporary session file");
        }
    }
}

/// Temporary files of `name` in `dir` whose writer is gone (another process, now dead, or
/// this one — a writer of ours finishes before the session is loaded again).
fn stale_temps(dir: &Path, name: &str) -> Vec<PathBuf> {
    let prefix = format!(".{name}.");
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut temps: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_name = entry.file_name().into_string().ok()?;
            let middle = file_name.strip_prefix(&prefix)?.strip_suffix(".tmp")?;
            let pid: u32 = middle.split('.').next()?.parse().ok()?;
            (pid == std::process::id() || !process_alive(pid)).then(|| entry.path())
        })
        .collect();
    // Oldest first, so the newest complete one is the last to be considered.
    temps.sort_by_key(|temp| fs::metadata(temp).and_then(|m| m.modified()).ok());
    temps
}

/// Whether the complete temporary file `temp` should replace `path`: `None` when it is not
/// complete, `Some(true)` when it holds at least as many messages as `path` (or `path` is
/// missing or unreadable).
fn newer_than(temp: &Path, path: &Path) -> Option<bool> {
    let decoded = format::decode(&fs::read(temp).ok()?).ok()?;
    if decoded.torn.is_some() || decoded.missing_newline || decoded.header.is_none() {
        return None;
    }
    let current = fs::read(path).ok().and_then(|bytes| format::decode(&bytes).ok());
    Some(current.is_none_or(|current| decoded.messages.len() >= current.messages.len()))
}

fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    const HEADER: &str = "{\"_type\": \"metadata\", \"key\": \"cli:direct\"}\n";
    const HI: &str = "{\"role\": \"user\", \"content\": \"hi\"}\n";
    const HELLO: &str = "{\"role\": \"assistant\", \"content\": \"hello\"}\n";

    /// A pid no process has (above the kernel's maximum).
    const DEAD_PID: u32 = 4_194_305;

    fn temp_name(pid: u32, n: u32) -> String {
        format!(".s.jsonl.{pid}.{n}.tmp")
    }

    #[test]
    fn a_complete_temp_file_of_a_first_save_becomes_the_session_file() {
        let dir = TempDir::new("recover-first");
        dir.write(&temp_name(DEAD_PID, 0), &format!("{HEADER}{HI}"));
        stale_temp_files(&dir.path().join("s.jsonl"));
        assert_eq!(dir.read("s.jsonl"), format!("{HEADER}{HI}"));
        assert!(!dir.path().join(temp_name(DEAD_PID, 0)).exists());
    }

    #[test]
    fn a_temp_file_with_fewer_messages_or_a_torn_end_is_removed_and_the_file_kept() {
        let dir = TempDir::new("recover-older");
        dir.write("s.jsonl", &format!("{HEADER}{HI}{HELLO}"));
        dir.write(&temp_name(DEAD_PID, 0), &format!("{HEADER}{HI}"));
        dir.write(&temp_name(DEAD_PID, 1), &format!("{HEADER}{HI}{{\"role\": \"assist"));
        stale_temp_files(&dir.path().join("s.jsonl"));
        assert_eq!(dir.read("s.jsonl"), format!("{HEADER}{HI}{HELLO}"));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "both temporary files are gone");
    }

    #[test]
    fn a_temp_file_of_a_running_writer_is_left_alone() {
        let dir = TempDir::new("recover-live");
        let live = temp_name(1, 0);
        dir.write(&live, &format!("{HEADER}{HI}"));
        stale_temp_files(&dir.path().join("s.jsonl"));
        assert!(dir.path().join(&live).exists());
        assert!(!dir.path().join("s.jsonl").exists());
    }
}

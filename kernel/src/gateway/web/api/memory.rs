//! The memory files in the browser: `SOUL.md`, `USER.md` and `memory/MEMORY.md` read and
//! saved (an atomic write, like an editor's, so the memory watcher, Dream and git see a
//! user's edit), and their git history: the log, one commit's diff, and restore.

use std::path::Path;

use serde_json::{Value, json};

use crate::fsutil::write_atomic;
use crate::memory::git::{CommitInfo, GitError, GitStore, TRACKED_FILES};

/// How many commits the log shows.
const LOG_LIMIT: usize = 50;

/// Why a memory request failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryApiError {
    /// Not one of the editable files.
    #[error("{0} is not a memory file (SOUL.md, USER.md or memory/MEMORY.md)")]
    NotMemoryFile(String),
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The repository could not be read or changed.
    #[error(transparent)]
    Git(#[from] GitError),
}

/// Every memory file's name and text (`null` when it does not exist yet).
pub fn files(workspace: &Path) -> Value {
    let files: Vec<Value> = TRACKED_FILES
        .iter()
        .map(|name| json!({"name": name, "content": std::fs::read_to_string(workspace.join(name)).ok()}))
        .collect();
    json!({"files": files})
}

/// Replaces memory file `name` with `content`.
pub fn save(workspace: &Path, name: &str, content: &str) -> Result<(), MemoryApiError> {
    if !TRACKED_FILES.contains(&name) {
        return Err(MemoryApiError::NotMemoryFile(name.to_owned()));
    }
    let path = workspace.join(name);
    let written =
        path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| write_atomic(&path, content.as_bytes()));
    written.map_err(|source| MemoryApiError::Write { path: path.display().to_string(), source })
}

/// The latest commits of the memory repository, newest first.
pub fn log(workspace: &Path) -> Result<Value, MemoryApiError> {
    let commits = store(workspace)?.log(LOG_LIMIT, None)?;
    Ok(json!({"commits": commits.iter().map(commit_json).collect::<Vec<_>>()}))
}

/// One commit and its diff against its parent.
pub fn diff(workspace: &Path, sha: &str) -> Result<Value, MemoryApiError> {
    let diff = store(workspace)?.show(Some(sha))?;
    Ok(json!({"commit": commit_json(&diff.commit), "files_changed": diff.files_changed, "diff": diff.diff}))
}

/// Puts the memory files back as they were before commit `sha`, recorded as a new commit.
pub fn restore(workspace: &Path, sha: &str) -> Result<Value, MemoryApiError> {
    let commit = store(workspace)?.restore(sha)?;
    Ok(json!({"commit": commit_json(&commit)}))
}

fn store(workspace: &Path) -> Result<GitStore, MemoryApiError> {
    let store = GitStore::mirrored(workspace, &crate::paths::data_dir());
    store.init()?;
    Ok(store)
}

fn commit_json(commit: &CommitInfo) -> Value {
    json!({"sha": commit.sha, "short": commit.short, "message": commit.message, "time": commit.time})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn a_memory_file_is_saved_and_read_back_and_other_paths_are_refused() {
        let dir = TempDir::new("web-memory");
        save(dir.path(), "memory/MEMORY.md", "- likes tea\n").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("memory/MEMORY.md")).unwrap(), "- likes tea\n");
        let listed = files(dir.path());
        assert_eq!(listed["files"][2]["content"], "- likes tea\n");
        assert_eq!(listed["files"][0]["content"], Value::Null);
        for bad in ["../x.md", "/etc/passwd", "AGENTS.md"] {
            assert!(matches!(save(dir.path(), bad, "x"), Err(MemoryApiError::NotMemoryFile(_))), "{bad}");
        }
    }

    #[test]
    fn a_restore_puts_back_the_text_before_a_commit() {
        let dir = TempDir::new("web-memory-git");
        save(dir.path(), "USER.md", "first\n").unwrap();
        let store = store(dir.path()).unwrap();
        save(dir.path(), "USER.md", "second\n").unwrap();
        let changed = store.commit("dream: edit").unwrap().unwrap();
        let shown = diff(dir.path(), &changed.sha).unwrap();
        assert!(shown["diff"].as_str().unwrap().contains("+second"), "{shown}");
        restore(dir.path(), &changed.sha).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("USER.md")).unwrap(), "first\n");
        assert!(log(dir.path()).unwrap()["commits"].as_array().unwrap().len() >= 3);
    }
}

//! Why a memory-versioning operation failed, and the mark of a repository oxibot created:
//! shared by the workspace repository ([`super::git`]) and its mirror ([`super::git_mirror`]).

use std::path::PathBuf;

/// The key in a repository's local config that marks it as oxibot's.
pub(super) const MANAGED_KEY: &str = "oxibot.managed";

/// Why a versioning operation failed. Each variant names what it was about.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The workspace has no `.git` yet: call [`super::git::GitStore::init`] first.
    #[error("no memory repository at {path} yet (it is created by init)")]
    NotInitialized {
        /// The missing `.git` directory.
        path: PathBuf,
    },
    /// `<workspace>/.git` exists but oxibot did not create it: versioning stays off.
    #[error("{path} is a git repository oxibot did not create; memory versioning stays off")]
    ForeignRepository {
        /// The foreign `.git` directory.
        path: PathBuf,
    },
    /// A libgit2 call failed.
    #[error("git could not {action} in {path}: {error}")]
    Git {
        /// What was being done.
        action: &'static str,
        /// The repository or file concerned.
        path: PathBuf,
        /// The underlying libgit2 error.
        error: git2::Error,
    },
    /// Reading or writing a file of the working directory failed.
    #[error("could not {action} {path}: {error}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying I/O error.
        error: std::io::Error,
    },
    /// The text given is not a commit id (hex digits, at least 4 of them).
    #[error("`{sha}` is not a commit id (expected 4 to 40 hex digits)")]
    InvalidSha {
        /// The text given.
        sha: String,
    },
    /// No commit has this id or id prefix.
    #[error("no commit matches `{sha}`")]
    UnknownCommit {
        /// The id or prefix given.
        sha: String,
    },
    /// Several objects start with this prefix.
    #[error("`{sha}` matches more than one commit; give more digits")]
    AmbiguousCommit {
        /// The prefix given.
        sha: String,
    },
    /// The commit is the first one: there is no earlier state to go back to.
    #[error("commit {sha} has no parent, so there is no earlier state to restore")]
    NoParent {
        /// The commit's short id.
        sha: String,
    },
    /// `show` without a sha found no commit whose message starts with `dream:`.
    #[error("no dream commit yet")]
    NoDreamCommit,
    /// The tracked files already hold the content they had before that commit.
    #[error("the memory files already match their state before {sha}; nothing to restore")]
    AlreadyRestored {
        /// The commit's short id.
        sha: String,
    },
    /// Versioning is switched off (no store, or the workspace is a foreign repository).
    #[error("memory versioning is off")]
    Disabled,
    /// The workspace's history does not continue the mirror's, which is left as it is.
    #[error(
        "the memory repository in the workspace does not continue the history kept in {mirror}; that copy is left as it is (move the workspace's .git away and run `oxibot memory restore` to go back to it)"
    )]
    MirrorDiverged {
        /// The mirror.
        mirror: PathBuf,
    },
}

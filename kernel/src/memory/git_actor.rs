//! The actor that runs the blocking [`GitStore`] work on a thread of its own.
//!
//! [`GitActor`] lives on a one-thread `SyncArbiter`, so libgit2 never blocks an
//! async event loop. It holds no store when versioning is off; it also switches
//! itself off when init finds a repository oxibot did not create, and from then
//! on every message answers [`GitError::Disabled`].

use actix::{Actor, Addr, Handler, Message, SyncArbiter, SyncContext};

use super::git::{CommitDiff, CommitInfo, GitError, GitStore, InitOutcome};
use super::git_owner::RepoOwner;

/// Serialises all versioning of one workspace's memory files.
#[derive(Debug)]
pub struct GitActor {
    store: Option<GitStore>,
    /// Whether the repository has been created or opened (done on the first message, so a
    /// kernel that never touches memory never pays for git).
    initialized: bool,
}

impl GitActor {
    /// An actor over `store`; `None` means versioning is off.
    pub fn new(store: Option<GitStore>) -> GitActor {
        GitActor { store, initialized: false }
    }

    /// Starts the actor over `store` on a one-thread `SyncArbiter`.
    /// Must be called from inside a running actix `System`.
    pub fn start(store: GitStore) -> Addr<GitActor> {
        SyncArbiter::start(1, move || GitActor::new(Some(store.clone())))
    }

    fn store(&self) -> Result<&GitStore, GitError> {
        self.store.as_ref().ok_or(GitError::Disabled)
    }

    /// Creates or opens the repository once, switching versioning off in a foreign one.
    fn init(&mut self) -> Result<InitOutcome, GitError> {
        let outcome = self.store()?.init();
        match &outcome {
            Ok(InitOutcome::Recovered { mirror, head }) => {
                tracing::warn!(mirror = %mirror.display(), head = %head.short, "the workspace's memory repository was missing; re-created it from its copy in the data dir");
                self.initialized = true;
            }
            Ok(_) => self.initialized = true,
            Err(GitError::ForeignRepository { path }) => {
                let nanobot = self.store.as_ref().and_then(|store| super::git_owner::owner(store).ok());
                if let Some(RepoOwner::Nanobot { .. }) = nanobot {
                    tracing::warn!(path = %path.display(), "the workspace's git repository is nanobot's memory store; memory versioning is off until `oxibot import nanobot` adopts it");
                } else {
                    tracing::warn!(path = %path.display(), "workspace is a git repository oxibot did not create; memory versioning is off");
                }
                self.store = None;
            }
            Err(_) => {}
        }
        outcome
    }

    /// The store, its repository ready.
    fn ready(&mut self) -> Result<&GitStore, GitError> {
        if !self.initialized {
            self.init()?;
        }
        self.store()
    }
}

impl Actor for GitActor {
    type Context = SyncContext<Self>;
}

/// Creates or opens the workspace's repository ([`GitStore::init`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<InitOutcome, GitError>")]
pub struct InitRepo;

/// Commits the tracked files if they changed ([`GitStore::commit`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<Option<CommitInfo>, GitError>")]
pub struct CommitMemory {
    /// The commit message, e.g. `dream: consolidate 12 messages`.
    pub message: String,
}

/// Lists recent commits, newest first ([`GitStore::log`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<CommitInfo>, GitError>")]
pub struct GetLog {
    /// At most this many commits.
    pub limit: usize,
    /// Only commits whose message starts with this, e.g. `dream:`.
    pub only_prefix: Option<String>,
}

/// The diff of one commit ([`GitStore::show`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<CommitDiff, GitError>")]
pub struct ShowCommit {
    /// Full or abbreviated id; `None` for the latest dream commit.
    pub sha: Option<String>,
}

/// Puts the tracked files back as they were before a commit ([`GitStore::restore`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<CommitInfo, GitError>")]
pub struct RestoreCommit {
    /// Full or abbreviated id of the commit to undo.
    pub sha: String,
}

impl Handler<InitRepo> for GitActor {
    type Result = Result<InitOutcome, GitError>;

    fn handle(&mut self, _: InitRepo, _: &mut SyncContext<Self>) -> Self::Result {
        self.init()
    }
}

impl Handler<CommitMemory> for GitActor {
    type Result = Result<Option<CommitInfo>, GitError>;

    fn handle(&mut self, msg: CommitMemory, _: &mut SyncContext<Self>) -> Self::Result {
        self.ready()?.commit(&msg.message)
    }
}

impl Handler<GetLog> for GitActor {
    type Result = Result<Vec<CommitInfo>, GitError>;

    fn handle(&mut self, msg: GetLog, _: &mut SyncContext<Self>) -> Self::Result {
        self.ready()?.log(msg.limit, msg.only_prefix.as_deref())
    }
}

impl Handler<ShowCommit> for GitActor {
    type Result = Result<CommitDiff, GitError>;

    fn handle(&mut self, msg: ShowCommit, _: &mut SyncContext<Self>) -> Self::Result {
        self.ready()?.show(msg.sha.as_deref())
    }
}

impl Handler<RestoreCommit> for GitActor {
    type Result = Result<CommitInfo, GitError>;

    fn handle(&mut self, msg: RestoreCommit, _: &mut SyncContext<Self>) -> Self::Result {
        self.ready()?.restore(&msg.sha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TempDir, git};

    #[test]
    fn the_actor_versions_the_memory_files_through_messages() {
        let dir = TempDir::new("actor");
        dir.write("memory/MEMORY.md", "old fact\n");
        let workspace = dir.path().to_path_buf();
        actix::System::new().block_on(async move {
            let addr = GitActor::start(GitStore::new(&workspace));
            let init = addr.send(InitRepo).await.expect("mailbox").expect("init");
            assert!(matches!(init, InitOutcome::Created { commit: Some(_) }));
            std::fs::write(workspace.join("memory/MEMORY.md"), "new fact\n").expect("write");
            let message = "dream: new fact".to_string();
            let dream = addr.send(CommitMemory { message }).await.expect("mailbox").expect("commit");
            let dream = dream.expect("a commit");
            let log = addr.send(GetLog { limit: 5, only_prefix: Some("dream:".into()) }).await.expect("mailbox");
            assert_eq!(log.expect("log"), std::slice::from_ref(&dream));
            let shown = addr.send(ShowCommit { sha: None }).await.expect("mailbox").expect("show");
            assert!(shown.diff.contains("-old fact\n+new fact\n"), "{}", shown.diff);
            let restored = addr.send(RestoreCommit { sha: dream.short.clone() }).await.expect("mailbox");
            assert_eq!(restored.expect("restore").message, format!("restore: files as before {}", dream.short));
            let unknown = addr.send(ShowCommit { sha: Some("ffffff".into()) }).await.expect("mailbox");
            assert!(matches!(unknown, Err(GitError::UnknownCommit { .. })));
        });
        assert_eq!(dir.read("memory/MEMORY.md"), "old fact\n");
        assert_eq!(git(dir.path(), &["log", "--format=%s"]).lines().count(), 3);
    }

    #[test]
    fn the_actor_switches_versioning_off_in_a_foreign_repository() {
        let dir = TempDir::new("actor-foreign");
        git(dir.path(), &["init", "-q"]);
        let workspace = dir.path().to_path_buf();
        actix::System::new().block_on(async move {
            let addr = GitActor::start(GitStore::new(&workspace));
            let init = addr.send(InitRepo).await.expect("mailbox");
            assert!(matches!(init, Err(GitError::ForeignRepository { .. })));
            let commit = addr.send(CommitMemory { message: "dream: x".into() }).await.expect("mailbox");
            assert!(matches!(commit, Err(GitError::Disabled)));
        });
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    }

    #[test]
    fn an_actor_without_a_store_answers_disabled() {
        actix::System::new().block_on(async {
            let addr = SyncArbiter::start(1, || GitActor::new(None));
            let log = addr.send(GetLog { limit: 1, only_prefix: None }).await.expect("mailbox");
            assert!(matches!(log, Err(GitError::Disabled)));
        });
    }
}

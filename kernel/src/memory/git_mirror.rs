//! A copy of the memory history outside the workspace: a bare repository in the data dir,
//! `<data dir>/memory-mirror/<workspace id>.git` (named like the recall index), brought up to
//! the workspace repository's HEAD after every commit.
//!
//! Commands run in the workspace (`exec`) can delete `<workspace>/.git`; the data dir is out
//! of their reach, so the mirror keeps the history, and [`super::git::GitStore::init`]
//! re-creates a deleted workspace repository from it. The mirror only ever moves forward: a
//! workspace history that does not continue it (a repository made afresh by someone else) is
//! refused with [`GitError::MirrorDiverged`], never written over it.

use std::path::{Path, PathBuf};

use git2::build::RepoBuilder;
use git2::{ConfigLevel, ErrorCode, Repository};

use super::git_error::{GitError, MANAGED_KEY};

/// Where fetched commits land in the mirror before its branch is moved to them.
const INCOMING: &str = "refs/oxibot/incoming";

/// The bare mirror of one workspace's memory repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    path: PathBuf,
}

impl Mirror {
    /// The mirror of `workspace`'s memory history in `data_dir`.
    pub fn for_workspace(data_dir: &Path, workspace: &Path) -> Mirror {
        let id = crate::session::location::workspace_id(workspace);
        Mirror { path: data_dir.join("memory-mirror").join(format!("{id}.git")) }
    }

    /// A mirror at `path` (a bare repository, created on the first update).
    pub fn at(path: PathBuf) -> Mirror {
        Mirror { path }
    }

    /// The bare repository's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mirror, if it exists.
    fn open(&self) -> Result<Option<Repository>, GitError> {
        if !self.path.exists() {
            return Ok(None);
        }
        Repository::open_bare(&self.path).map(Some).map_err(|error| self.git("open the mirror", error))
    }

    /// Whether the mirror holds at least one commit.
    pub fn has_history(&self) -> bool {
        self.open().ok().flatten().is_some_and(|repo| repo.head().is_ok_and(|head| head.target().is_some()))
    }

    /// Brings the mirror up to `repo`'s HEAD: its commits are fetched and the mirror's branch
    /// moves forward to them (the mirror is created first if missing). Refuses when the
    /// mirror's history is not part of `repo`'s.
    pub fn update_from(&self, repo: &Repository) -> Result<(), GitError> {
        let head = match repo.head() {
            Ok(head) => head,
            Err(error) if matches!(error.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => return Ok(()),
            Err(error) => return Err(self.git("read the workspace's HEAD", error)),
        };
        let (Some(branch), Some(new)) = (head.name().ok().map(str::to_owned), head.target()) else { return Ok(()) };
        let mirror = match self.open()? {
            Some(mirror) => mirror,
            None => self.create()?,
        };
        let source = repo.path().to_string_lossy().into_owned();
        let mut remote = mirror.remote_anonymous(&source).map_err(|error| self.git("reach the workspace", error))?;
        remote
            .fetch(&[format!("+{branch}:{INCOMING}")], None, None)
            .map_err(|error| self.git("fetch the workspace's history", error))?;
        let current = mirror.head().ok().and_then(|head| head.target());
        if let Some(old) = current {
            let continues = old == new
                || mirror.graph_descendant_of(new, old).map_err(|error| self.git("compare histories", error))?;
            if !continues {
                return Err(GitError::MirrorDiverged { mirror: self.path.clone() });
            }
        }
        mirror
            .reference(&branch, new, true, "oxibot: memory mirror")
            .and_then(|_| mirror.set_head(&branch))
            .map_err(|error| self.git("move the mirror's branch", error))?;
        Ok(())
    }

    /// Clones the mirror into `dir` (a fresh directory): a repository whose HEAD and index
    /// are the mirror's latest commit, marked as oxibot's.
    pub fn clone_into(&self, dir: &Path) -> Result<Repository, GitError> {
        let url = self.path.to_string_lossy().into_owned();
        let repo = RepoBuilder::new().clone(&url, dir).map_err(|error| self.git("clone the mirror", error))?;
        repo.remote_delete("origin").map_err(|error| self.git("forget the mirror as a remote", error))?;
        mark_managed(&repo).map_err(|error| self.git("mark the repository as oxibot's", error))?;
        Ok(repo)
    }

    fn create(&self) -> Result<Repository, GitError> {
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| GitError::Io {
                action: "create",
                path: parent.to_path_buf(),
                error,
            })?;
        }
        let repo = Repository::init_bare(&self.path).map_err(|error| self.git("create the mirror", error))?;
        mark_managed(&repo).map_err(|error| self.git("mark the mirror as oxibot's", error))?;
        Ok(repo)
    }

    fn git(&self, action: &'static str, error: git2::Error) -> GitError {
        GitError::Git { action, path: self.path.clone(), error }
    }
}

/// Marks `repo` as oxibot's own in its local config.
fn mark_managed(repo: &Repository) -> Result<(), git2::Error> {
    repo.config()
        .and_then(|config| config.open_level(ConfigLevel::Local))
        .and_then(|mut local| local.set_bool(MANAGED_KEY, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::git::{GitStore, InitOutcome};
    use crate::testing::{TempDir, git};

    /// A workspace with a store that mirrors into `<data>/mirror.git`.
    fn mirrored(label: &str) -> (TempDir, TempDir, GitStore) {
        let workspace = TempDir::new(label);
        let data = TempDir::new(&format!("{label}-data"));
        workspace.write("SOUL.md", "# Soul\n");
        workspace.write("memory/MEMORY.md", "first fact\n");
        let store = GitStore::new(workspace.path()).with_mirror(Mirror::at(data.path().join("mirror.git")));
        store.init().expect("init");
        (workspace, data, store)
    }

    #[test]
    fn every_commit_reaches_the_mirror() {
        let (workspace, data, store) = mirrored("mirror-commit");
        workspace.write("memory/MEMORY.md", "second fact\n");
        let commit = store.commit("dream: second").expect("commit").expect("a commit");
        let mirror = data.path().join("mirror.git");
        assert_eq!(git(&mirror, &["rev-parse", "HEAD"]).trim(), commit.sha);
        assert_eq!(git(&mirror, &["log", "--format=%s"]), "dream: second\ninit: memory files\n");
    }

    #[test]
    fn a_deleted_workspace_repository_is_re_created_from_the_mirror_with_its_history() {
        let (workspace, data, store) = mirrored("mirror-recover");
        workspace.write("memory/MEMORY.md", "second fact\n");
        let commit = store.commit("dream: second").expect("commit").expect("a commit");
        std::fs::remove_dir_all(workspace.path().join(".git")).expect("rm .git");
        std::fs::remove_file(workspace.path().join("memory/MEMORY.md")).expect("rm");
        let outcome = store.init().expect("init");
        let InitOutcome::Recovered { mirror, head } = outcome else { panic!("{outcome:?}") };
        assert_eq!((mirror, head.sha.clone()), (data.path().join("mirror.git"), commit.sha.clone()));
        assert_eq!(git(workspace.path(), &["log", "--format=%s"]), "dream: second\ninit: memory files\n");
        assert_eq!(git(workspace.path(), &["status", "--porcelain"]), " D memory/MEMORY.md\n", "files are not touched");
        let put_back = store.restore_latest().expect("restore");
        assert_eq!(put_back.1, ["memory/MEMORY.md"]);
        assert_eq!(workspace.read("memory/MEMORY.md"), "second fact\n");
        assert_eq!(git(workspace.path(), &["status", "--porcelain"]), "");
        assert!(store.log(1, None).is_ok(), "the re-created repository is oxibot's");
    }

    #[test]
    fn a_fresh_history_is_never_written_over_the_mirror() {
        let (workspace, data, store) = mirrored("mirror-diverged");
        workspace.write("memory/MEMORY.md", "second fact\n");
        store.commit("dream: second").expect("commit");
        let before = git(&data.path().join("mirror.git"), &["rev-parse", "HEAD"]);
        std::fs::remove_dir_all(workspace.path().join(".git")).expect("rm .git");
        // A store without the mirror starts a new history, as oxibot did before mirrors.
        let fresh = GitStore::new(workspace.path());
        fresh.init().expect("init");
        let repo = Repository::open(workspace.path()).expect("open");
        let error = Mirror::at(data.path().join("mirror.git")).update_from(&repo).expect_err("diverged");
        assert!(matches!(error, GitError::MirrorDiverged { .. }), "{error}");
        assert_eq!(git(&data.path().join("mirror.git"), &["rev-parse", "HEAD"]), before);
    }
}

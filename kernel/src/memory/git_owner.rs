//! Who made the workspace's `.git`, and taking over the memory repository nanobot made.
//!
//! nanobot (0.3) versions the same memory files in `<workspace>/.git`, a repository whose
//! first commit is `init: nanobot memory store`. oxibot never writes into a repository it did
//! not make ([`super::git`]), so in a workspace nanobot used, memory versioning stays off
//! until the user adopts that repository with `oxibot import nanobot`: adoption only adds
//! oxibot's mark to the repository's own config, so its commits stay as they are, Dream's
//! next changes are committed on top of them, and nanobot can keep using it too.

use std::ffi::OsStr;
use std::fs;

use git2::{ConfigLevel, Repository, RepositoryOpenFlags, Sort};

use super::git::{GitStore, is_managed};
use super::git_error::{GitError, MANAGED_KEY};

/// The message of the first commit of nanobot's memory repository.
pub const NANOBOT_INIT_MESSAGE: &str = "init: nanobot memory store";

/// Most commits counted when describing a repository.
const COUNT_LIMIT: usize = 100_000;

/// Who made `<workspace>/.git`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoOwner {
    /// There is no `.git`: oxibot creates its own when it first versions the memory files.
    Nobody,
    /// oxibot made it (or adopted it).
    Oxibot,
    /// nanobot made it for the memory files, and oxibot has not adopted it.
    Nanobot {
        /// How many commits its history has.
        commits: usize,
    },
    /// Someone else: the user's own repository, which oxibot leaves alone.
    Other,
}

/// Who made the workspace's repository (the workspace's own `.git` only, no upward search).
pub fn owner(store: &GitStore) -> Result<RepoOwner, GitError> {
    let git_dir = store.workspace().join(".git");
    let Ok(meta) = fs::symlink_metadata(&git_dir) else { return Ok(RepoOwner::Nobody) };
    // A `.git` file (a worktree or submodule link) or a symlink leads elsewhere: not ours.
    if !meta.is_dir() {
        return Ok(RepoOwner::Other);
    }
    let Ok(repo) = open(store) else { return Ok(RepoOwner::Other) };
    if repo.is_bare() {
        return Ok(RepoOwner::Other);
    }
    if is_managed(&repo) {
        return Ok(RepoOwner::Oxibot);
    }
    Ok(match nanobot_history(&repo) {
        Some(commits) => RepoOwner::Nanobot { commits },
        None => RepoOwner::Other,
    })
}

/// Takes over nanobot's memory repository: marks it as oxibot's so Dream's changes are
/// committed there from now on, and returns how many commits it has. Any other repository
/// is refused with [`GitError::ForeignRepository`] and left untouched; one already oxibot's
/// is left as it is.
pub fn adopt_nanobot(store: &GitStore) -> Result<usize, GitError> {
    let git_dir = store.workspace().join(".git");
    let commits = match owner(store)? {
        RepoOwner::Nanobot { commits } => commits,
        RepoOwner::Oxibot => return Ok(0),
        RepoOwner::Nobody => return Err(GitError::NotInitialized { path: git_dir }),
        RepoOwner::Other => return Err(GitError::ForeignRepository { path: git_dir }),
    };
    let repo = open(store).map_err(|error| GitError::Git { action: "open", path: git_dir.clone(), error })?;
    repo.config()
        .and_then(|config| config.open_level(ConfigLevel::Local))
        .and_then(|mut local| local.set_bool(MANAGED_KEY, true))
        .map_err(|error| GitError::Git { action: "mark the repository as oxibot's", path: git_dir, error })?;
    Ok(commits)
}

fn open(store: &GitStore) -> Result<Repository, git2::Error> {
    Repository::open_ext(store.workspace(), RepositoryOpenFlags::NO_SEARCH, std::iter::empty::<&OsStr>())
}

/// The number of commits when the history starts with nanobot's init commit.
fn nanobot_history(repo: &Repository) -> Option<usize> {
    let mut walk = repo.revwalk().ok()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE).ok()?;
    walk.push_head().ok()?;
    let mut ids = walk.take(COUNT_LIMIT).filter_map(Result::ok);
    let root = repo.find_commit(ids.next()?).ok()?;
    let first_line = root.message().ok()?.lines().next()?.trim().to_owned();
    (root.parent_count() == 0 && first_line == NANOBOT_INIT_MESSAGE).then(|| 1 + ids.count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TempDir, git};

    /// A workspace with a repository made the way nanobot makes its memory store.
    fn nanobot_workspace(label: &str) -> TempDir {
        let dir = TempDir::new(label);
        dir.write("SOUL.md", "# Soul\n");
        dir.write("memory/MEMORY.md", "- fact\n");
        dir.write(".gitignore", "/*\n!memory/\n!SOUL.md\n!memory/MEMORY.md\n!.gitignore\n");
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["add", ".gitignore", "SOUL.md", "memory/MEMORY.md"]);
        git(dir.path(), &["commit", "-q", "-m", NANOBOT_INIT_MESSAGE]);
        dir
    }

    #[test]
    fn nanobots_memory_repository_is_recognised_and_adopted_without_touching_its_history() {
        let dir = nanobot_workspace("adopt");
        let store = GitStore::new(dir.path());
        let head = git(dir.path(), &["rev-parse", "HEAD"]);
        assert_eq!(owner(&store).unwrap(), RepoOwner::Nanobot { commits: 1 });
        assert!(matches!(store.commit("dream: x"), Err(GitError::ForeignRepository { .. })), "not before adoption");

        assert_eq!(adopt_nanobot(&store).unwrap(), 1);
        assert_eq!(owner(&store).unwrap(), RepoOwner::Oxibot);
        assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head);
        dir.write("memory/MEMORY.md", "- fact\n- new fact\n");
        store.commit("dream: learned a fact").unwrap().unwrap();
        assert_eq!(
            git(dir.path(), &["log", "--format=%s"]),
            format!("dream: learned a fact\n{NANOBOT_INIT_MESSAGE}\n")
        );
        assert_eq!(adopt_nanobot(&store).unwrap(), 0, "adopting twice changes nothing");
    }

    #[test]
    fn a_users_own_repository_is_not_adopted_and_stays_untouched() {
        let dir = TempDir::new("adopt-foreign");
        dir.write("notes.md", "mine\n");
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["add", "notes.md"]);
        git(dir.path(), &["commit", "-q", "-m", "my project"]);
        let config_before = std::fs::read(dir.path().join(".git/config")).unwrap();
        let store = GitStore::new(dir.path());
        assert_eq!(owner(&store).unwrap(), RepoOwner::Other);
        assert!(matches!(adopt_nanobot(&store), Err(GitError::ForeignRepository { .. })));
        assert_eq!(std::fs::read(dir.path().join(".git/config")).unwrap(), config_before);
    }

    #[test]
    fn a_workspace_without_a_repository_has_no_owner() {
        let dir = TempDir::new("adopt-none");
        assert_eq!(owner(&GitStore::new(dir.path())).unwrap(), RepoOwner::Nobody);
    }
}

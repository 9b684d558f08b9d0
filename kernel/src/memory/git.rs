//! Version history of the memory files: a git repository of the workspace's own.
//!
//! [`GitStore`] keeps [`TRACKED_FILES`] under version control in `<workspace>/.git`.
//! It never searches upward for a repository (the workspace may sit inside the
//! user's own, which must stay untouched) and it only ever writes into a
//! repository it created itself, recognised by `oxibot.managed = true` in that
//! repository's local config. With a [`Mirror`] (the kernel always gives one), every
//! commit also reaches a bare copy in the data dir, and a deleted `<workspace>/.git` is
//! re-created from that copy. Every call is blocking: run it off the async event loop (see
//! [`super::git_actor`]).

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use super::git_error::GitError;
use super::git_error::MANAGED_KEY;
use super::git_mirror::Mirror;
use git2::{
    Commit, ConfigLevel, DiffFormat, DiffLine, ErrorCode, ObjectType, Oid, Repository, RepositoryOpenFlags, Signature,
    Sort, Tree,
};

/// The files that are versioned, relative to the workspace, `/`-separated.
pub const TRACKED_FILES: [&str; 3] = ["SOUL.md", "USER.md", "memory/MEMORY.md"];

/// Message prefix of the commits made by the dream (memory consolidation) pass.
pub const DREAM_PREFIX: &str = "dream:";
/// Where a new repository is prepared before it is moved to `<workspace>/.git`.
const STAGING_DIR: &str = ".oxibot/git-init";

const GITIGNORE: &str = ".gitignore";
const INIT_MESSAGE: &str = "init: memory files";
const FALLBACK_NAME: &str = "oxibot";
const FALLBACK_EMAIL: &str = "oxibot@localhost";

/// One commit, as shown to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Full hex id.
    pub sha: String,
    /// The first 7 hex digits of the id.
    pub short: String,
    /// First line of the commit message.
    pub message: String,
    /// Commit time as `YYYY-MM-DD HH:MM`, in the machine's local time zone.
    pub time: String,
}

/// A commit and its changes against its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitDiff {
    /// The commit shown.
    pub commit: CommitInfo,
    /// How many files the commit changed.
    pub files_changed: usize,
    /// Unified diff text, as in `git show`'s patch output.
    pub diff: String,
}

/// What [`GitStore::init`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// A new repository was created, with its initial commit (if any file existed).
    Created {
        /// The `init: memory files` commit.
        commit: Option<CommitInfo>,
    },
    /// The repository already existed (and is oxibot's own).
    Opened,
    /// `<workspace>/.git` was missing and was re-created from the mirror's history; the
    /// memory files were left as they were.
    Recovered {
        /// The mirror it came from.
        mirror: PathBuf,
        /// Its latest commit.
        head: CommitInfo,
    },
}

/// The version history of one workspace's memory files.
#[derive(Debug, Clone)]
pub struct GitStore {
    workspace: PathBuf,
    /// The copy of the history outside the workspace, kept up to date after each commit.
    mirror: Option<Mirror>,
}

impl GitStore {
    /// A store for `workspace`, without a mirror; nothing is read or written until a method
    /// is called.
    pub fn new(workspace: &Path) -> GitStore {
        GitStore { workspace: workspace.to_path_buf(), mirror: None }
    }

    /// The store the kernel uses: mirrored into `<data_dir>/memory-mirror/`.
    pub fn mirrored(workspace: &Path, data_dir: &Path) -> GitStore {
        GitStore::new(workspace).with_mirror(Mirror::for_workspace(data_dir, workspace))
    }

    /// The same store, copying its history into `mirror` after every commit.
    pub fn with_mirror(mut self, mirror: Mirror) -> GitStore {
        self.mirror = Some(mirror);
        self
    }

    /// The mirror, if the store keeps one.
    pub fn mirror(&self) -> Option<&Mirror> {
        self.mirror.as_ref()
    }

    /// The workspace directory whose memory files are versioned.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Creates `<workspace>/.git` (with a `.gitignore` and an initial commit) if it
    /// is missing, or opens it if it is oxibot's own. A repository oxibot did not
    /// create gives [`GitError::ForeignRepository`] and is left untouched.
    ///
    /// With a mirror, a missing `.git` is re-created from the mirror's history when it has
    /// one ([`InitOutcome::Recovered`]), and an opened repository brings the mirror up to date.
    pub fn init(&self) -> Result<InitOutcome, GitError> {
        if fs::symlink_metadata(self.git_dir()).is_ok() {
            let repo = self.open()?;
            if head_commit(&repo)?.is_some() {
                self.update_mirror(&repo);
                return Ok(InitOutcome::Opened);
            }
            // Created earlier but interrupted before its first commit: finish the job.
            return self.first_commit(&repo);
        }
        if let Some(mirror) = self.mirror.as_ref().filter(|mirror| mirror.has_history()) {
            let repo = self.create_with(|staging| mirror.clone_into(staging).map(drop))?;
            let head = head_commit(&repo)?.ok_or(GitError::NotInitialized { path: self.git_dir() })?;
            let head = commit_info(&head);
            if !self.workspace.join(GITIGNORE).exists() {
                write_atomically(&self.workspace.join(GITIGNORE), gitignore_text().as_bytes())?;
            }
            return Ok(InitOutcome::Recovered { mirror: mirror.path().to_path_buf(), head });
        }
        let repo = self.create()?;
        self.first_commit(&repo)
    }

    /// Stages the tracked files (deletions included) and commits them with
    /// `message`; `None` when nothing changed since the last commit.
    pub fn commit(&self, message: &str) -> Result<Option<CommitInfo>, GitError> {
        let repo = self.open()?;
        let commit = commit_tracked(&repo, &self.workspace, message)?;
        if commit.is_some() {
            self.update_mirror(&repo);
        }
        Ok(commit)
    }

    /// Puts every tracked file back as it is in the latest commit (a file absent there is
    /// deleted), writing only those that differ. Returns that commit and the files written.
    pub fn restore_latest(&self) -> Result<(CommitInfo, Vec<&'static str>), GitError> {
        let repo = self.open()?;
        let head = head_commit(&repo)?.ok_or(GitError::NotInitialized { path: self.git_dir() })?;
        let tree = head.tree().ctx("read the latest commit", repo.path())?;
        let mut written = Vec::new();
        for rel in TRACKED_FILES.into_iter().chain([GITIGNORE]) {
            let wanted = blob_at(&repo, &tree, rel)?;
            if fs::read(self.workspace.join(rel)).ok() != wanted {
                self.restore_file(&repo, &tree, rel)?;
                written.push(rel);
            }
        }
        // The index may still list what a deletion removed: make it match the commit again.
        let mut index = repo.index().ctx("read the index", repo.path())?;
        index.read_tree(&tree).and_then(|()| index.write()).ctx("reset the index", repo.path())?;
        Ok((commit_info(&head), written))
    }

    /// Up to `limit` commits, newest first; with `only_prefix`, only those whose
    /// message starts with it (e.g. `Some("dream:")`).
    pub fn log(&self, limit: usize, only_prefix: Option<&str>) -> Result<Vec<CommitInfo>, GitError> {
        let repo = self.open()?;
        let commits = history(&repo, limit, only_prefix)?;
        Ok(commits.iter().map(commit_info).collect())
    }

    /// The diff of a commit against its parent (the empty tree for the first one).
    /// `sha` may be abbreviated (4 digits or more); `None` means the latest commit
    /// whose message starts with `dream:`.
    pub fn show(&self, sha: Option<&str>) -> Result<CommitDiff, GitError> {
        let repo = self.open()?;
        let commit = match sha {
            Some(sha) => find_commit(&repo, sha)?,
            None => latest_dream(&repo)?,
        };
        let (files_changed, diff) = patch_text(&repo, &commit)?;
        Ok(CommitDiff { commit: commit_info(&commit), files_changed, diff })
    }

    /// Puts the tracked files back to their content in the PARENT of commit `sha`
    /// (a file absent there is deleted), writing each atomically, and commits that
    /// as `restore: files as before <short sha>`.
    pub fn restore(&self, sha: &str) -> Result<CommitInfo, GitError> {
        let repo = self.open()?;
        let commit = find_commit(&repo, sha)?;
        let short = commit_info(&commit).short;
        if commit.parent_count() == 0 {
            return Err(GitError::NoParent { sha: short });
        }
        let parent_tree =
            commit.parent(0).and_then(|parent| parent.tree()).ctx("read the parent commit", repo.path())?;
        for rel in TRACKED_FILES {
            self.restore_file(&repo, &parent_tree, rel)?;
        }
        let message = format!("restore: files as before {short}");
        let commit =
            commit_tracked(&repo, &self.workspace, &message)?.ok_or(GitError::AlreadyRestored { sha: short })?;
        self.update_mirror(&repo);
        Ok(commit)
    }

    /// Brings the mirror up to `repo`'s HEAD; a failure is logged, never fatal (the commit
    /// is made, only its copy is missing).
    fn update_mirror(&self, repo: &Repository) {
        if let Some(mirror) = &self.mirror
            && let Err(error) = mirror.update_from(repo)
        {
            tracing::warn!(%error, mirror = %mirror.path().display(), "could not copy the memory history out of the workspace");
        }
    }

    fn git_dir(&self) -> PathBuf {
        self.workspace.join(".git")
    }

    /// Opens `<workspace>/.git` itself (no upward search) and checks it is ours.
    fn open(&self) -> Result<Repository, GitError> {
        let git_dir = self.git_dir();
        if fs::symlink_metadata(&git_dir).is_err() {
            return Err(GitError::NotInitialized { path: git_dir });
        }
        let repo = Repository::open_ext(&self.workspace, RepositoryOpenFlags::NO_SEARCH, std::iter::empty::<&OsStr>())
            .ctx("open the repository", &git_dir)?;
        if repo.is_bare() || !is_managed(&repo) {
            return Err(GitError::ForeignRepository { path: git_dir });
        }
        Ok(repo)
    }

    /// Creates the repository in the workspace and marks it as oxibot's.
    /// Creates and marks the repository in a staging directory, then renames its `.git` into
    /// the workspace, so a kill part-way never leaves an unmarked `.git` that would later be
    /// taken for the user's own.
    fn create(&self) -> Result<Repository, GitError> {
        self.create_with(|staging| {
            let staged = Repository::init(staging).ctx("create a repository", staging)?;
            staged
                .config()
                .and_then(|config| config.open_level(ConfigLevel::Local))
                .and_then(|mut local| local.set_bool(MANAGED_KEY, true))
                .ctx("mark the repository as oxibot's", staged.path())
        })
    }

    /// Makes a marked repository in the staging directory with `make`, then moves its `.git`
    /// into the workspace.
    fn create_with(&self, make: impl FnOnce(&Path) -> Result<(), GitError>) -> Result<Repository, GitError> {
        let staging = self.workspace.join(STAGING_DIR);
        if staging.exists() {
            fs::remove_dir_all(&staging).io_ctx("remove a leftover", &staging)?;
        }
        fs::create_dir_all(&staging).io_ctx("create", &staging)?;
        make(&staging)?;
        fs::rename(staging.join(".git"), self.git_dir()).io_ctx("move into place", &self.git_dir())?;
        let _ = fs::remove_dir_all(&staging);
        self.open()
    }

    fn first_commit(&self, repo: &Repository) -> Result<InitOutcome, GitError> {
        write_atomically(&self.workspace.join(GITIGNORE), gitignore_text().as_bytes())?;
        let commit = commit_tracked(repo, &self.workspace, INIT_MESSAGE)?;
        self.update_mirror(repo);
        Ok(InitOutcome::Created { commit })
    }

    fn restore_file(&self, repo: &Repository, tree: &Tree<'_>, rel: &str) -> Result<(), GitError> {
        let target = self.workspace.join(rel);
        match blob_at(repo, tree, rel)? {
            Some(content) => write_atomically(&target, &content),
            None => remove_if_present(&target),
        }
    }
}

/// Adds the source of a failure (what was done, where) to git2 and I/O results.
trait Context<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, GitError>;
}

impl<T> Context<T> for Result<T, git2::Error> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, GitError> {
        self.map_err(|error| GitError::Git { action, path: path.to_path_buf(), error })
    }
}

trait IoContext<T> {
    fn io_ctx(self, action: &'static str, path: &Path) -> Result<T, GitError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io_ctx(self, action: &'static str, path: &Path) -> Result<T, GitError> {
        self.map_err(|error| GitError::Io { action, path: path.to_path_buf(), error })
    }
}

/// True when the repository's own (local) config says oxibot created it.
pub(super) fn is_managed(repo: &Repository) -> bool {
    repo.config()
        .and_then(|config| config.open_level(ConfigLevel::Local))
        .and_then(|local| local.get_bool(MANAGED_KEY))
        .unwrap_or(false)
}

/// Ignore everything but the tracked files (and the ignore file itself); every
/// directory on a tracked file's path is re-included, then its contents ignored.
fn gitignore_text() -> String {
    let mut lines = vec![
        "# Written by oxibot: only the memory files are versioned here.".to_string(),
        "/*".to_string(),
        format!("!/{GITIGNORE}"),
    ];
    for rel in TRACKED_FILES {
        if let Some((dirs, _)) = rel.rsplit_once('/') {
            let mut prefix = String::new();
            for dir in dirs.split('/') {
                prefix = format!("{prefix}/{dir}");
                push_unique(&mut lines, format!("!{prefix}/"));
                push_unique(&mut lines, format!("{prefix}/*"));
            }
        }
        lines.push(format!("!/{rel}"));
    }
    lines.join("\n") + "\n"
}

fn push_unique(lines: &mut Vec<String>, line: String) {
    if !lines.contains(&line) {
        lines.push(line);
    }
}

/// Stages the tracked files and `.gitignore` and commits if the tree changed.
fn commit_tracked(repo: &Repository, workspace: &Path, message: &str) -> Result<Option<CommitInfo>, GitError> {
    let tree_id = stage_tracked(repo, workspace)?;
    let parent = head_commit(repo)?;
    let parent_tree_id = match &parent {
        Some(commit) => commit.tree_id(),
        None => Oid::hash_object(ObjectType::Tree, b"").ctx("hash the empty tree", repo.path())?,
    };
    if tree_id == parent_tree_id {
        return Ok(None);
    }
    let tree = repo.find_tree(tree_id).ctx("read the staged tree", repo.path())?;
    let signature = signature(repo)?;
    let parents: Vec<&Commit<'_>> = parent.iter().collect();
    let id = repo.commit(Some("HEAD"), &signature, &signature, message, &tree, &parents).ctx("commit", repo.path())?;
    let commit = repo.find_commit(id).ctx("read the new commit", repo.path())?;
    Ok(Some(commit_info(&commit)))
}

/// Brings the index in line with the working copies of the tracked files and
/// returns the id of the tree it describes.
fn stage_tracked(repo: &Repository, workspace: &Path) -> Result<Oid, GitError> {
    let mut index = repo.index().ctx("read the index", repo.path())?;
    for rel in TRACKED_FILES.iter().chain([&GITIGNORE]) {
        let path = Path::new(rel);
        let staged = if workspace.join(path).is_file() { index.add_path(path) } else { index.remove_path(path) };
        staged.ctx("stage", &workspace.join(path))?;
    }
    index.write().ctx("write the index", repo.path())?;
    index.write_tree().ctx("write the tree", repo.path())
}

/// The commit HEAD points to; `None` before the first commit.
fn head_commit(repo: &Repository) -> Result<Option<Commit<'_>>, GitError> {
    match repo.head() {
        Ok(head) => head.peel_to_commit().map(Some).ctx("read HEAD", repo.path()),
        Err(error) if matches!(error.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => Ok(None),
        Err(error) => Err(error).ctx("read HEAD", repo.path()),
    }
}

/// The configured user, or `oxibot <oxibot@localhost>` when there is none.
fn signature(repo: &Repository) -> Result<Signature<'static>, GitError> {
    repo.signature().or_else(|_| Signature::now(FALLBACK_NAME, FALLBACK_EMAIL)).ctx("make a signature", repo.path())
}

fn commit_info(commit: &Commit<'_>) -> CommitInfo {
    let sha = commit.id().to_string();
    let short = sha.chars().take(7).collect();
    let message = String::from_utf8_lossy(commit.message_bytes()).lines().next().unwrap_or_default().to_string();
    CommitInfo { sha, short, message, time: local_time(commit.time()) }
}

fn local_time(time: git2::Time) -> String {
    chrono::DateTime::from_timestamp(time.seconds(), 0)
        .map(|utc| utc.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// Up to `limit` commits reachable from HEAD, newest first, optionally filtered
/// by message prefix.
fn history<'r>(repo: &'r Repository, limit: usize, prefix: Option<&str>) -> Result<Vec<Commit<'r>>, GitError> {
    let mut found = Vec::new();
    if limit == 0 || head_commit(repo)?.is_none() {
        return Ok(found);
    }
    let mut walk = repo.revwalk().ctx("walk the history", repo.path())?;
    walk.set_sorting(Sort::TOPOLOGICAL).ctx("walk the history", repo.path())?;
    walk.push_head().ctx("walk the history", repo.path())?;
    for id in walk {
        let id = id.ctx("walk the history", repo.path())?;
        let commit = repo.find_commit(id).ctx("read a commit", repo.path())?;
        if prefix.is_none_or(|prefix| commit.message_bytes().starts_with(prefix.as_bytes())) {
            found.push(commit);
            if found.len() == limit {
                break;
            }
        }
    }
    Ok(found)
}

fn latest_dream(repo: &Repository) -> Result<Commit<'_>, GitError> {
    history(repo, 1, Some(DREAM_PREFIX))?.into_iter().next().ok_or(GitError::NoDreamCommit)
}

/// Looks a commit up by its full id or an abbreviation of at least 4 hex digits.
fn find_commit<'r>(repo: &'r Repository, sha: &str) -> Result<Commit<'r>, GitError> {
    let sha = sha.trim();
    if !(4..=40).contains(&sha.len()) || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(GitError::InvalidSha { sha: sha.to_string() });
    }
    repo.find_commit_by_prefix(sha).map_err(|error| match error.code() {
        ErrorCode::Ambiguous => GitError::AmbiguousCommit { sha: sha.to_string() },
        ErrorCode::NotFound => GitError::UnknownCommit { sha: sha.to_string() },
        _ => GitError::Git { action: "look up a commit", path: repo.path().to_path_buf(), error },
    })
}

/// Number of files changed and the patch text of `commit` against its first parent.
fn patch_text(repo: &Repository, commit: &Commit<'_>) -> Result<(usize, String), GitError> {
    let tree = commit.tree().ctx("read a commit's tree", repo.path())?;
    let parent_tree = match commit.parent_count() {
        0 => None,
        _ => Some(commit.parent(0).and_then(|parent| parent.tree()).ctx("read the parent commit", repo.path())?),
    };
    let diff = repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None).ctx("diff", repo.path())?;
    let mut text = String::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        push_diff_line(&mut text, &line);
        true
    })
    .ctx("print the diff", repo.path())?;
    Ok((diff.deltas().len(), text))
}

/// Header and hunk lines come complete; content lines need their `+`/`-`/` ` marker.
fn push_diff_line(text: &mut String, line: &DiffLine<'_>) {
    if matches!(line.origin(), '+' | '-' | ' ') {
        text.push(line.origin());
    }
    text.push_str(&String::from_utf8_lossy(line.content()));
}

/// The content of `rel` in `tree`, or `None` if the tree has no such file.
fn blob_at(repo: &Repository, tree: &Tree<'_>, rel: &str) -> Result<Option<Vec<u8>>, GitError> {
    let entry = match tree.get_path(Path::new(rel)) {
        Ok(entry) => entry,
        Err(error) if error.code() == ErrorCode::NotFound => return Ok(None),
        Err(error) => return Err(error).ctx("read a tree entry", Path::new(rel)),
    };
    let blob = repo.find_blob(entry.id()).ctx("read a file's content", Path::new(rel))?;
    Ok(Some(blob.content().to_vec()))
}

/// Writes to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &Path, content: &[u8]) -> Result<(), GitError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).io_ctx("create", dir)?;
    let name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.oxibot-tmp"));
    let written = fs::File::create(&temp).and_then(|mut file| {
        file.write_all(content)?;
        file.sync_all()
    });
    if let Err(error) = written.and_then(|()| fs::rename(&temp, path)) {
        let _ = fs::remove_file(&temp);
        return Err(error).io_ctx("write", path);
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<(), GitError> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error).io_ctx("delete", path),
        _ => Ok(()),
    }
}

/// Temporary workspaces and the real `git` command line, for this module's and
/// the actor's tests.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TempDir, git};

    /// A workspace with all three memory files and an initialised store.
    fn initialised(label: &str) -> (TempDir, GitStore) {
        let dir = TempDir::new(label);
        dir.write("SOUL.md", "# Soul\n");
        dir.write("USER.md", "# User\n");
        dir.write("memory/MEMORY.md", "old fact\n");
        let store = GitStore::new(dir.path());
        store.init().expect("init");
        (dir, store)
    }

    #[test]
    fn init_creates_a_repository_whose_log_shows_the_init_commit() {
        let dir = TempDir::new("init");
        dir.write("SOUL.md", "# Soul\n");
        let outcome = GitStore::new(dir.path()).init().expect("init");
        let InitOutcome::Created { commit: Some(commit) } = outcome else { panic!("{outcome:?}") };
        assert_eq!(commit.message, "init: memory files");
        assert_eq!(commit.short.len(), 7);
        assert_eq!(commit.time.len(), "2026-01-02 03:04".len());
        let log = git(dir.path(), &["log", "--oneline"]);
        assert_eq!(log.trim(), format!("{} init: memory files", commit.short));
        let files = git(dir.path(), &["ls-files"]);
        assert_eq!(files.lines().collect::<Vec<_>>(), [".gitignore", "SOUL.md"]);
        assert_eq!(GitStore::new(dir.path()).init().expect("reopen"), InitOutcome::Opened);
    }

    #[test]
    fn the_gitignore_hides_everything_but_the_memory_files() {
        let (dir, _store) = initialised("ignore");
        dir.write("notes.txt", "x");
        dir.write("sessions/x.jsonl", "{}");
        dir.write("memory/history.jsonl", "{}");
        dir.write("skills/a/SKILL.md", "a");
        assert_eq!(git(dir.path(), &["status", "--porcelain", "--untracked-files=all"]), "");
        dir.write("memory/MEMORY.md", "new fact\n");
        assert_eq!(git(dir.path(), &["status", "--porcelain", "--untracked-files=all"]), " M memory/MEMORY.md\n");
    }

    #[test]
    fn commit_returns_the_commit_when_files_changed_and_none_otherwise() {
        let (dir, store) = initialised("commit");
        dir.write("USER.md", "# User\nlikes tea\n");
        let commit = store.commit("memory: user likes tea").expect("commit").expect("a commit");
        assert_eq!(commit.message, "memory: user likes tea");
        assert_eq!(commit.sha, git(dir.path(), &["rev-parse", "HEAD"]).trim());
        assert!(
            git(dir.path(), &["log", "--oneline"]).starts_with(&format!("{} memory: user likes tea\n", commit.short))
        );
        assert_eq!(store.commit("nothing").expect("commit"), None);
        dir.write("notes.txt", "ignored files are not committed");
        assert_eq!(store.commit("still nothing").expect("commit"), None);
    }

    #[test]
    fn commit_records_a_deleted_memory_file() {
        let (dir, store) = initialised("delete");
        std::fs::remove_file(dir.path().join("USER.md")).expect("remove");
        assert!(store.commit("memory: forget the user").expect("commit").is_some());
        assert!(!git(dir.path(), &["ls-files"]).contains("USER.md"));
    }

    #[test]
    fn log_lists_newest_first_and_filters_by_prefix() {
        let (dir, store) = initialised("log");
        for (i, message) in ["dream: first", "memory: edit", "dream: second"].iter().enumerate() {
            dir.write("memory/MEMORY.md", &format!("fact {i}\n"));
            store.commit(message).expect("commit");
        }
        let all: Vec<String> = store.log(10, None).expect("log").into_iter().map(|c| c.message).collect();
        assert_eq!(all, ["dream: second", "memory: edit", "dream: first", "init: memory files"]);
        let dreams: Vec<String> = store.log(10, Some("dream:")).expect("log").into_iter().map(|c| c.message).collect();
        assert_eq!(dreams, ["dream: second", "dream: first"]);
        assert_eq!(store.log(1, Some("dream:")).expect("log").len(), 1);
        assert!(store.log(0, None).expect("log").is_empty());
    }

    #[test]
    fn show_without_a_sha_gives_the_latest_dream_diff() {
        let (dir, store) = initialised("show");
        assert!(matches!(store.show(None), Err(GitError::NoDreamCommit)));
        dir.write("memory/MEMORY.md", "new fact\n");
        let dream = store.commit("dream: rewrite memory").expect("commit").expect("a commit");
        dir.write("USER.md", "# User\nchanged later\n");
        store.commit("memory: later").expect("commit");
        let shown = store.show(None).expect("show");
        assert_eq!(shown.commit, dream);
        assert_eq!(shown.files_changed, 1);
        assert!(shown.diff.contains("diff --git a/memory/MEMORY.md b/memory/MEMORY.md"), "{}", shown.diff);
        assert!(shown.diff.contains("--- a/memory/MEMORY.md\n+++ b/memory/MEMORY.md\n@@"), "{}", shown.diff);
        assert!(shown.diff.contains("\n-old fact\n+new fact\n"), "{}", shown.diff);
    }

    #[test]
    fn show_accepts_an_abbreviated_sha_and_names_a_bad_one() {
        let (dir, store) = initialised("abbrev");
        let first = store.log(1, None).expect("log").remove(0);
        let shown = store.show(Some(&first.sha[..5])).expect("show root commit");
        assert_eq!(shown.commit, first);
        assert_eq!(shown.files_changed, 4);
        assert!(shown.diff.contains("+old fact\n"), "{}", shown.diff);
        let unknown = store.show(Some("0000000")).expect_err("unknown");
        assert!(matches!(&unknown, GitError::UnknownCommit { sha } if sha == "0000000"), "{unknown:?}");
        assert!(unknown.to_string().contains("0000000"));
        assert!(matches!(store.show(Some("abc")), Err(GitError::InvalidSha { .. })));
        assert!(matches!(store.show(Some("not-hex")), Err(GitError::InvalidSha { .. })));
        drop(dir);
    }

    #[test]
    fn restore_puts_the_files_back_as_before_the_commit() {
        let (dir, store) = initialised("restore");
        dir.write("memory/MEMORY.md", "rewritten by a dream\n");
        std::fs::remove_file(dir.path().join("USER.md")).expect("remove");
        let dream = store.commit("dream: rewrite").expect("commit").expect("a commit");
        dir.write("USER.md", "# User\nmade by the dream's successor\n");
        let later = store.commit("memory: new user").expect("commit").expect("a commit");
        let restored = store.restore(&later.short).expect("restore");
        assert_eq!(restored.message, format!("restore: files as before {}", later.short));
        assert!(!dir.path().join("USER.md").exists(), "USER.md did not exist before {}", later.short);
        assert_eq!(dir.read("memory/MEMORY.md"), "rewritten by a dream\n");
        let restored = store.restore(&dream.sha).expect("restore");
        assert_eq!(dir.read("memory/MEMORY.md"), "old fact\n");
        assert_eq!(dir.read("USER.md"), "# User\n");
        let log = git(dir.path(), &["log", "--oneline"]);
        assert!(log.starts_with(&format!("{} restore: files as before {}\n", restored.short, dream.short)), "{log}");
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
        assert!(matches!(store.restore(&dream.sha), Err(GitError::AlreadyRestored { .. })));
    }

    #[test]
    fn restore_of_the_first_commit_is_refused() {
        let (_dir, store) = initialised("root");
        let first = store.log(1, None).expect("log").remove(0);
        assert!(matches!(store.restore(&first.sha), Err(GitError::NoParent { sha }) if sha == first.short));
    }

    #[test]
    fn a_workspace_inside_another_repository_leaves_that_repository_untouched() {
        let outer = TempDir::new("outer");
        outer.write("dotfile", "x\n");
        git(outer.path(), &["init", "-q"]);
        git(outer.path(), &["add", "dotfile"]);
        git(outer.path(), &["commit", "-q", "-m", "dotfiles"]);
        outer.write("dotfile", "changed, not staged\n");
        let status_before = git(outer.path(), &["status", "--porcelain"]);
        let head_before = git(outer.path(), &["rev-parse", "HEAD"]);
        let index_before = std::fs::read(outer.path().join(".git/index")).expect("index");
        let config_before = std::fs::read(outer.path().join(".git/config")).expect("config");

        let workspace = outer.path().join("workspace");
        std::fs::create_dir_all(workspace.join("memory")).expect("mkdir");
        std::fs::write(workspace.join("memory/MEMORY.md"), "fact\n").expect("write");
        let store = GitStore::new(&workspace);
        assert!(matches!(store.init().expect("init"), InitOutcome::Created { commit: Some(_) }));
        std::fs::write(workspace.join("memory/MEMORY.md"), "fact 2\n").expect("write");
        assert!(store.commit("memory: edit").expect("commit").is_some());

        assert_eq!(std::fs::read(outer.path().join(".git/index")).expect("index"), index_before);
        assert_eq!(std::fs::read(outer.path().join(".git/config")).expect("config"), config_before);
        assert_eq!(git(outer.path(), &["rev-parse", "HEAD"]), head_before);
        assert_eq!(git(outer.path(), &["status", "--porcelain"]), format!("{status_before}?? workspace/\n"));
        assert_eq!(git(&workspace, &["log", "--format=%s"]), "memory: edit\ninit: memory files\n");
    }

    #[test]
    fn a_foreign_repository_in_the_workspace_is_refused_and_untouched() {
        let dir = TempDir::new("foreign");
        dir.write("SOUL.md", "mine\n");
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["add", "SOUL.md"]);
        git(dir.path(), &["commit", "-q", "-m", "user commit"]);
        dir.write("SOUL.md", "edited\n");
        let head_before = git(dir.path(), &["rev-parse", "HEAD"]);
        let index_before = std::fs::read(dir.path().join(".git/index")).expect("index");
        let store = GitStore::new(dir.path());
        assert!(matches!(store.init(), Err(GitError::ForeignRepository { path }) if path == dir.path().join(".git")));
        assert!(matches!(store.commit("dream: x"), Err(GitError::ForeignRepository { .. })));
        assert!(matches!(store.log(5, None), Err(GitError::ForeignRepository { .. })));
        assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head_before);
        assert_eq!(std::fs::read(dir.path().join(".git/index")).expect("index"), index_before);
        assert!(!dir.path().join(".gitignore").exists());
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), " M SOUL.md\n");
    }

    #[test]
    fn operations_before_init_say_the_repository_is_missing() {
        let dir = TempDir::new("missing");
        assert!(matches!(GitStore::new(dir.path()).log(5, None), Err(GitError::NotInitialized { .. })));
    }

    #[test]
    fn the_gitignore_reincludes_each_directory_of_a_tracked_file() {
        let text = gitignore_text();
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            ["/*", "!/.gitignore", "!/SOUL.md", "!/USER.md", "!/memory/", "/memory/*", "!/memory/MEMORY.md"]
        );
    }
}

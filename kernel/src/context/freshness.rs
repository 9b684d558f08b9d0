//! Whether anything the system prompt is built from may have changed since it was last built,
//! answered with one non-blocking `read` instead of a `stat` per file, skill and program: inotify
//! watches on every directory the prompt reads (the workspace, `memory/`, `skills/` and each
//! skill's directory, the built-in copies under `.oxibot/skills/`) and on the directories of
//! `PATH`, where skills' programs are looked up.
//!
//! The watches are set *before* the prompt is read, so an edit during a build shows up as an
//! event and the next prompt is built again. Any event at all, a full event queue, a directory
//! removed or a watch that cannot be added makes the next prompt be built afresh. Changes
//! inotify cannot see — through a symbolic link or a second hard link to a file the prompt
//! reads — are ruled out by not trusting the watch while such a file exists: the prompt is then
//! built every time, as it would be without this module.

use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::builtin::BUILTIN_SKILLS_DIR;
use super::prompt::{BOOTSTRAP_FILES, DREAM_CURSOR_FILE, HISTORY_FILE, MEMORY_FILE};

/// Every change to a directory's entries or their contents, and the directory going away.
const FLAGS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// The watches over one workspace's prompt sources.
#[derive(Debug, Default)]
pub(crate) struct Freshness {
    /// The inotify descriptor (non-blocking), made by the first [`Freshness::arm`]; `None`
    /// before, or when inotify is unavailable, in which case nothing is ever known to be
    /// unchanged.
    fd: Option<OwnedFd>,
    /// Whether every source is watched since the last [`Freshness::arm`] and none is out of
    /// inotify's sight.
    trusted: bool,
    /// Watch descriptors added so far: a new one after the build means a directory appeared
    /// that the build may have read before it was watched.
    watched: HashSet<i32>,
}

impl Freshness {
    /// Whether nothing the prompt reads may have changed since the last [`Freshness::arm`]
    /// that returned `true`. Reads (and so forgets) the events queued since.
    pub(crate) fn unchanged(&mut self) -> bool {
        let quiet = self.fd.as_ref().is_some_and(drained_quietly);
        self.trusted &= quiet;
        self.trusted
    }

    /// Watches the prompt's sources in `workspace` and the `PATH` directories, before the
    /// prompt is built; afterwards, a prompt built now can be reused while
    /// [`Freshness::unchanged`] says so. Returns whether it can.
    pub(crate) fn arm(&mut self, workspace: &Path) -> bool {
        if self.fd.is_none() {
            self.fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)
                .inspect_err(|error| tracing::debug!(%error, "no inotify: the system prompt is built every turn"))
                .ok();
        }
        let Some(fd) = &self.fd else { return false };
        drained_quietly(fd);
        let mut complete = true;
        for dir in watched_dirs(workspace) {
            complete &= watch(fd, &dir, &mut self.watched).is_some();
        }
        self.trusted = complete && !any_file_out_of_sight(workspace);
        self.trusted
    }

    /// Whether watches are set (an inotify descriptor is open).
    #[cfg(test)]
    pub(crate) fn is_watching(&self) -> bool {
        self.fd.is_some()
    }

    /// Watches the directory of each program given by path (`/opt/x/bin/tool`), after the
    /// build that found them; a directory not watched before makes the next prompt be built
    /// again, so a change between the build's look and the watch is not missed.
    pub(crate) fn watch_programs<'a>(&mut self, programs: impl Iterator<Item = &'a str>) {
        let Some(fd) = &self.fd else { return };
        for program in programs.filter(|p| p.contains(std::path::MAIN_SEPARATOR)) {
            let dir = Path::new(program).parent().map(nearest_existing).unwrap_or_default();
            let before = self.watched.len();
            if watch(fd, &dir, &mut self.watched).is_none() || self.watched.len() != before {
                self.trusted = false;
            }
        }
    }
}

/// Reads every queued event; whether there were none (and no error).
fn drained_quietly(fd: &OwnedFd) -> bool {
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut quiet = true;
    let mut reader = inotify::Reader::new(fd, &mut buf);
    loop {
        match reader.next() {
            Ok(event) => {
                quiet = false;
                if event.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                    tracing::debug!("inotify queue overflow: the system prompt is built again");
                }
            }
            Err(rustix::io::Errno::AGAIN) => return quiet,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// Adds a watch on `dir`; its descriptor, `None` when it cannot be watched.
fn watch(fd: &OwnedFd, dir: &Path, watched: &mut HashSet<i32>) -> Option<i32> {
    match inotify::add_watch(fd, dir, FLAGS) {
        Ok(descriptor) => {
            watched.insert(descriptor);
            Some(descriptor)
        }
        Err(error) => {
            tracing::debug!(dir = %dir.display(), %error, "cannot watch a directory the system prompt reads");
            None
        }
    }
}

/// Every directory whose entries the prompt depends on: for one that does not exist, the
/// nearest one above it that does (which sees it being created).
fn watched_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![workspace.to_path_buf(), nearest_existing(&workspace.join("memory"))];
    for skills in [workspace.join("skills"), workspace.join(BUILTIN_SKILLS_DIR)] {
        dirs.push(nearest_existing(&skills));
        dirs.extend(subdirectories(&skills));
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path).filter(|dir| dir.is_absolute()).map(|dir| nearest_existing(&dir)));
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// `path` if it is a directory, else the nearest ancestor that is.
fn nearest_existing(path: &Path) -> PathBuf {
    path.ancestors().find(|dir| dir.is_dir()).unwrap_or(Path::new("/")).to_path_buf()
}

/// The directories directly inside `dir`.
fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().map(|entry| entry.path()).filter(|path| path.is_dir()).collect()
}

/// Whether a file the prompt reads is a symbolic link or has a second hard link, so that it
/// may change without an event in the directories watched.
fn any_file_out_of_sight(workspace: &Path) -> bool {
    let mut files: Vec<PathBuf> = BOOTSTRAP_FILES.iter().map(|name| workspace.join(name)).collect();
    files.extend([MEMORY_FILE, HISTORY_FILE, DREAM_CURSOR_FILE].iter().map(|name| workspace.join(name)));
    for skills in [workspace.join("skills"), workspace.join(BUILTIN_SKILLS_DIR)] {
        files.extend(subdirectories(&skills).into_iter().map(|dir| dir.join("SKILL.md")));
    }
    files.iter().any(|file| out_of_sight(file))
}

/// Whether `file` is a symbolic link or a file with more than one name.
fn out_of_sight(file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(file).is_ok_and(|meta| meta.file_type().is_symlink() || meta.nlink() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn nothing_is_unchanged_before_the_watch_is_armed() {
        let ws = TempDir::new("fresh-unarmed");
        assert!(!Freshness::default().unchanged());
        let mut fresh = Freshness::default();
        assert!(fresh.arm(ws.path()));
        assert!(fresh.unchanged());
    }

    #[test]
    fn an_edit_anywhere_the_prompt_reads_is_noticed_once() {
        let ws = TempDir::new("fresh-edits");
        ws.write("skills/notes/SKILL.md", "notes");
        for edit in ["SOUL.md", "memory/MEMORY.md", "skills/notes/SKILL.md", "skills/new/SKILL.md"] {
            let mut fresh = Freshness::default();
            assert!(fresh.arm(ws.path()), "{edit}");
            assert!(fresh.unchanged(), "{edit}");
            ws.write(edit, "changed");
            assert!(!fresh.unchanged(), "{edit} was not noticed");
            assert!(!fresh.unchanged(), "{edit}: the watch must be armed again after a change");
        }
    }

    #[test]
    fn a_linked_file_puts_the_prompt_out_of_sight_of_the_watch() {
        let ws = TempDir::new("fresh-links");
        let elsewhere = TempDir::new("fresh-links-target");
        let target = elsewhere.write("soul.md", "soul");
        std::os::unix::fs::symlink(&target, ws.path().join("SOUL.md")).unwrap();
        assert!(!Freshness::default().arm(ws.path()), "a symlinked file is trusted");

        let ws = TempDir::new("fresh-hard-links");
        let original = ws.write("USER.md", "user");
        std::fs::hard_link(&original, elsewhere.path().join("user-copy.md")).unwrap();
        assert!(!Freshness::default().arm(ws.path()), "a hard-linked file is trusted");
    }

    #[test]
    fn a_newly_watched_program_directory_asks_for_one_more_build() {
        let ws = TempDir::new("fresh-programs");
        let bin = TempDir::new("fresh-programs-bin");
        let program = bin.path().join("tool").display().to_string();
        let mut fresh = Freshness::default();
        assert!(fresh.arm(ws.path()));
        fresh.watch_programs([program.as_str()].into_iter());
        assert!(!fresh.unchanged(), "a directory watched only after the build was trusted");
        assert!(fresh.arm(ws.path()));
        fresh.watch_programs([program.as_str()].into_iter());
        assert!(fresh.unchanged());
        bin.write("tool", "#!/bin/sh\n");
        assert!(!fresh.unchanged(), "a program appearing was not noticed");
    }
}

//! Walking a directory tree for `list_dir`, `glob` and `grep`: depth-first in name order,
//! noise directories skipped, symlinked directories never entered, and symlinks whose target
//! is outside a restricted workspace left out entirely.
//!
//! The walk holds a handle on each directory it lists and opens a subdirectory relative to
//! its parent's handle without following a symlink, so a directory swapped for a symlink
//! mid-walk is skipped rather than followed out of the workspace. Where a symlink leads is
//! judged beneath the workspace root ([`WorkspaceDir::metadata`]).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use oxibot_plugin::beneath::{AccessError, DirEntry, DirHandle, WorkspaceDir};

/// Directory names that are almost never what a listing or search is after (nanobot's list,
/// plus the other version-control directories).
pub const NOISE_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "dist",
    "build",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".coverage",
    "htmlcov",
];

/// A file whose presence marks a directory as a cache (e.g. Cargo's `target/`); such
/// directories are skipped too (see <https://bford.info/cachedir/>).
const CACHE_TAG: &str = "CACHEDIR.TAG";

/// Most entries one walk visits; a blocking walk cannot be cancelled, so it is bounded.
pub const MAX_VISITS: usize = 100_000;

/// How many skipped noise directories a walk remembers by path.
const SKIPPED_KEPT: usize = 10;

/// One file or directory met during a walk.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its path: the walk's root joined with the names below it.
    pub path: PathBuf,
    /// Whether it is a directory (or a symlink to one).
    pub is_dir: bool,
    /// Whether it is a regular file (or a symlink to one).
    pub is_file: bool,
    /// Whether it is a symlink (a linked directory is handed out but never entered).
    pub is_link: bool,
    /// 1 for the root's children, 2 for theirs, and so on.
    pub depth: usize,
    /// When it (or what it links to) was last modified.
    pub modified: SystemTime,
    /// The directory holding it, open.
    parent: Arc<DirHandle>,
    /// Its name in `parent`.
    name: OsString,
}

impl Entry {
    /// Opens it for reading (non-blocking; check that it is a regular file before reading).
    ///
    /// A plain entry is opened relative to its directory's handle without following a
    /// symlink put there since; a symlink is followed beneath the workspace root.
    pub fn open_file(&self, files: &WorkspaceDir) -> Result<File, AccessError> {
        if self.is_link {
            files.open_read(&self.parent.target().child(&self.name))
        } else {
            self.parent.open_file(&self.name)
        }
    }
}

/// What a walk saw besides the entries it handed out.
#[derive(Debug, Default)]
pub struct Report {
    /// Whether the walk stopped at [`MAX_VISITS`] before seeing everything.
    pub cut_short: bool,
    /// The first few noise directories skipped.
    pub skipped: Vec<PathBuf>,
    /// How many noise directories were skipped in all.
    pub skipped_count: usize,
}

/// A walk's settings.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// Deepest level handed out (1 = only the root's children); `None` for no limit.
    max_depth: Option<usize>,
}

impl Walk {
    /// A walk of the whole tree.
    pub fn new() -> Walk {
        Walk::default()
    }

    /// Limits how deep the walk goes.
    pub fn max_depth(mut self, depth: usize) -> Walk {
        self.max_depth = Some(depth);
        self
    }

    /// Visits entries under the directory `base` depth-first, each directory's children in
    /// name order, until `visit` returns false or [`MAX_VISITS`] entries were seen. Symlinks
    /// are judged by `files`: when it is confined, those leading outside are left out.
    pub fn run(&self, files: &WorkspaceDir, base: DirHandle, mut visit: impl FnMut(&Entry) -> bool) -> Report {
        let mut report = Report::default();
        let mut stack: Vec<Entry> = Vec::new();
        push_children(files, Arc::new(base), 1, &mut stack, &mut report);
        let mut visits = 0;
        while let Some(entry) = stack.pop() {
            if visits == MAX_VISITS {
                report.cut_short = true;
                break;
            }
            visits += 1;
            if !visit(&entry) {
                break;
            }
            let descend = entry.is_dir && !entry.is_link && self.max_depth.is_none_or(|max| entry.depth < max);
            if descend {
                // Not following a symlink: one swapped in since the listing is skipped.
                if let Ok(dir) = entry.parent.open_subdir(&entry.name) {
                    push_children(files, Arc::new(dir), entry.depth + 1, &mut stack, &mut report);
                }
            }
        }
        report
    }
}

/// Pushes the wanted children of `dir` so that they pop in name order.
fn push_children(files: &WorkspaceDir, dir: Arc<DirHandle>, depth: usize, stack: &mut Vec<Entry>, report: &mut Report) {
    let Ok(entries) = dir.entries() else { return };
    let mut children: Vec<Entry> =
        entries.into_iter().filter_map(|child| classify(files, &dir, child, depth, report)).collect();
    children.sort_by(|a, b| b.path.cmp(&a.path));
    stack.extend(children);
}

/// The entry for `child`, or `None` when it is noise, a dangling link or leads outside.
fn classify(
    files: &WorkspaceDir,
    dir: &Arc<DirHandle>,
    child: DirEntry,
    depth: usize,
    report: &mut Report,
) -> Option<Entry> {
    let path = dir.target().path().join(&child.name);
    let meta = dir.symlink_metadata(&child.name).ok()?;
    let entry = |meta: &std::fs::Metadata, is_link: bool| Entry {
        path: path.clone(),
        is_dir: meta.is_dir(),
        is_file: meta.is_file(),
        is_link,
        depth,
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        parent: dir.clone(),
        name: child.name.clone(),
    };
    if meta.file_type().is_symlink() {
        let target = files.metadata(&dir.target().child(&child.name)).ok()?;
        return Some(entry(&target, true));
    }
    if meta.is_dir() && is_noise(dir, &child.name) {
        report.skipped_count += 1;
        if report.skipped.len() < SKIPPED_KEPT {
            report.skipped.push(path);
        }
        return None;
    }
    Some(entry(&meta, false))
}

/// Whether the directory `name` in `dir` is a noise directory by name or by cache tag.
fn is_noise(dir: &DirHandle, name: &OsStr) -> bool {
    let named = NOISE_DIRS.iter().any(|noise| name == *noise);
    named
        || dir
            .open_subdir(name)
            .and_then(|sub| sub.symlink_metadata(OsStr::new(CACHE_TAG)))
            .is_ok_and(|meta| meta.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};

    /// What a walk of the whole workspace hands out, confined or not.
    fn walked(ws: &Workspace, confined: bool, walk: &Walk) -> (Vec<String>, Report) {
        let files = if confined { ws.files() } else { ws.unrestricted_files() };
        let root = ws.path();
        let base = files.open_dir(&files.resolve(".").unwrap()).unwrap();
        let mut seen = Vec::new();
        let report = walk.run(&files, base, |entry| {
            let relative = entry.path.strip_prefix(root).unwrap().display().to_string();
            seen.push(if entry.is_dir { format!("{relative}/") } else { relative });
            true
        });
        (seen, report)
    }

    #[test]
    fn walks_go_depth_first_in_name_order_and_skip_noise() {
        let ws = Workspace::new("walk");
        for file in [
            "b/z.txt",
            "a/inner/f.txt",
            "a/g.txt",
            ".git/HEAD",
            "node_modules/x/y.js",
            "target/CACHEDIR.TAG",
            "target/debug/app",
        ] {
            ws.write(file, "x");
        }
        let (seen, report) = walked(&ws, false, &Walk::new());
        assert_eq!(seen, ["a/", "a/g.txt", "a/inner/", "a/inner/f.txt", "b/", "b/z.txt"]);
        assert_eq!(report.skipped_count, 3);
        assert!(!report.cut_short);
    }

    #[test]
    fn max_depth_stops_the_descent() {
        let ws = Workspace::new("walk");
        ws.write("a/b/c.txt", "x");
        let (seen, _) = walked(&ws, false, &Walk::new().max_depth(1));
        assert_eq!(seen, ["a/"]);
    }

    #[test]
    fn symlinks_out_of_a_confined_walk_are_left_out_and_linked_dirs_not_entered() {
        let ws = Workspace::new("walk");
        let outside = outside_dir("walk");
        outside.write("secret.txt", "x");
        ws.write("real/inside.txt", "x");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("out-file")).unwrap();
        std::os::unix::fs::symlink(ws.path().join("real"), ws.path().join("loop")).unwrap();
        let (seen, _) = walked(&ws, true, &Walk::new());
        assert_eq!(seen, ["loop/", "real/", "real/inside.txt"]);
        let (unconfined, _) = walked(&ws, false, &Walk::new());
        assert_eq!(unconfined, ["loop/", "out-dir/", "out-file", "real/", "real/inside.txt"]);
    }

    #[test]
    fn a_visitor_returning_false_stops_the_walk() {
        let ws = Workspace::new("walk");
        for name in ["a", "b", "c"] {
            ws.write(name, "x");
        }
        let mut seen = 0;
        let files = ws.files();
        let base = files.open_dir(&files.resolve(".").unwrap()).unwrap();
        Walk::new().run(&files, base, |_| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2);
    }
}

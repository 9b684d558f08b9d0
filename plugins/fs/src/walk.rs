//! Walking a directory tree for `list_dir`, `glob` and `grep`: depth-first in name order,
//! noise directories skipped, symlinked directories never entered, and symlinks whose target
//! is outside a restricted workspace left out entirely.

use std::path::{Path, PathBuf};

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
    /// Whether it is a symlink (a linked directory is handed out but never entered).
    pub is_link: bool,
    /// 1 for the root's children, 2 for theirs, and so on.
    pub depth: usize,
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
    /// When set (canonical), symlinks whose target lies outside it are left out.
    confine_to: Option<PathBuf>,
    /// Deepest level handed out (1 = only the root's children); `None` for no limit.
    max_depth: Option<usize>,
}

impl Walk {
    /// A walk that, when `confine_to` is given, never yields symlinks leading outside it.
    pub fn new(confine_to: Option<&Path>) -> Walk {
        let confine_to = confine_to.map(|root| root.canonicalize().unwrap_or_else(|_| root.to_path_buf()));
        Walk { confine_to, max_depth: None }
    }

    /// Limits how deep the walk goes.
    pub fn max_depth(mut self, depth: usize) -> Walk {
        self.max_depth = Some(depth);
        self
    }

    /// Visits entries under `root` depth-first, each directory's children in name order,
    /// until `visit` returns false or [`MAX_VISITS`] entries were seen.
    pub fn run(&self, root: &Path, mut visit: impl FnMut(&Entry) -> bool) -> Report {
        let mut report = Report::default();
        let mut stack: Vec<Entry> = Vec::new();
        self.push_children(root, 1, &mut stack, &mut report);
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
                self.push_children(&entry.path, entry.depth + 1, &mut stack, &mut report);
            }
        }
        report
    }

    /// Pushes the wanted children of `dir` so that they pop in name order.
    fn push_children(&self, dir: &Path, depth: usize, stack: &mut Vec<Entry>, report: &mut Report) {
        let Ok(read) = std::fs::read_dir(dir) else { return };
        let mut children: Vec<Entry> =
            read.flatten().filter_map(|child| self.classify(child.path(), depth, report)).collect();
        children.sort_by(|a, b| b.path.cmp(&a.path));
        stack.extend(children);
    }

    /// The entry for `path`, or `None` when it is noise, a dangling link or leads outside.
    fn classify(&self, path: PathBuf, depth: usize, report: &mut Report) -> Option<Entry> {
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            let target = path.canonicalize().ok()?;
            if self.confine_to.as_ref().is_some_and(|root| !target.starts_with(root)) {
                return None;
            }
            let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
            return Some(Entry { path, is_dir, is_link: true, depth });
        }
        if meta.is_dir() && is_noise(&path) {
            report.skipped_count += 1;
            if report.skipped.len() < SKIPPED_KEPT {
                report.skipped.push(path);
            }
            return None;
        }
        Some(Entry { path, is_dir: meta.is_dir(), is_link: false, depth })
    }
}

/// Whether the directory at `path` is a noise directory by name or by cache tag.
fn is_noise(path: &Path) -> bool {
    let named = path.file_name().is_some_and(|name| NOISE_DIRS.iter().any(|noise| name == *noise));
    named || path.join(CACHE_TAG).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};

    fn walked(root: &Path, walk: &Walk) -> (Vec<String>, Report) {
        let mut seen = Vec::new();
        let report = walk.run(root, |entry| {
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
        let (seen, report) = walked(ws.path(), &Walk::new(None));
        assert_eq!(seen, ["a/", "a/g.txt", "a/inner/", "a/inner/f.txt", "b/", "b/z.txt"]);
        assert_eq!(report.skipped_count, 3);
        assert!(!report.cut_short);
    }

    #[test]
    fn max_depth_stops_the_descent() {
        let ws = Workspace::new("walk");
        ws.write("a/b/c.txt", "x");
        let (seen, _) = walked(ws.path(), &Walk::new(None).max_depth(1));
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
        let (seen, _) = walked(ws.path(), &Walk::new(Some(ws.path())));
        assert_eq!(seen, ["loop/", "real/", "real/inside.txt"]);
        let (unconfined, _) = walked(ws.path(), &Walk::new(None));
        assert_eq!(unconfined, ["loop/", "out-dir/", "out-file", "real/", "real/inside.txt"]);
    }

    #[test]
    fn a_visitor_returning_false_stops_the_walk() {
        let ws = Workspace::new("walk");
        for name in ["a", "b", "c"] {
            ws.write(name, "x");
        }
        let mut seen = 0;
        Walk::new(None).run(ws.path(), |_| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2);
    }
}

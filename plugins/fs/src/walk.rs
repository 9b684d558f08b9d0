//! Walking a directory tree for `list_dir`, `glob` and `grep`: noise directories skipped,
//! symlinked directories never entered, symlinks out of a restricted workspace left out.

use std::path::{Path, PathBuf};

use regex::Regex;

/// Directories that are almost never what a search is after.
pub const NOISE_DIRS: &[&str] = &[
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".idea", ".cache", "target", "dist", "build", "htmlcov",
];

/// One file or directory met during a walk.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its path (under the walk's root).
    pub path: PathBuf,
    /// Whether it is a directory.
    pub is_dir: bool,
}

/// How a walk treats the tree.
#[derive(Debug, Clone)]
pub struct WalkOptions<'a> {
    /// When set, symlinks whose target is outside this directory are left out.
    pub confine_to: Option<&'a Path>,
    /// How deep to go (1 = only the root's children); `None` for no limit.
    pub max_depth: Option<usize>,
    /// Whether to skip [`NOISE_DIRS`].
    pub skip_noise: bool,
}

/// Visits entries under `root` depth-first in name order until `visit` returns false.
pub fn walk(root: &Path, options: &WalkOptions<'_>, mut visit: impl FnMut(&Entry) -> bool) {
    let confine = options.confine_to.and_then(|c| c.canonicalize().ok());
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if options.max_depth.is_some_and(|max| depth >= max) {
            continue;
        }
        let mut children = read_children(&dir, confine.as_deref(), options.skip_noise);
        children.sort_by(|a, b| a.path.cmp(&b.path));
        let mut subdirs = Vec::new();
        for entry in children {
            if !visit(&entry) {
                return;
            }
            if entry.is_dir {
                subdirs.push((entry.path, depth + 1));
            }
        }
        // Reverse so the stack pops directories in name order.
        stack.extend(subdirs.into_iter().rev());
    }
}

fn read_children(dir: &Path, confine: Option<&Path>, skip_noise: bool) -> Vec<Entry> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let name = entry.file_name();
            if meta.is_dir() && skip_noise && NOISE_DIRS.iter().any(|n| name == *n) {
                return None;
            }
            if meta.file_type().is_symlink() {
                // Symlinked directories are listed but never entered (no cycles, no escapes).
                let target = path.canonicalize().ok()?;
                if confine.is_some_and(|root| !target.starts_with(root)) {
                    return None;
                }
                return Some(Entry { path, is_dir: false });
            }
            Some(Entry { path, is_dir: meta.is_dir() })
        })
        .collect()
}

/// A shell-style glob compiled to a regex over `/`-separated relative paths.
///
/// `*` and `?` stay within one path segment, `**` crosses segments, `[abc]` and `{a,b}` work.
/// A pattern without `/` matches the file name at any depth (`*.rs` finds every Rust file).
#[derive(Debug, Clone)]
pub struct Glob {
    regex: Regex,
    name_only: bool,
}

impl Glob {
    /// Compiles `pattern`, with an error the model can read.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let name_only = !pattern.contains('/');
        let regex = Regex::new(&format!("^{}$", glob_to_regex(pattern.trim_start_matches("./")))).map_err(|e| format!("invalid glob pattern '{pattern}': {e}"))?;
        Ok(Glob { regex, name_only })
    }

    /// Whether `relative` (a path relative to the search root) matches.
    pub fn matches(&self, relative: &Path) -> bool {
        if self.name_only {
            return relative.file_name().is_some_and(|n| self.regex.is_match(&n.to_string_lossy()));
        }
        self.regex.is_match(&relative.to_string_lossy())
    }
}

fn glob_to_regex(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut in_braces = false;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    out.push_str("(?:.*/)?");
                    i += 1;
                } else {
                    out.push_str(".*");
                }
                i += 1;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => match chars[i..].iter().position(|c| *c == ']') {
                Some(len) if len > 1 => {
                    let class: String = chars[i + 1..i + len].iter().collect();
                    let class = class.strip_prefix('!').map(|rest| format!("^{rest}")).unwrap_or(class);
                    out.push_str(&format!("[{}]", class.replace('\\', "\\\\")));
                    i += len;
                }
                _ => out.push_str("\\["),
            },
            '{' => {
                in_braces = true;
                out.push_str("(?:");
            }
            '}' if in_braces => {
                in_braces = false;
                out.push(')');
            }
            ',' if in_braces => out.push('|'),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).unwrap().matches(Path::new(path))
    }

    #[test]
    fn globs_follow_shell_conventions() {
        assert!(matches("*.rs", "src/deep/main.rs"));
        assert!(!matches("*.rs", "src/main.rsx"));
        assert!(matches("src/*.rs", "src/main.rs"));
        assert!(!matches("src/*.rs", "src/a/main.rs"));
        assert!(matches("src/**/*.rs", "src/a/b/main.rs"));
        assert!(matches("src/**/*.rs", "src/main.rs"));
        assert!(matches("*.{md,txt}", "notes/todo.txt"));
        assert!(matches("file?.[ch]", "file1.c"));
        assert!(!matches("file?.[!ch]", "file1.c"));
    }

    #[test]
    fn walks_skip_noise_directories_and_stay_in_order() {
        let root = std::env::temp_dir().join(format!("oxibot-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["b", "a/inner", ".git/objects", "node_modules/x"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("a/inner/f.txt"), "x").unwrap();
        let mut seen = Vec::new();
        walk(&root, &WalkOptions { confine_to: None, max_depth: None, skip_noise: true }, |e| {
            seen.push(e.path.strip_prefix(&root).unwrap().display().to_string());
            true
        });
        assert_eq!(seen, ["a", "b", "a/inner", "a/inner/f.txt"]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}

//! Test support for the kernel's unit tests: throwaway directories and a `git` runner.
//! Compiled only for tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes directories made by one test process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh, empty directory under the system temp dir, removed on drop. Its path is
/// canonical, so it compares equal to paths the code under test resolves.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `oxibot-<label>-<pid>-<n>`; `label` makes leftovers recognisable.
    pub(crate) fn new(label: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("oxibot-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create test dir");
        let path = std::fs::canonicalize(&path).expect("canonicalize test dir");
        TempDir { path }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` to `relative` (creating parent directories) and returns the full path.
    pub(crate) fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Reads `relative` as text.
    pub(crate) fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path.join(relative)).expect("read file")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs `git -C dir args…` (with a test identity, outside any caller's repository) and
/// returns its stdout; a failing command fails the test.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Tester", "-c", "user.email=tester@example.com"])
        .args(["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .expect("run git");
    assert!(output.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

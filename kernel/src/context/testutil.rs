//! Test helper: a throwaway workspace directory, removed when dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Distinguishes workspaces made by one test process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// A fresh, empty directory under the system temp dir.
pub(crate) struct TempWorkspace {
    /// The directory, canonical so that paths compare equal to what the builder shows.
    path: PathBuf,
}

impl TempWorkspace {
    /// Creates the directory; `label` makes leftovers recognisable.
    pub(crate) fn new(label: &str) -> TempWorkspace {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("oxibot-ctx-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp workspace");
        let path = std::fs::canonicalize(&path).expect("canonicalize temp workspace");
        TempWorkspace { path }
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
}

impl Drop for TempWorkspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

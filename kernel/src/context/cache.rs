//! A per-file cache of the workspace files that go into the system prompt: a file is read
//! again only when its modification time or length has changed.

use std::collections::HashMap;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    /// Last modification time, when the filesystem reports one.
    modified: Option<SystemTime>,
    /// Length in bytes.
    len: u64,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp { modified: meta.modified().ok(), len: meta.len() }
    }
}

/// One cached file.
#[derive(Debug)]
struct Entry {
    /// The stamp taken before the text was read; if the file changes during the read, the
    /// next stamp differs and the file is read again.
    stamp: Stamp,
    /// The file's text (invalid UTF-8 replaced).
    text: Arc<str>,
}

/// Cached file texts by path.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    /// Every file seen so far that still existed when last asked for.
    entries: HashMap<PathBuf, Entry>,
    /// How many times a file was actually read from disk (tests check this).
    reads: u64,
}

impl FileCache {
    /// The text of `path`, from the cache when the file is unchanged; `None` when it is
    /// missing, not a regular file, or unreadable.
    pub(crate) fn read(&mut self, path: &Path) -> Option<Arc<str>> {
        self.derive(path, "", |path| std::fs::read(path).ok().map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Like [`FileCache::read`], but what is cached is the text `load` derives from the file
    /// (for example a rendering of its last lines); `variant` tells apart derivations of the
    /// same file. `load` runs only when the file changed or `variant` is new.
    pub(crate) fn derive(
        &mut self,
        path: &Path,
        variant: &str,
        load: impl FnOnce(&Path) -> Option<String>,
    ) -> Option<Arc<str>> {
        let key = if variant.is_empty() {
            path.to_path_buf()
        } else {
            PathBuf::from(format!("{}#{variant}", path.display()))
        };
        let Some(stamp) = stamp_of(path) else {
            self.entries.remove(&key);
            return None;
        };
        if let Some(entry) = self.entries.get(&key).filter(|e| e.stamp == stamp) {
            return Some(Arc::clone(&entry.text));
        }
        self.reads += 1;
        let Some(text) = load(path) else {
            self.entries.remove(&key);
            return None;
        };
        let text: Arc<str> = text.into();
        self.entries.insert(key, Entry { stamp, text: Arc::clone(&text) });
        Some(text)
    }

    /// Records that `path` now holds `text`, after writing it ourselves, so that the write does
    /// not cost a read on the next call.
    pub(crate) fn remember(&mut self, path: &Path, text: &str) {
        match stamp_of(path) {
            Some(stamp) => {
                self.entries.insert(path.to_path_buf(), Entry { stamp, text: text.into() });
            }
            None => {
                self.entries.remove(path);
            }
        }
    }

    /// How many reads from disk the cache has made.
    #[cfg(test)]
    pub(crate) fn reads(&self) -> u64 {
        self.reads
    }
}

/// The stamp of `path` if it is a regular file (following symlinks).
fn stamp_of(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path).ok().filter(Metadata::is_file).map(|meta| Stamp::of(&meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn unchanged_files_are_read_once_and_changed_files_again() {
        let ws = TempDir::new("cache");
        let path = ws.write("a.md", "one");
        let mut cache = FileCache::default();
        assert_eq!(cache.read(&path).as_deref(), Some("one"));
        assert_eq!(cache.read(&path).as_deref(), Some("one"));
        assert_eq!(cache.reads(), 1);
        ws.write("a.md", "two, longer");
        assert_eq!(cache.read(&path).as_deref(), Some("two, longer"));
        assert_eq!(cache.reads(), 2);
    }

    #[test]
    fn missing_files_and_directories_read_as_none() {
        let ws = TempDir::new("cache-missing");
        let mut cache = FileCache::default();
        assert_eq!(cache.read(&ws.path().join("nope.md")), None);
        assert_eq!(cache.read(ws.path()), None);
        let path = ws.write("gone.md", "x");
        assert!(cache.read(&path).is_some());
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(cache.read(&path), None);
    }

    #[test]
    fn remembered_writes_cost_no_read() {
        let ws = TempDir::new("cache-remember");
        let path = ws.write("b.md", "mine");
        let mut cache = FileCache::default();
        cache.remember(&path, "mine");
        assert_eq!(cache.read(&path).as_deref(), Some("mine"));
        assert_eq!(cache.reads(), 0);
    }
}

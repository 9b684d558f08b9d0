//! `memory/history.jsonl` and its two cursor files: the append-only archive of summarised
//! conversation that Dream later folds into long-term memory.
//!
//! Each line is `{"cursor": N, "timestamp": "YYYY-MM-DD HH:MM", "content": "…"}` (nanobot's
//! format). oxibot adds `session` and `through` — the session key and the message index the
//! entry archives up to — so that an archive whose session was not yet marked consolidated
//! when the kernel died is recognised on restart instead of being written twice.
//!
//! Crash safety: an entry is one `write` of one line followed by `fsync`; a torn last line
//! (kill mid-write) is cut off before the next append. `memory/.cursor` is rewritten
//! atomically after the line, and the next cursor is taken from the larger of the file's last
//! entry and `.cursor`, so a kill between the two never reuses a cursor.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use crate::fsutil::write_atomic;

/// The archive, relative to the workspace.
pub const HISTORY_FILE: &str = "memory/history.jsonl";
/// The last cursor written, relative to the workspace.
pub const CURSOR_FILE: &str = "memory/.cursor";
/// The last cursor Dream processed, relative to the workspace.
pub const DREAM_CURSOR_FILE: &str = "memory/.dream_cursor";
/// Past this many entries, entries Dream has processed are dropped.
pub const COMPACT_ABOVE: usize = 1000;

/// One archived stretch of conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Position in the archive, increasing by one per entry.
    pub cursor: u64,
    /// When the archived conversation happened (`YYYY-MM-DD HH:MM`).
    pub timestamp: String,
    /// The summary (or `[RAW]` and the raw messages when summarising failed).
    pub content: String,
    /// The session it came from, when oxibot wrote it.
    pub session: Option<String>,
    /// The session's message index the entry archives up to (exclusive).
    pub through: Option<usize>,
}

impl HistoryEntry {
    /// Reads one line; `None` for blank or malformed lines and lines without a cursor.
    pub fn parse(line: &str) -> Option<HistoryEntry> {
        let value: Value = serde_json::from_str(line.trim()).ok()?;
        let cursor = match value.get("cursor")? {
            Value::Number(n) => n.as_u64()?,
            Value::String(s) => s.trim().parse().ok()?,
            _ => return None,
        };
        let text = |key: &str| match value.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let session = value.get("session").and_then(Value::as_str).map(str::to_owned);
        let through = value.get("through").and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok());
        Some(HistoryEntry { cursor, timestamp: text("timestamp"), content: text("content"), session, through })
    }

    fn to_line(&self) -> String {
        let mut value = json!({"cursor": self.cursor, "timestamp": self.timestamp, "content": self.content});
        if let (Some(session), Some(through)) = (&self.session, self.through) {
            value["session"] = json!(session);
            value["through"] = json!(through);
        }
        let mut line = value.to_string();
        line.push('\n');
        line
    }
}

/// Where an archived slice came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The session key.
    pub session: String,
    /// The message index the slice ends at (exclusive).
    pub through: usize,
}

/// A history file operation failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct HistoryError {
    /// What was being done.
    action: &'static str,
    /// The file.
    path: PathBuf,
    /// Why.
    source: io::Error,
}

/// The archive of one workspace. Shared by every session; appends are serialised.
pub struct HistoryStore {
    workspace: PathBuf,
    /// Guards the files and the cached state below.
    state: Mutex<Option<Cached>>,
}

/// Entries read from the end of the file on first use: enough to find the last cursor and
/// every archive a crash may have left unmarked (those are always among the newest).
const RECOVERY_WINDOW: usize = 256;

/// What the store learned from the file's tail on first use.
struct Cached {
    /// The cursor the next entry gets.
    next_cursor: u64,
    /// Per session, the highest `through` among the newest entries.
    archived: HashMap<String, usize>,
}

impl HistoryStore {
    /// The archive of `workspace` (files are read on first use).
    pub fn new(workspace: &Path) -> HistoryStore {
        HistoryStore { workspace: workspace.to_path_buf(), state: Mutex::new(None) }
    }

    /// `memory/history.jsonl` of the workspace.
    pub fn path(&self) -> PathBuf {
        self.workspace.join(HISTORY_FILE)
    }

    /// Appends one entry and returns its cursor.
    pub fn append(&self, timestamp: &str, content: &str, origin: Option<Origin>) -> Result<u64, HistoryError> {
        let mut guard = self.lock();
        let cached = self.cached(&mut guard)?;
        let (session, through) = origin.map_or((None, None), |o| (Some(o.session), Some(o.through)));
        let entry = HistoryEntry {
            cursor: cached.next_cursor,
            timestamp: timestamp.to_owned(),
            content: content.to_owned(),
            session,
            through,
        };
        let path = self.path();
        append_line(&path, entry.to_line().as_bytes()).map_err(|source| HistoryError {
            action: "append to",
            path,
            source,
        })?;
        cached.next_cursor += 1;
        if let (Some(session), Some(through)) = (&entry.session, entry.through) {
            let highest = cached.archived.entry(session.clone()).or_default();
            *highest = (*highest).max(through);
        }
        let cursor_path = self.workspace.join(CURSOR_FILE);
        write_atomic(&cursor_path, entry.cursor.to_string().as_bytes()).map_err(|source| HistoryError {
            action: "write",
            path: cursor_path,
            source,
        })?;
        Ok(entry.cursor)
    }

    /// The highest message index of `session` archived by one of the newest entries, if any.
    pub fn archived_through(&self, session: &str) -> Result<Option<usize>, HistoryError> {
        let mut guard = self.lock();
        Ok(self.cached(&mut guard)?.archived.get(session).copied())
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> Result<Vec<HistoryEntry>, HistoryError> {
        let _guard = self.lock();
        Ok(parse_all(&self.read_history()?))
    }

    /// Entries with a cursor above `since`, oldest first, at most `limit`.
    pub fn entries_after(&self, since: u64, limit: usize) -> Result<Vec<HistoryEntry>, HistoryError> {
        let mut entries = self.entries()?;
        entries.retain(|e| e.cursor > since);
        entries.truncate(limit);
        Ok(entries)
    }

    /// The cursor Dream has processed up to (0 when it never ran).
    pub fn dream_cursor(&self) -> u64 {
        read_number(&self.workspace.join(DREAM_CURSOR_FILE)).unwrap_or(0)
    }

    /// Records that Dream processed everything up to `cursor`.
    pub fn set_dream_cursor(&self, cursor: u64) -> Result<(), HistoryError> {
        let path = self.workspace.join(DREAM_CURSOR_FILE);
        write_atomic(&path, cursor.to_string().as_bytes()).map_err(|source| HistoryError {
            action: "write",
            path,
            source,
        })
    }

    /// When the archive holds more than [`COMPACT_ABOVE`] entries, drops those Dream has
    /// processed (atomic rewrite). Returns how many were dropped.
    pub fn compact(&self) -> Result<usize, HistoryError> {
        let _guard = self.lock();
        let text = self.read_history()?;
        if text.lines().filter(|l| !l.trim().is_empty()).count() <= COMPACT_ABOVE {
            return Ok(0);
        }
        let since = self.dream_cursor();
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| HistoryEntry::parse(line).is_none_or(|e| e.cursor > since))
            .filter(|l| !l.trim().is_empty())
            .collect();
        let dropped = text.lines().filter(|l| !l.trim().is_empty()).count() - kept.len();
        if dropped == 0 {
            return Ok(0);
        }
        let mut rewritten = kept.join("\n");
        if !rewritten.is_empty() {
            rewritten.push('\n');
        }
        let path = self.path();
        write_atomic(&path, rewritten.as_bytes()).map_err(|source| HistoryError { action: "rewrite", path, source })?;
        Ok(dropped)
    }

    /// Lets `change` edit each entry's content (the memory tool's `forget`); entries left
    /// empty are dropped, the others keep their cursors. The file is rewritten atomically,
    /// and only when something changed. Returns how many entries changed.
    pub fn rewrite(&self, mut change: impl FnMut(&mut HistoryEntry)) -> Result<usize, HistoryError> {
        let _guard = self.lock();
        let text = self.read_history()?;
        let mut changed = 0;
        let mut kept = String::with_capacity(text.len());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Some(mut entry) = HistoryEntry::parse(line) else {
                kept.push_str(line);
                kept.push('\n');
                continue;
            };
            let before = entry.content.clone();
            change(&mut entry);
            if entry.content == before {
                kept.push_str(line);
                kept.push('\n');
                continue;
            }
            changed += 1;
            if !entry.content.trim().is_empty() {
                kept.push_str(&entry.to_line());
            }
        }
        if changed > 0 {
            let path = self.path();
            write_atomic(&path, kept.as_bytes()).map_err(|source| HistoryError { action: "rewrite", path, source })?;
        }
        Ok(changed)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Cached>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached state, reading the files (and cutting a torn last line) on first use.
    fn cached<'a>(&self, guard: &'a mut MutexGuard<'_, Option<Cached>>) -> Result<&'a mut Cached, HistoryError> {
        if guard.is_none() {
            let path = self.path();
            cut_torn_tail(&path).map_err(|source| HistoryError { action: "repair", path: path.clone(), source })?;
            let entries = match read_tail(&path, 0, RECOVERY_WINDOW) {
                Ok(entries) => entries,
                Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(source) => return Err(HistoryError { action: "read", path, source }),
            };
            let last = entries.iter().map(|e| e.cursor).max().unwrap_or(0);
            let recorded = read_number(&self.workspace.join(CURSOR_FILE)).unwrap_or(0);
            let mut archived: HashMap<String, usize> = HashMap::new();
            for entry in &entries {
                if let (Some(session), Some(through)) = (&entry.session, entry.through) {
                    let highest = archived.entry(session.clone()).or_default();
                    *highest = (*highest).max(through);
                }
            }
            **guard = Some(Cached { next_cursor: last.max(recorded) + 1, archived });
        }
        guard.as_mut().ok_or_else(|| HistoryError {
            action: "load",
            path: self.path(),
            source: io::Error::other("state missing"),
        })
    }

    fn read_history(&self) -> Result<String, HistoryError> {
        let path = self.path();
        match fs::read(&path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(source) => Err(HistoryError { action: "read", path, source }),
        }
    }
}

fn parse_all(text: &str) -> Vec<HistoryEntry> {
    text.lines().filter_map(HistoryEntry::parse).collect()
}

fn read_number(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Appends `line` (ending in a newline) in one write and flushes it to disk.
fn append_line(path: &Path, line: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(line)?;
    file.sync_data()
}

/// Cuts a last line that has no newline: it is an append the kernel died in the middle of,
/// and the slice it archived was never marked consolidated, so it will be archived again.
fn cut_torn_tail(path: &Path) -> io::Result<()> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    let len = file.metadata()?.len();
    if len == 0 || last_byte(&mut file, len)? == b'\n' {
        return Ok(());
    }
    let keep = last_newline_before(&mut file, len)?.map_or(0, |at| at + 1);
    tracing::warn!(path = %path.display(), cut = len - keep, "cutting a history entry torn by a crash");
    file.set_len(keep)?;
    file.sync_data()
}

fn last_byte(file: &mut File, len: u64) -> io::Result<u8> {
    let mut byte = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut byte)?;
    Ok(byte[0])
}

/// Offset of the last `\n` in the file, scanning backwards in blocks.
fn last_newline_before(file: &mut File, len: u64) -> io::Result<Option<u64>> {
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    let mut buffer = vec![0u8; BLOCK as usize];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let chunk = &mut buffer[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + at as u64));
        }
        end = start;
    }
    Ok(None)
}

/// The last `max` entries of the archive at `path` with a cursor above `since`, in file
/// order, reading the file backwards from its end: the cost depends on `max`, not on how
/// long the archive has grown. Entries are taken to be in cursor order, as they are written.
pub fn read_tail(path: &Path, since: u64, max: usize) -> io::Result<Vec<HistoryEntry>> {
    const BLOCK: u64 = 64 * 1024;
    let mut file = File::open(path)?;
    let mut end = file.metadata()?.len();
    let mut carry: Vec<u8> = Vec::new();
    let mut newest_first: Vec<HistoryEntry> = Vec::new();
    while end > 0 && newest_first.len() < max {
        let start = end.saturating_sub(BLOCK);
        let mut block = vec![0u8; (end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block)?;
        block.extend_from_slice(&carry);
        // The first line of the block may be cut; keep it for the next (earlier) block.
        let first_break = if start == 0 { None } else { block.iter().position(|&b| b == b'\n') };
        let (head, body) = match first_break {
            Some(at) => (block[..at].to_vec(), &block[at + 1..]),
            None if start == 0 => (Vec::new(), &block[..]),
            None => (block.clone(), &block[..0]),
        };
        for line in body.split(|&b| b == b'\n').rev() {
            let Some(entry) = HistoryEntry::parse(&String::from_utf8_lossy(line)) else { continue };
            if entry.cursor <= since || newest_first.len() >= max {
                newest_first.reverse();
                return Ok(newest_first);
            }
            newest_first.push(entry);
        }
        carry = head;
        end = start;
    }
    newest_first.reverse();
    Ok(newest_first)
}

/// Now as `YYYY-MM-DD HH:MM` in `timezone` (UTC when absent or unknown).
pub fn timestamp_now(timezone: Option<&str>) -> String {
    let now = chrono::Utc::now();
    match timezone.and_then(|tz| tz.parse::<chrono_tz::Tz>().ok()) {
        Some(tz) => now.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string(),
        None => now.format("%Y-%m-%d %H:%M").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    fn origin(session: &str, through: usize) -> Option<Origin> {
        Some(Origin { session: session.into(), through })
    }

    #[test]
    fn appends_number_entries_from_one_and_record_the_last_cursor() {
        let dir = TempDir::new("history-append");
        let store = HistoryStore::new(dir.path());
        assert_eq!(store.append("2026-04-03 00:02", "- likes tea", origin("cli:direct", 4)).unwrap(), 1);
        assert_eq!(store.append("2026-04-03 00:05", "- moved to Lyon", None).unwrap(), 2);
        assert_eq!(fs::read_to_string(dir.path().join(CURSOR_FILE)).unwrap(), "2");
        let lines: Vec<Value> =
            fs::read_to_string(store.path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(
            lines[0],
            json!({"cursor": 1, "timestamp": "2026-04-03 00:02", "content": "- likes tea", "session": "cli:direct", "through": 4})
        );
        assert_eq!(lines[1], json!({"cursor": 2, "timestamp": "2026-04-03 00:05", "content": "- moved to Lyon"}));
    }

    #[test]
    fn a_new_store_continues_after_the_larger_of_the_file_and_the_cursor_file() {
        let dir = TempDir::new("history-continue");
        HistoryStore::new(dir.path()).append("t", "a", None).unwrap();
        // A kill between the line and `.cursor`: the file is ahead.
        fs::write(dir.path().join(CURSOR_FILE), "0").unwrap();
        assert_eq!(HistoryStore::new(dir.path()).append("t", "b", None).unwrap(), 2);
        // Compaction dropped entries: the cursor file is ahead.
        fs::write(dir.path().join(CURSOR_FILE), "41").unwrap();
        assert_eq!(HistoryStore::new(dir.path()).append("t", "c", None).unwrap(), 42);
    }

    #[test]
    fn a_torn_last_line_is_cut_before_the_next_append() {
        let dir = TempDir::new("history-torn");
        let store = HistoryStore::new(dir.path());
        store.append("t", "kept", None).unwrap();
        let mut file = OpenOptions::new().append(true).open(store.path()).unwrap();
        file.write_all(br#"{"cursor": 2, "timestamp": "t", "content": "half wri"#).unwrap();
        let reopened = HistoryStore::new(dir.path());
        assert_eq!(reopened.append("t", "next", None).unwrap(), 2);
        let contents: Vec<String> = reopened.entries().unwrap().into_iter().map(|e| e.content).collect();
        assert_eq!(contents, ["kept", "next"]);
    }

    #[test]
    fn archived_through_remembers_the_highest_index_per_session_across_restarts() {
        let dir = TempDir::new("history-through");
        let store = HistoryStore::new(dir.path());
        assert_eq!(store.archived_through("cli:direct").unwrap(), None);
        store.append("t", "a", origin("cli:direct", 10)).unwrap();
        store.append("t", "b", origin("telegram:1", 3)).unwrap();
        store.append("t", "c", origin("cli:direct", 24)).unwrap();
        let reopened = HistoryStore::new(dir.path());
        assert_eq!(reopened.archived_through("cli:direct").unwrap(), Some(24));
        assert_eq!(reopened.archived_through("telegram:1").unwrap(), Some(3));
    }

    #[test]
    fn entries_after_skips_processed_ones_and_honours_the_limit() {
        let dir = TempDir::new("history-after");
        let store = HistoryStore::new(dir.path());
        for n in 0..5 {
            store.append("t", &format!("e{n}"), None).unwrap();
        }
        let cursors: Vec<u64> = store.entries_after(2, 2).unwrap().iter().map(|e| e.cursor).collect();
        assert_eq!(cursors, [3, 4]);
    }

    #[test]
    fn compaction_past_a_thousand_entries_drops_only_what_dream_processed() {
        let dir = TempDir::new("history-compact");
        let store = HistoryStore::new(dir.path());
        let lines: String =
            (1..=1005).map(|n| format!("{{\"cursor\": {n}, \"timestamp\": \"t\", \"content\": \"e{n}\"}}\n")).collect();
        fs::create_dir_all(dir.path().join("memory")).unwrap();
        fs::write(store.path(), lines).unwrap();
        store.set_dream_cursor(1000).unwrap();
        assert_eq!(store.compact().unwrap(), 1000);
        let cursors: Vec<u64> = store.entries().unwrap().iter().map(|e| e.cursor).collect();
        assert_eq!(cursors, [1001, 1002, 1003, 1004, 1005]);
        assert_eq!(store.append("t", "next", None).unwrap(), 1006);
        assert_eq!(store.compact().unwrap(), 0, "below the threshold nothing is dropped");
    }

    #[test]
    fn the_tail_holds_the_newest_unprocessed_entries_in_order_whatever_the_file_size() {
        let dir = TempDir::new("history-tail");
        let store = HistoryStore::new(dir.path());
        let filler = "y".repeat(300);
        let lines: String = (1..=2000)
            .map(|n| format!("{{\"cursor\": {n}, \"timestamp\": \"t\", \"content\": \"{filler} {n}\"}}\n"))
            .collect();
        fs::create_dir_all(dir.path().join("memory")).unwrap();
        fs::write(store.path(), lines).unwrap();
        let cursors =
            |since, max| read_tail(&store.path(), since, max).unwrap().iter().map(|e| e.cursor).collect::<Vec<_>>();
        assert_eq!(cursors(0, 3), [1998, 1999, 2000]);
        assert_eq!(cursors(1995, 50), [1996, 1997, 1998, 1999, 2000]);
        assert_eq!(cursors(0, 500), (1501..=2000).collect::<Vec<_>>(), "across many 64 KiB blocks");
        assert_eq!(cursors(2000, 50), Vec::<u64>::new());
        assert_eq!(read_tail(&dir.path().join("none"), 0, 5).map_err(|e| e.kind()), Err(io::ErrorKind::NotFound));
    }

    #[test]
    fn a_rewrite_edits_entries_drops_emptied_ones_and_keeps_cursors() {
        let dir = TempDir::new("history-rewrite");
        let store = HistoryStore::new(dir.path());
        store.append("t", "keep", origin("cli:direct", 2)).unwrap();
        store.append("t", "secret\nother", None).unwrap();
        store.append("t", "secret", None).unwrap();
        let changed = store
            .rewrite(|entry| {
                entry.content = entry.content.lines().filter(|l| *l != "secret").collect::<Vec<_>>().join("\n")
            })
            .unwrap();
        assert_eq!(changed, 2);
        let left: Vec<(u64, String)> = store.entries().unwrap().into_iter().map(|e| (e.cursor, e.content)).collect();
        assert_eq!(left, [(1, "keep".to_owned()), (2, "other".to_owned())]);
        assert_eq!(store.entries().unwrap()[0].session.as_deref(), Some("cli:direct"));
        assert_eq!(store.append("t", "next", None).unwrap(), 4, "cursors are never reused");
    }

    #[test]
    fn nanobot_entries_with_string_cursors_and_no_origin_load() {
        let entry =
            HistoryEntry::parse(r#"{"cursor": "7", "timestamp": "2026-04-03 00:02", "content": "- x"}"#).unwrap();
        assert_eq!((entry.cursor, entry.session, entry.through), (7, None, None));
        assert_eq!(HistoryEntry::parse("not json"), None);
    }
}

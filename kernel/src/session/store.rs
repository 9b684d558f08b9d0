//! `SessionStore`: loading, appending to, and updating the session files of one workspace.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tracing::{info, warn};

use super::format::{self, HEADER_WIDTH, IN_PLACE_LIMIT, now_timestamp};
use super::journal::Record;
use super::location::{self, legacy_name, storage_name};
use super::recover;
use super::{DiskState, LoadedSession, Repair, Session, SessionError};
use crate::fsutil::write_atomic;
use crate::message::ChatMessage;

/// The session files of one workspace, kept in a directory of the data dir private to it
/// (see [`location`]), where the model's file tools cannot reach them.
///
/// Every method does its I/O synchronously; the session actor calls it from a blocking
/// context.
#[derive(Debug, Clone)]
pub struct SessionStore {
    /// The private session directory, created on the first write.
    dir: PathBuf,
    /// Where older versions kept this workspace's sessions; a session found only there is
    /// moved into `dir` when it is loaded.
    legacy: Option<PathBuf>,
    /// Where nanobot 0.3 keeps this workspace's sessions; a session found only there is
    /// copied into `dir` when it is loaded.
    nanobot: Option<PathBuf>,
}

/// Makes temporary file names unique within the process (the pid covers other processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl SessionStore {
    /// The store of `workspace`'s sessions under `data_dir`: session files an older version
    /// left in `<workspace>/sessions/` are moved into the private directory first (failures
    /// are logged; such a file is moved again when its session is loaded).
    pub fn for_workspace(workspace: &Path, data_dir: &Path) -> SessionStore {
        let dir = location::private_dir(data_dir, workspace);
        let legacy = location::legacy_dir(workspace);
        if dir.starts_with(workspace) {
            warn!(sessions = %dir.display(), workspace = %workspace.display(),
                "the data dir is inside the workspace, so the file tools can reach the session files; move one of them");
        }
        match location::migrate_all(&legacy, &dir) {
            Ok(0) => {}
            Ok(moved) => {
                info!(moved, to = %dir.display(), "moved session files out of the workspace");
                // Only an empty directory goes; anything else left in it stays.
                let _ = fs::remove_dir(&legacy);
            }
            Err(error) => warn!(from = %legacy.display(), %error, "cannot move session files out of the workspace"),
        }
        // Private to the user: the files hold whole conversations.
        if let Err(error) = location::create_private_dir(&dir, workspace) {
            warn!(dir = %dir.display(), %error, "cannot create the session directory");
        }
        SessionStore { dir, legacy: Some(legacy), nanobot: None }
    }

    /// A store over the session files in `dir` (nothing is touched on disk until the first
    /// write).
    pub fn in_dir(dir: &Path) -> SessionStore {
        SessionStore { dir: dir.to_path_buf(), legacy: None, nanobot: None }
    }

    /// The same store, also looking in `dir` — where nanobot 0.3 keeps this workspace's
    /// sessions (see [`location::nanobot_dir`]) — for a session it has no file of: such a
    /// file is copied in when the session is first loaded; nanobot's file is never changed.
    pub fn with_nanobot_sessions(mut self, dir: Option<PathBuf>) -> SessionStore {
        self.nanobot = dir.filter(|dir| *dir != self.dir);
        self
    }

    /// The sessions directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `key`: `cli:direct` → `Y2xpOmRpcmVjdA.jsonl` (the key in URL-safe
    /// base64, as nanobot 0.3 names them).
    pub fn path_for(&self, key: &str) -> PathBuf {
        self.dir.join(storage_name(key))
    }

    /// Loads session `key`, or returns a new empty one when it has no file.
    ///
    /// A last line that is not valid JSON is what a crash in the middle of an append leaves:
    /// it is logged, dropped and cut off the file. A damaged line anywhere else is
    /// [`SessionError::Corrupt`], naming the file and line.
    pub fn load(&self, key: &str) -> Result<LoadedSession, SessionError> {
        let path = self.path_for(key);
        recover::stale_temp_files(&path);
        self.move_legacy_file(key, &path);
        self.copy_nanobot_file(key, &path);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(LoadedSession { session: Session::new(key), repaired: None });
            }
            Err(source) => return Err(SessionError::Read { path, source }),
        };
        let decoded = format::decode(&bytes).map_err(|damaged| SessionError::Corrupt {
            path: path.clone(),
            line: damaged.line,
            source: damaged.error,
        })?;
        let repaired = if let Some(torn) = decoded.torn {
            warn!(path = %path.display(), line = torn.line, bytes = torn.bytes, "dropping torn last line of session file");
            let file = open_for_write(&path)?;
            file.set_len(torn.offset as u64).map_err(|source| write_error(&path, source))?;
            Some(Repair::DroppedTornLine { line: torn.line, bytes: torn.bytes })
        } else if decoded.missing_newline {
            warn!(path = %path.display(), "session file does not end with a newline; adding one");
            let mut file = OpenOptions::new().append(true).open(&path).map_err(|source| write_error(&path, source))?;
            file.write_all(b"\n").map_err(|source| write_error(&path, source))?;
            Some(Repair::AddedMissingNewline)
        } else {
            None
        };

        let mut session = Session::new(key);
        if let Some(header) = decoded.header {
            format::apply_header(&mut session, header);
        }
        session.messages = decoded.messages;
        session.records = decoded.records;
        session.compact_records();
        session.catch_up_marks();
        session.disk = decoded.disk;
        if session.last_consolidated > session.messages.len() {
            warn!(path = %path.display(), last_consolidated = session.last_consolidated, messages = session.messages.len(),
                "consolidation cursor past the end of the session; clamped");
            session.last_consolidated = session.messages.len();
        }
        Ok(LoadedSession { session, repaired })
    }

    /// Moves the file an older version kept for `key` inside the workspace to `path`.
    fn move_legacy_file(&self, key: &str, path: &Path) {
        let Some(legacy) = &self.legacy else { return };
        let old = legacy.join(legacy_name(key));
        if path.exists() || !old.exists() {
            return;
        }
        if let Err(error) = location::migrate_one(&old, path) {
            warn!(from = %old.display(), %error, "cannot move a session file out of the workspace; reading it in place");
        }
    }

    /// Copies the file nanobot 0.3 keeps for `key` to `path` (whole or not at all).
    fn copy_nanobot_file(&self, key: &str, path: &Path) {
        let Some(nanobot) = &self.nanobot else { return };
        let source = nanobot.join(storage_name(key));
        if path.exists() || !source.is_file() {
            return;
        }
        match fs::read(&source).and_then(|bytes| write_atomic(path, &bytes)) {
            Ok(()) => info!(from = %source.display(), to = %path.display(), "copied a nanobot session"),
            Err(error) => warn!(from = %source.display(), %error, "cannot copy a nanobot session"),
        }
    }

    /// Appends `messages` to the session and its file, stamping those without a
    /// `timestamp` with the current time.
    ///
    /// The lines go out in one `write` call on a file opened for appending, so the cost is
    /// that of the turn, whatever the session's length; the metadata line is then refreshed
    /// in place (for `updated_at`) when its width allows, and otherwise left for the next
    /// [`save_metadata`](Self::save_metadata). A session without a file yet, or whose file
    /// does not start with a metadata line, is written whole instead.
    ///
    /// On error neither the session nor the file has changed.
    pub fn append(&self, session: &mut Session, messages: Vec<ChatMessage>) -> Result<(), SessionError> {
        self.append_with_records(session, messages, Vec::new())
    }

    /// Appends `messages`, then `records` (see [`journal`](super::journal)), in one `write`
    /// call, as [`append`](Self::append) does.
    pub fn append_with_records(
        &self,
        session: &mut Session,
        mut messages: Vec<ChatMessage>,
        records: Vec<Record>,
    ) -> Result<(), SessionError> {
        if messages.is_empty() && records.is_empty() {
            return Ok(());
        }
        let path = self.path_for(&session.key);
        let now = now_timestamp();
        for message in &mut messages {
            if message.timestamp.is_none() {
                message.timestamp = Some(now.clone());
            }
        }
        let previous = (session.messages.len(), session.records.len());
        let previous_updated_at = std::mem::replace(&mut session.updated_at, now);
        session.messages.extend(messages);
        session.records.extend(records);

        let result = self.write_appended(session, &path, previous);
        if result.is_err() {
            session.messages.truncate(previous.0);
            session.replay.forget_from(session.offset + previous.0);
            session.records.truncate(previous.1);
            session.updated_at = previous_updated_at;
        }
        session.catch_up_marks();
        result
    }

    /// Writes `session.messages[from.0..]` and `session.records[from.1..]` to the end of the
    /// file (or the whole file when it has no header of ours yet).
    fn write_appended(&self, session: &mut Session, path: &Path, from: (usize, usize)) -> Result<(), SessionError> {
        if session.disk.header_width == 0 {
            return match self.create(session, path)? {
                true => Ok(()),
                false => self.write_whole(session, path),
            };
        }
        let mut lines = Vec::new();
        format::encode_messages(&session.messages[from.0..], &mut lines)
            .map_err(|source| encode_error(path, source))?;
        format::encode_records(&session.records[from.1..], &mut lines).map_err(|source| encode_error(path, source))?;
        let mut file = match OpenOptions::new().append(true).open(path) {
            Ok(file) => file,
            // Deleted behind our back: start it again from what is in memory.
            Err(error) if error.kind() == io::ErrorKind::NotFound => return self.write_whole(session, path),
            Err(source) => return Err(write_error(path, source)),
        };
        let length_before = file.metadata().map_err(|source| write_error(path, source))?.len();
        if let Err(source) = file.write_all(&lines) {
            // A partial line left behind would sit in the middle of the file after the next
            // append and make it unloadable; cut it off while we still can.
            if let Err(undo) = file.set_len(length_before) {
                warn!(path = %path.display(), %undo, "could not cut back a failed append; the next load will");
            }
            return Err(write_error(path, source));
        }
        // The messages are on disk now; a stale `updated_at` is no reason to report failure.
        if session.disk.header_due() {
            match self.overwrite_header(session, path) {
                Ok(written) => session.disk.header_written = written.then(Instant::now),
                Err(error) => warn!(%error, "could not refresh the metadata line after an append"),
            }
        }
        Ok(())
    }

    /// Persists changed `metadata` or `last_consolidated` (and stamps `updated_at`): in place
    /// when the new metadata line fits the old one's width, else by rewriting the file once
    /// with room to spare. A file written by nanobot has an unpadded metadata line, so its
    /// first metadata change rewrites it.
    pub fn save_metadata(&self, session: &mut Session) -> Result<(), SessionError> {
        let path = self.path_for(&session.key);
        session.updated_at = now_timestamp();
        if self.overwrite_header(session, &path)? {
            session.disk.header_written = Some(Instant::now());
            Ok(())
        } else {
            self.write_whole(session, &path)
        }
    }

    /// Writes the whole file from `session` (after `/new`, or any change to past messages),
    /// atomically: a temporary file in the same directory, flushed to disk, renamed over the
    /// old one.
    pub fn rewrite(&self, session: &mut Session) -> Result<(), SessionError> {
        let path = self.path_for(&session.key);
        session.updated_at = now_timestamp();
        session.catch_up_marks();
        self.write_whole(session, &path)
    }

    /// Overwrites the metadata line at offset 0 with one of the same width. Returns `false`
    /// (and writes nothing) when that is not possible: no padded header on disk, a header too
    /// wide to be written untorn, new metadata that does not fit, or no file.
    fn overwrite_header(&self, session: &Session, path: &Path) -> Result<bool, SessionError> {
        let width = session.disk.header_width;
        if !(HEADER_WIDTH..=IN_PLACE_LIMIT).contains(&width) {
            return Ok(false);
        }
        let json = format::header_json(session).map_err(|source| encode_error(path, source))?;
        if json.len() + 1 > width {
            return Ok(false);
        }
        let line = format::pad_line(json, width);
        let file = match OpenOptions::new().write(true).open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(write_error(path, source)),
        };
        file.write_all_at(&line, 0).map_err(|source| write_error(path, source))?;
        Ok(true)
    }

    /// Creates the file of a session that has none, with one `write` of the metadata line and
    /// every message, so the user's first message is in the session's own file the moment
    /// that write returns (a kill can only tear its end, which the next load drops). Returns
    /// `false`, having written nothing, when a file already exists.
    fn create(&self, session: &mut Session, path: &Path) -> Result<bool, SessionError> {
        fs::create_dir_all(&self.dir).map_err(|source| write_error(&self.dir, source))?;
        let header = format::header_json(session).map_err(|source| encode_error(path, source))?;
        let width = format::width_for(header.len());
        let mut bytes = format::pad_line(header, width);
        format::encode_messages(&session.messages, &mut bytes).map_err(|source| encode_error(path, source))?;
        format::encode_records(&session.records, &mut bytes).map_err(|source| encode_error(path, source))?;
        let mut file = match File::create_new(path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(source) => return Err(write_error(path, source)),
        };
        if let Err(source) = file.write_all(&bytes) {
            // Nothing of this session was on disk before: leave nothing half-written.
            let _ = fs::remove_file(path);
            return Err(write_error(path, source));
        }
        if let Err(error) = file.sync_all().and_then(|()| File::open(&self.dir)?.sync_all()) {
            warn!(path = %path.display(), %error, "could not sync a new session file");
        }
        session.disk = DiskState { header_width: width, header_written: Some(Instant::now()) };
        Ok(true)
    }

    /// Replaces the file with `session` in full, through a temporary file and a rename.
    fn write_whole(&self, session: &mut Session, path: &Path) -> Result<(), SessionError> {
        fs::create_dir_all(&self.dir).map_err(|source| write_error(&self.dir, source))?;
        let header = format::header_json(session).map_err(|source| encode_error(path, source))?;
        let width = format::width_for(header.len());
        let header = format::pad_line(header, width);

        let archived = self.archived_lines(session, path)?;
        session.compact_records();
        let temp = self.temp_path(path);
        let written = write_temp(&temp, &[&header, &archived], &session.messages, &session.records)
            .and_then(|()| fs::rename(&temp, path));
        if let Err(source) = written {
            // Best effort: a leftover temporary file is harmless, only untidy.
            let _ = fs::remove_file(&temp);
            return Err(write_error(path, source));
        }
        // The rename is durable only once the directory is; the data already is.
        if let Err(error) = File::open(&self.dir).and_then(|dir| dir.sync_all()) {
            warn!(dir = %self.dir.display(), %error, "could not sync sessions directory");
        }
        session.disk = DiskState { header_width: width, header_written: Some(Instant::now()) };
        Ok(())
    }

    /// The lines of the messages `session` left on disk (see [`Session::forget_archived`]),
    /// read back from its file for a whole-file rewrite.
    fn archived_lines(&self, session: &Session, path: &Path) -> Result<Vec<u8>, SessionError> {
        if session.offset == 0 {
            return Ok(Vec::new());
        }
        let bytes = fs::read(path).map_err(|source| SessionError::Read { path: path.to_owned(), source })?;
        Ok(format::leading_message_lines(&bytes, session.offset))
    }

    /// `.cli_direct.jsonl.<pid>.<n>.tmp` next to `path`: hidden, and not `*.jsonl`, so no
    /// session listing picks it up.
    fn temp_path(&self, path: &Path) -> PathBuf {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
    }
}

/// Writes the leading lines (header, archived messages), the messages and the records to a
/// new file at `temp` and flushes it to disk.
fn write_temp(temp: &Path, leading: &[&[u8]], messages: &[ChatMessage], records: &[Record]) -> io::Result<()> {
    let file = File::create_new(temp)?;
    let mut out = BufWriter::with_capacity(256 * 1024, file);
    for lines in leading {
        out.write_all(lines)?;
    }
    let mut line = Vec::new();
    for message in messages {
        line.clear();
        format::encode_messages(std::slice::from_ref(message), &mut line)?;
        out.write_all(&line)?;
    }
    line.clear();
    format::encode_records(records, &mut line)?;
    out.write_all(&line)?;
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()
}

fn open_for_write(path: &Path) -> Result<File, SessionError> {
    OpenOptions::new().write(true).open(path).map_err(|source| write_error(path, source))
}

fn write_error(path: &Path, source: io::Error) -> SessionError {
    SessionError::Write { path: path.to_path_buf(), source }
}

fn encode_error(path: &Path, source: serde_json::Error) -> SessionError {
    SessionError::Encode { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use serde_json::{Value, json};

    use super::*;
    use crate::message::{Role, ToolCall};
    use crate::testing::TempDir;

    fn store_in(dir: &TempDir) -> SessionStore {
        SessionStore::in_dir(&dir.path().join("sessions"))
    }

    fn user(text: &str) -> ChatMessage {
        ChatMessage::text(Role::User, text)
    }

    fn conversation(turns: usize) -> Vec<ChatMessage> {
        (0..turns)
            .flat_map(|i| [user(&format!("question {i}")), ChatMessage::text(Role::Assistant, format!("answer {i}"))])
            .collect()
    }

    fn lines_of(path: &Path) -> Vec<Value> {
        fs::read_to_string(path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    fn temp_files_in(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".tmp"))
            .collect()
    }

    const NANOBOT_FILE: &str = concat!(
        r#"{"_type": "metadata", "key": "cli:direct", "created_at": "2026-04-14T20:49:51.526861", "updated_at": "2026-04-15T15:48:39.037309", "metadata": {"pending_user_turn": true, "channel_state": {"a": 1}}, "last_consolidated": 2, "schema_note": "kept"}"#,
        "\n",
        r#"{"role": "user", "content": "你用的大模型是哪家的?", "timestamp": "2026-04-15T14:58:32.117159"}"#,
        "\n",
        r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}], "timestamp": "2026-04-15T14:58:33.000001"}"#,
        "\n",
        r#"{"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "hello", "timestamp": "2026-04-15T14:58:34.000002", "latency_ms": 12}"#,
        "\n",
    );

    #[test]
    fn open_inbox_records_survive_a_load_and_a_rewrite_and_closed_ones_are_dropped() {
        use crate::session::InboxState;
        use crate::session::journal::{InboxRecord, Record};
        let dir = TempDir::new("store-records");
        let store = store_in(&dir);
        let accepted = |id: &str| {
            let mut record = InboxRecord::state(id, InboxState::Accepted);
            record.text = Some(format!("message {id}"));
            Record::Inbox(record)
        };
        let mut session = store.load("loopback:c1").unwrap().session;
        store.append_with_records(&mut session, Vec::new(), vec![accepted("a"), accepted("b")]).unwrap();
        let answered = Record::Inbox(InboxRecord::state("a", InboxState::Answered));
        store.append_with_records(&mut session, vec![user("message a")], vec![answered]).unwrap();
        let pending_ids = |session: &Session| session.pending_messages().into_iter().map(|p| p.id).collect::<Vec<_>>();
        let mut loaded = store.load("loopback:c1").unwrap().session;
        assert_eq!(pending_ids(&loaded), ["b"]);
        assert_eq!(loaded.messages.len(), 1);
        store.rewrite(&mut loaded).unwrap();
        let lines = lines_of(&store.path_for("loopback:c1"));
        assert_eq!(lines.len(), 3, "header, the message, b's record: {lines:?}");
        assert!(lines.iter().all(|l| l.get("role").is_some() || l.get("_type").is_some()), "nanobot reads every line");
        assert_eq!(pending_ids(&store.load("loopback:c1").unwrap().session), ["b"]);
    }

    #[test]
    fn a_turns_message_is_found_by_its_marks_after_appends_loads_archiving_and_edits_behind_the_stores_back() {
        use crate::session::journal::{INBOUND_ID_KEY, INBOX_ID_KEY};
        let dir = TempDir::new("store-marks");
        let store = store_in(&dir);
        let marked = |inbox: &str, inbound: &str| {
            let mut message = user("hello");
            message.extra.insert(INBOX_ID_KEY.into(), inbox.into());
            message.extra.insert(INBOUND_ID_KEY.into(), inbound.into());
            message
        };
        let mut session = store.load("telegram:1").unwrap().session;
        store.append(&mut session, conversation(3)).unwrap();
        store.append(&mut session, vec![marked("m1", "tg-1"), ChatMessage::text(Role::Assistant, "hi")]).unwrap();
        assert_eq!(session.turn_start("m1"), Some(6));
        assert_eq!(session.turn_start("m2"), None);
        assert!(session.may_carry(INBOUND_ID_KEY, "tg-1") && !session.may_carry(INBOUND_ID_KEY, "tg-2"));

        let mut loaded = store.load("telegram:1").unwrap().session;
        assert_eq!(loaded.turn_start("m1"), Some(6), "the marks are rebuilt on load");
        loaded.last_consolidated = 4;
        loaded.forget_archived();
        assert_eq!(loaded.turn_start("m1"), Some(2), "archiving moves the message, not the answer");

        loaded.messages.push(marked("m2", "tg-2"));
        assert!(loaded.may_carry(INBOX_ID_KEY, "m2"), "a message pushed behind the store's back is searched for");
        assert_eq!(loaded.turn_start("m2"), Some(4));
        loaded.clear();
        assert_eq!(loaded.turn_start("m1"), None);
    }

    #[test]
    fn a_run_of_appends_refreshes_the_files_updated_at_once_and_not_on_every_append() {
        let dir = TempDir::new("store-stamp");
        let store = store_in(&dir);
        let path = store.path_for("cli:direct");
        let on_disk = || lines_of(&path)[0]["updated_at"].as_str().unwrap().to_owned();
        store.append(&mut Session::new("cli:direct"), conversation(1)).unwrap();
        let mut session = store.load("cli:direct").unwrap().session;
        store.append(&mut session, conversation(1)).unwrap();
        assert_eq!(on_disk(), session.updated_at, "the first append after a load refreshes it");
        let refreshed = session.updated_at.clone();
        store.append(&mut session, conversation(1)).unwrap();
        assert_ne!(session.updated_at, refreshed);
        assert_eq!(on_disk(), refreshed, "an append within the second leaves the metadata line alone");
        assert_eq!(lines_of(&path).len(), 7, "every message is on disk all the same");
    }

    #[test]
    fn path_for_maps_the_key_to_its_base64_name_in_the_sessions_dir() {
        let store = SessionStore::in_dir(Path::new("/data/sessions/0123"));
        assert_eq!(store.path_for("cli:direct"), Path::new("/data/sessions/0123/Y2xpOmRpcmVjdA.jsonl"));
        assert_eq!(store.path_for("web:../x"), Path::new("/data/sessions/0123/d2ViOi4uL3g.jsonl"));
        assert_ne!(store.path_for("telegram:1/2"), store.path_for("telegram:1_2"));
    }

    #[test]
    fn a_session_only_nanobot_has_is_copied_on_first_load_and_nanobots_file_is_left_as_it_was() {
        let dir = TempDir::new("store-nanobot");
        let nanobot = dir.write("nanobot/sessions/0123/Y2xpOmRpcmVjdA.jsonl", NANOBOT_FILE);
        let store = store_in(&dir).with_nanobot_sessions(nanobot.parent().map(Path::to_path_buf));
        let mut session = store.load("cli:direct").unwrap().session;
        assert_eq!(session.messages.len(), 3);
        store.append(&mut session, vec![user("next")]).unwrap();
        assert_eq!(fs::read_to_string(&nanobot).unwrap(), NANOBOT_FILE, "nanobot's file is untouched");
        assert_eq!(store.load("cli:direct").unwrap().session.messages.len(), 4, "our copy is the one used");
        assert!(store.load("cli:other").unwrap().session.messages.is_empty());
    }

    #[test]
    fn sessions_of_a_workspace_live_in_the_data_dir_and_old_files_move_there() {
        let dir = TempDir::new("store-workspace");
        let workspace = dir.path().join("workspace");
        dir.write("workspace/sessions/cli_direct.jsonl", NANOBOT_FILE);
        let store = SessionStore::for_workspace(&workspace, &dir.path().join("home"));
        assert!(store.dir().starts_with(dir.path().join("home/sessions")));
        assert!(!workspace.join("sessions/cli_direct.jsonl").exists(), "the old file moved");
        let loaded = store.load("cli:direct").unwrap().session;
        assert_eq!(loaded.messages.len(), 3);
        assert_eq!(fs::read_to_string(store.path_for("cli:direct")).unwrap(), NANOBOT_FILE);
    }

    #[test]
    fn an_old_file_that_appears_later_is_moved_when_its_session_loads() {
        let dir = TempDir::new("store-late-legacy");
        let workspace = dir.path().join("workspace");
        let store = SessionStore::for_workspace(&workspace, &dir.path().join("home"));
        dir.write("workspace/sessions/cli_direct.jsonl", NANOBOT_FILE);
        assert_eq!(store.load("cli:direct").unwrap().session.messages.len(), 3);
        assert!(store.path_for("cli:direct").exists());
        assert!(!workspace.join("sessions/cli_direct.jsonl").exists());
    }

    #[test]
    fn a_new_session_is_created_in_place_without_a_temporary_file() {
        let dir = TempDir::new("store-create");
        let store = store_in(&dir);
        let mut session = store.load("cli:direct").unwrap().session;
        store.append(&mut session, vec![user("remember this")]).unwrap();
        assert!(temp_files_in(store.dir()).is_empty());
        let lines = lines_of(&store.path_for("cli:direct"));
        assert_eq!(lines[1]["content"], "remember this");
        // The file grows by appends from here on.
        store.append(&mut session, vec![ChatMessage::text(Role::Assistant, "noted")]).unwrap();
        assert_eq!(store.load("cli:direct").unwrap().session.messages.len(), 2);
    }

    #[test]
    fn a_missing_file_loads_as_a_new_empty_session_and_the_first_append_creates_it() {
        let dir = TempDir::new("missing");
        let store = store_in(&dir);
        let LoadedSession { mut session, repaired } = store.load("cli:direct").unwrap();
        assert!(session.messages.is_empty());
        assert_eq!(repaired, None);
        assert!(!store.path_for("cli:direct").exists());

        store.append(&mut session, vec![user("hi")]).unwrap();
        let path = store.path_for("cli:direct");
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes[HEADER_WIDTH - 1], b'\n');
        let lines = lines_of(&path);
        assert_eq!(lines[0]["_type"], "metadata");
        assert_eq!(lines[0]["key"], "cli:direct");
        assert_eq!(lines[1]["content"], "hi");
    }

    #[test]
    fn messages_round_trip_with_tool_calls_and_unknown_fields() {
        let dir = TempDir::new("roundtrip");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        let call = ToolCall::new("call_1", "exec", r#"{"command": "ls"}"#);
        let mut asking = ChatMessage::text(Role::Assistant, "");
        asking.content = Value::Null;
        asking.tool_calls = vec![call.clone()];
        asking.reasoning_content = Some("need a listing".into());
        let mut result = ChatMessage::tool_result(&call, "a\nb");
        result.extra.insert("latency_ms".into(), json!(42));
        let mut picture = user("look");
        picture.content =
            json!([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]);
        picture.timestamp = Some("2026-01-02T03:04:05.123456".into());
        store.append(&mut session, vec![picture, asking, result]).unwrap();
        session.metadata.insert("pending_user_turn".into(), json!(true));
        session.last_consolidated = 1;
        store.save_metadata(&mut session).unwrap();

        let loaded = store.load("cli:direct").unwrap();
        assert_eq!(loaded.repaired, None);
        assert_eq!(loaded.session, session);
        assert_eq!(loaded.session.messages[0].timestamp.as_deref(), Some("2026-01-02T03:04:05.123456"));
        assert!(loaded.session.messages[1].timestamp.is_some());
    }

    #[test]
    fn a_nanobot_written_file_loads_and_keeps_its_keys_after_save_metadata() {
        let dir = TempDir::new("nanobot");
        let store = store_in(&dir);
        let path = store.path_for("cli:direct");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, NANOBOT_FILE).unwrap();

        let LoadedSession { mut session, repaired } = store.load("cli:direct").unwrap();
        assert_eq!(repaired, None);
        assert_eq!(session.created_at, "2026-04-14T20:49:51.526861");
        assert_eq!(session.last_consolidated, 2);
        assert_eq!(session.metadata["channel_state"], json!({"a": 1}));
        assert_eq!(session.messages.len(), 3);
        assert_eq!(session.messages[2].extra["latency_ms"], json!(12));

        let inode = fs::metadata(&path).unwrap().ino();
        session.metadata.remove("pending_user_turn");
        store.save_metadata(&mut session).unwrap();
        // The unpadded line could not be overwritten in place: the file was replaced once.
        assert_ne!(fs::metadata(&path).unwrap().ino(), inode);
        let lines = lines_of(&path);
        assert_eq!(lines[0]["schema_note"], "kept");
        assert_eq!(lines[0]["metadata"], json!({"channel_state": {"a": 1}}));
        assert_eq!(lines[0]["created_at"], "2026-04-14T20:49:51.526861");
        assert_eq!(lines[1]["content"], "你用的大模型是哪家的?");
        assert_eq!(lines[3]["latency_ms"], 12);

        // From now on the padded line is updated in place.
        let inode = fs::metadata(&path).unwrap().ino();
        session.last_consolidated = 3;
        store.save_metadata(&mut session).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);
        assert_eq!(store.load("cli:direct").unwrap().session, session);
    }

    #[test]
    fn appending_ten_messages_to_ten_thousand_does_not_rewrite_the_file() {
        let dir = TempDir::new("long");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        session.messages = conversation(5_000);
        store.rewrite(&mut session).unwrap();
        let path = store.path_for("cli:direct");
        let before = fs::read(&path).unwrap();
        let inode = fs::metadata(&path).unwrap().ino();

        let LoadedSession { mut session, .. } = store.load("cli:direct").unwrap();
        assert_eq!(session.messages.len(), 10_000);
        let turn = conversation(5);
        store.append(&mut session, turn).unwrap();

        let after = fs::read(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);
        let mut expected_tail = Vec::new();
        format::encode_messages(&session.messages[10_000..], &mut expected_tail).unwrap();
        assert_eq!(after.len(), before.len() + expected_tail.len());
        assert_eq!(after[HEADER_WIDTH..before.len()], before[HEADER_WIDTH..]);
        assert_eq!(after[before.len()..], expected_tail[..]);
        // Only `updated_at` changed in the header, in place.
        let header: Value = serde_json::from_slice(&after[..HEADER_WIDTH]).unwrap();
        assert_eq!(header["updated_at"].as_str(), Some(session.updated_at.as_str()));
        assert_eq!(store.load("cli:direct").unwrap().session.messages.len(), 10_010);
    }

    #[test]
    fn append_stamps_messages_without_a_timestamp_and_keeps_the_others() {
        let dir = TempDir::new("stamps");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        let mut old = user("old");
        old.timestamp = Some("2020-01-01T00:00:00.000000".into());
        store.append(&mut session, vec![old, user("new")]).unwrap();
        assert_eq!(session.messages[0].timestamp.as_deref(), Some("2020-01-01T00:00:00.000000"));
        assert_eq!(session.messages[1].timestamp.as_deref(), Some(session.updated_at.as_str()));
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_the_file_repaired() {
        let dir = TempDir::new("torn");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(2)).unwrap();
        let path = store.path_for("cli:direct");
        let intact = fs::read(&path).unwrap();
        let mut torn = intact.clone();
        torn.extend_from_slice(br#"{"role": "assistant", "content": "half a rep"#);
        fs::write(&path, &torn).unwrap();

        let loaded = store.load("cli:direct").unwrap();
        assert_eq!(loaded.repaired, Some(Repair::DroppedTornLine { line: 6, bytes: torn.len() - intact.len() }));
        assert_eq!(loaded.session.messages, session.messages);
        assert_eq!(fs::read(&path).unwrap(), intact);
        assert_eq!(store.load("cli:direct").unwrap().repaired, None);
    }

    #[test]
    fn a_file_cut_at_any_byte_of_the_last_append_loads_the_turns_before_it() {
        let dir = TempDir::new("cuts");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(1)).unwrap();
        let path = store.path_for("cli:direct");
        let before = fs::read(&path).unwrap().len();
        store.append(&mut session, conversation(1)).unwrap();
        let full = fs::read(&path).unwrap();
        for cut in before..full.len() {
            fs::write(&path, &full[..cut]).unwrap();
            let loaded = store.load("cli:direct").unwrap();
            let kept = loaded.session.messages.len();
            // Only a cut that spares everything but the final newline keeps the last message.
            let whole = if cut == full.len() - 1 { 4 } else { 3 };
            assert!((2..=whole).contains(&kept), "cut at {cut}: {kept} messages");
            assert_eq!(loaded.session.messages[..], session.messages[..kept]);
        }
    }

    #[test]
    fn a_damaged_middle_line_is_an_error_naming_file_and_line() {
        let dir = TempDir::new("damaged");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(2)).unwrap();
        let path = store.path_for("cli:direct");
        let text = fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = r#"{"role": "assistant", "content": "cut"#;
        fs::write(&path, lines.join("\n") + "\n").unwrap();

        let error = store.load("cli:direct").unwrap_err();
        assert!(matches!(error, SessionError::Corrupt { line: 3, .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()) && message.contains("line 3"), "{message}");
        // Nothing was "repaired" on the way.
        assert_eq!(fs::read_to_string(&path).unwrap(), lines.join("\n") + "\n");
    }

    #[test]
    fn a_missing_final_newline_is_added_on_load() {
        let dir = TempDir::new("newline");
        let store = store_in(&dir);
        let path = store.path_for("cli:direct");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, NANOBOT_FILE.trim_end()).unwrap();
        let LoadedSession { mut session, repaired } = store.load("cli:direct").unwrap();
        assert_eq!(repaired, Some(Repair::AddedMissingNewline));
        assert_eq!(fs::read_to_string(&path).unwrap(), NANOBOT_FILE);
        store.append(&mut session, vec![user("next")]).unwrap();
        assert_eq!(store.load("cli:direct").unwrap().session.messages.len(), 4);
    }

    #[test]
    fn save_metadata_in_place_keeps_the_file_length_and_inode() {
        let dir = TempDir::new("inplace");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(3)).unwrap();
        let path = store.path_for("cli:direct");
        let before = fs::read(&path).unwrap();
        let inode = fs::metadata(&path).unwrap().ino();

        session.last_consolidated = 4;
        session.metadata.insert("runtime_checkpoint".into(), json!({"pending_tool_calls": []}));
        store.save_metadata(&mut session).unwrap();

        let after = fs::read(&path).unwrap();
        assert_eq!(after.len(), before.len());
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);
        assert_eq!(after[HEADER_WIDTH..], before[HEADER_WIDTH..]);
        assert_eq!(store.load("cli:direct").unwrap().session, session);
    }

    #[test]
    fn metadata_outgrowing_its_pad_rewrites_the_file_atomically_with_a_wider_pad() {
        let dir = TempDir::new("outgrow");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(3)).unwrap();
        let path = store.path_for("cli:direct");
        let inode = fs::metadata(&path).unwrap().ino();

        session.metadata.insert("runtime_checkpoint".into(), json!({"assistant_message": "x".repeat(700)}));
        store.save_metadata(&mut session).unwrap();

        assert_ne!(fs::metadata(&path).unwrap().ino(), inode);
        assert!(temp_files_in(store.dir()).is_empty());
        let bytes = fs::read(&path).unwrap();
        let width = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        assert!(width > HEADER_WIDTH && width % HEADER_WIDTH == 0, "width {width}");
        let loaded = store.load("cli:direct").unwrap().session;
        assert_eq!(loaded, session);

        // The wider pad now absorbs the next change in place.
        let inode = fs::metadata(&path).unwrap().ino();
        session.metadata.remove("runtime_checkpoint");
        store.save_metadata(&mut session).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);
        assert_eq!(fs::read(&path).unwrap().len(), bytes.len());
    }

    #[test]
    fn a_session_that_forgot_its_archived_messages_keeps_them_in_the_file_through_a_whole_rewrite() {
        let dir = TempDir::new("forgotten");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(5)).unwrap();
        session.last_consolidated = 6;
        store.save_metadata(&mut session).unwrap();
        session.forget_archived();
        assert_eq!((session.offset, session.messages.len(), session.message_count()), (6, 4, 10));
        let texts = |messages: &[ChatMessage]| messages.iter().map(ChatMessage::text_content).collect::<Vec<_>>();
        assert_eq!(texts(session.unconsolidated()), texts(&conversation(5)[6..]));

        store.append(&mut session, conversation(1)).unwrap();
        session.metadata.insert("runtime_checkpoint".into(), json!({"assistant_message": "x".repeat(700)}));
        store.save_metadata(&mut session).unwrap();

        let loaded = store.load("cli:direct").unwrap().session;
        let mut all = conversation(5);
        all.extend(conversation(1));
        assert_eq!(texts(&loaded.messages), texts(&all), "the archived messages are still in the file, in order");
        assert_eq!(loaded.last_consolidated, 6);
        assert_eq!(loaded.metadata, session.metadata);
    }

    #[test]
    fn metadata_past_the_in_place_limit_is_always_rewritten_whole() {
        let dir = TempDir::new("huge");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        session.metadata.insert("runtime_checkpoint".into(), json!("y".repeat(IN_PLACE_LIMIT)));
        store.append(&mut session, conversation(1)).unwrap();
        let path = store.path_for("cli:direct");
        let inode = fs::metadata(&path).unwrap().ino();
        session.last_consolidated = 1;
        store.save_metadata(&mut session).unwrap();
        assert_ne!(fs::metadata(&path).unwrap().ino(), inode);
        assert_eq!(store.load("cli:direct").unwrap().session, session);
    }

    #[test]
    fn rewrite_after_clear_leaves_only_the_metadata_line() {
        let dir = TempDir::new("clear");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        store.append(&mut session, conversation(3)).unwrap();
        session.clear();
        store.rewrite(&mut session).unwrap();
        let path = store.path_for("cli:direct");
        assert_eq!(fs::read(&path).unwrap().len(), HEADER_WIDTH);
        assert!(temp_files_in(store.dir()).is_empty());
        let loaded = store.load("cli:direct").unwrap().session;
        assert!(loaded.messages.is_empty());
        assert_eq!(loaded.last_consolidated, 0);
    }

    #[test]
    fn a_file_without_a_leading_metadata_line_is_given_one_on_the_first_append() {
        let dir = TempDir::new("headless");
        let store = store_in(&dir);
        let path = store.path_for("cli:direct");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "{\"role\": \"user\", \"content\": \"a\"}\n").unwrap();
        let mut session = store.load("cli:direct").unwrap().session;
        store.append(&mut session, vec![user("b")]).unwrap();
        let lines = lines_of(&path);
        assert_eq!(lines[0]["_type"], "metadata");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn a_consolidation_cursor_past_the_end_is_clamped_on_load() {
        let dir = TempDir::new("cursor");
        let store = store_in(&dir);
        let path = store.path_for("cli:direct");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(
            &path,
            "{\"_type\": \"metadata\", \"last_consolidated\": 9}\n{\"role\": \"user\", \"content\": \"a\"}\n",
        )
        .unwrap();
        assert_eq!(store.load("cli:direct").unwrap().session.last_consolidated, 1);
    }

    #[test]
    fn a_failed_append_leaves_the_session_unchanged() {
        let dir = TempDir::new("failed");
        let store = store_in(&dir);
        let mut session = Session::new("cli:direct");
        // A directory where the file should be makes every write fail.
        fs::create_dir_all(store.path_for("cli:direct")).unwrap();
        let before = session.clone();
        assert!(matches!(store.append(&mut session, vec![user("hi")]), Err(SessionError::Write { .. })));
        assert_eq!(session, before);
        assert!(temp_files_in(store.dir()).is_empty());
    }
}

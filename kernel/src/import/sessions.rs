//! Copying nanobot's session files into oxibot's private session directory of their
//! workspace, and deciding what a second import does with a session copied before.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::source::SessionDir;
use super::{Action, Area, ImportOptions, Report, Source, count};
use crate::fsutil::write_atomic;
use crate::session::location::{self, storage_name};

/// How nanobot's copy of a session compares with oxibot's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// oxibot has no copy.
    New,
    /// Both hold the same conversation.
    Same,
    /// oxibot's copy continues nanobot's by this many messages.
    OxibotAhead(usize),
    /// nanobot's copy continues oxibot's by this many messages (oxibot added none).
    NanobotAhead(usize),
    /// Each holds messages the other lacks.
    Diverged,
}

/// Imports every session file of the data dir and of its workspace.
pub fn import(source: &Source, options: &ImportOptions, report: &mut Report) {
    let (dirs, unknown) = source.session_dirs();
    for dir in unknown {
        report.push(
            Area::Sessions,
            Action::Note,
            format!("{} names no workspace (no .workspace marker): its sessions stay there", dir.display()),
        );
    }
    let mut done = HashSet::new();
    for dir in dirs {
        import_dir(&dir, options, report, &mut done);
    }
}

/// Imports the `*.jsonl` files of one directory.
fn import_dir(dir: &SessionDir, options: &ImportOptions, report: &mut Report, done: &mut HashSet<PathBuf>) {
    let mut files: Vec<PathBuf> = match fs::read_dir(&dir.dir) {
        Ok(entries) => entries.flatten().map(|entry| entry.path()).collect(),
        Err(error) => {
            report.push(Area::Sessions, Action::Fail, format!("cannot read {}: {error}", dir.dir.display()));
            return;
        }
    };
    files.retain(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "jsonl"));
    files.sort();
    let target = location::private_dir(&options.data_dir, &dir.workspace);
    for file in files {
        let Some(key) = location::key_of(&file) else {
            report.push(
                Area::Sessions,
                Action::Note,
                format!("{} has no session key in its first line", file.display()),
            );
            continue;
        };
        if dir.keyed && file.file_name().is_some_and(|name| name.to_string_lossy() != storage_name(&key)) {
            report.push(Area::Sessions, Action::Note, format!("{} is not named after its key {key}", file.display()));
            continue;
        }
        let dest = target.join(storage_name(&key));
        if !done.insert(dest.clone()) {
            report.push(
                Area::Sessions,
                Action::Skip,
                format!("{}: session {key} was imported from an earlier layout's file already", file.display()),
            );
            continue;
        }
        import_file(&file, &key, &dest, &dir.workspace, options.dry_run, report);
    }
}

/// Imports one session file to `dest`.
fn import_file(file: &Path, key: &str, dest: &Path, workspace: &Path, dry_run: bool, report: &mut Report) {
    let bytes = match fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => {
            return report.push(Area::Sessions, Action::Fail, format!("cannot read {}: {error}", file.display()));
        }
    };
    let existing = fs::read(dest).ok();
    let verdict = match &existing {
        None => Verdict::New,
        Some(ours) => compare(&bytes, ours),
    };
    let total = messages(&bytes).len();
    let (action, detail) = match verdict {
        Verdict::New => {
            (Action::Copy, format!("session {key} ({}) to {}", count(total, "message", "messages"), dest.display()))
        }
        Verdict::NanobotAhead(more) => (
            Action::Update,
            format!(
                "session {key}: nanobot's copy has {} since the last import",
                count(more, "new message", "new messages")
            ),
        ),
        Verdict::Same => (Action::Skip, format!("session {key}: already imported, unchanged")),
        Verdict::OxibotAhead(more) => (
            Action::Keep,
            format!(
                "oxibot's copy of session {key}: it has {} more than nanobot's",
                count(more, "message", "messages")
            ),
        ),
        Verdict::Diverged => (
            Action::Keep,
            format!(
                "oxibot's copy of session {key}: both copies changed since the import (nanobot's stays in {})",
                file.display()
            ),
        ),
    };
    if action.changes() && !dry_run {
        let written = dest
            .parent()
            .map_or(Ok(()), |dir| location::create_private_dir(dir, workspace))
            .and_then(|()| write_atomic(dest, &bytes));
        if let Err(error) = written {
            return report.push(Area::Sessions, Action::Fail, format!("cannot write {}: {error}", dest.display()));
        }
    }
    report.push(Area::Sessions, action, detail);
}

/// How nanobot's file compares with oxibot's, by their messages (oxibot rewrites the
/// metadata line, so the bytes of the two differ as soon as oxibot has used the session).
fn compare(nanobot: &[u8], oxibot: &[u8]) -> Verdict {
    if nanobot == oxibot {
        return Verdict::Same;
    }
    let (theirs, ours) = (messages(nanobot), messages(oxibot));
    let shared = theirs.iter().zip(&ours).take_while(|(a, b)| a == b).count();
    match (shared == theirs.len(), shared == ours.len()) {
        (true, true) => Verdict::Same,
        (true, false) => Verdict::OxibotAhead(ours.len() - shared),
        (false, true) => Verdict::NanobotAhead(theirs.len() - shared),
        (false, false) => Verdict::Diverged,
    }
}

/// What identifies each message of a file: role, content and timestamp. Metadata and other
/// records, and lines that do not parse, are left out.
fn messages(bytes: &[u8]) -> Vec<[Value; 3]> {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line.trim_ascii()).ok())
        .filter(|record| record.get("_type").is_none() && record.get("role").is_some())
        .map(|message| ["role", "content", "timestamp"].map(|field| message.get(field).cloned().unwrap_or(Value::Null)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "{\"_type\": \"metadata\", \"key\": \"cli:direct\"}\n";

    fn file(header: &str, messages: &[&str]) -> Vec<u8> {
        let mut text = header.to_owned();
        for (i, content) in messages.iter().enumerate() {
            text.push_str(&format!("{{\"role\": \"user\", \"content\": \"{content}\", \"timestamp\": \"t{i}\"}}\n"));
        }
        text.into_bytes()
    }

    #[test]
    fn copies_compare_by_their_messages_not_their_metadata_lines() {
        let nanobot = file(HEADER, &["a", "b"]);
        let padded = format!("{}{}\n", HEADER.trim_end(), " ".repeat(100));
        assert_eq!(compare(&nanobot, &nanobot), Verdict::Same);
        assert_eq!(compare(&nanobot, &file(&padded, &["a", "b"])), Verdict::Same);
        assert_eq!(compare(&nanobot, &file(&padded, &["a", "b", "c"])), Verdict::OxibotAhead(1));
        assert_eq!(
            compare(&file(HEADER, &["a", "b", "c", "d"]), &file(&padded, &["a", "b"])),
            Verdict::NanobotAhead(2)
        );
        assert_eq!(compare(&file(HEADER, &["a", "x"]), &file(&padded, &["a", "y"])), Verdict::Diverged);
    }
}

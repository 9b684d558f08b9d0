//! Where session files live: a directory of the data dir private to one workspace
//! (`<data dir>/sessions/<workspace id>/<base64url of the key>.jsonl`, nanobot 0.3's layout),
//! out of reach of the model's file tools, and the move of files that older versions kept
//! inside the workspace (`<workspace>/sessions/<channel>_<chat>.jsonl`), and where nanobot 0.3
//! keeps the sessions of a workspace (`<nanobot data dir>/sessions/<workspace id>/`, the id
//! being the one in `<workspace>/.nanobot/workspace-id`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tracing::{info, warn};

use super::format;

/// The file in a workspace's session directory that names the workspace it belongs to.
pub const WORKSPACE_MARKER: &str = ".workspace";
/// Where nanobot 0.3 records a workspace's id, relative to the workspace.
pub const NANOBOT_WORKSPACE_ID: &str = ".nanobot/workspace-id";

/// The private session directory of `workspace` under `data_dir`: named by a hash of the
/// workspace's canonical path, so two workspaces never share sessions.
pub fn private_dir(data_dir: &Path, workspace: &Path) -> PathBuf {
    data_dir.join("sessions").join(workspace_id(workspace))
}

/// A workspace's id: 16 hex digits of the FNV-1a hash of its canonical path. Everything the
/// kernel keeps per workspace in the data dir (sessions, the memory index) is named by it.
pub fn workspace_id(workspace: &Path) -> String {
    let canonical = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    format!("{:016x}", fnv1a64(canonical.as_os_str().as_encoded_bytes()))
}

/// Where older versions (and older nanobot) kept the sessions of `workspace`.
pub fn legacy_dir(workspace: &Path) -> PathBuf {
    workspace.join("sessions")
}

/// The file name of session `key` in a private directory: the key in URL-safe base64
/// without padding, so every key maps to its own file and back.
pub fn storage_name(key: &str) -> String {
    format!("{}.jsonl", base64url(key.as_bytes()))
}

/// The file name older layouts used: `cli:direct` → `cli_direct.jsonl`.
pub fn legacy_name(key: &str) -> String {
    format!("{}.jsonl", format::file_stem(key))
}

/// The id nanobot 0.3 gave `workspace` (32 lowercase hex digits in
/// `<workspace>/.nanobot/workspace-id`), if it has one; a symlink or any other content is no id.
pub fn nanobot_workspace_id(workspace: &Path) -> Option<String> {
    let path = workspace.join(NANOBOT_WORKSPACE_ID);
    if fs::symlink_metadata(&path).ok()?.file_type().is_symlink() {
        return None;
    }
    let id = fs::read_to_string(&path).ok()?.trim().to_owned();
    is_nanobot_namespace(&id).then_some(id)
}

/// Whether `name` is a nanobot 0.3 session namespace: 32 lowercase hex digits.
pub fn is_nanobot_namespace(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The directory where nanobot 0.3, run with the config file in `config_dir`, keeps the
/// sessions of `workspace`, when there is one.
pub fn nanobot_dir(config_dir: &Path, workspace: &Path) -> Option<PathBuf> {
    let dir = config_dir.join("sessions").join(nanobot_workspace_id(workspace)?);
    dir.is_dir().then_some(dir)
}

/// The workspace a session directory's marker names, if it has a readable one.
pub fn marked_workspace(dir: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(dir.join(WORKSPACE_MARKER)).ok()?;
    let path = text.trim();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// Creates `workspace`'s private session directory `dir` (readable by its owner only) with
/// its marker.
pub fn create_private_dir(dir: &Path, workspace: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    write_marker(dir, workspace);
    Ok(())
}

/// Records which workspace `dir` belongs to (for people and migration tools); best effort.
pub(super) fn write_marker(dir: &Path, workspace: &Path) {
    let marker = dir.join(WORKSPACE_MARKER);
    if marker.exists() {
        return;
    }
    if let Err(error) = fs::write(&marker, format!("{}\n", workspace.display())) {
        warn!(path = %marker.display(), %error, "cannot write the workspace marker of a session directory");
    }
}

/// Moves every session file of `legacy` into `private` (named by the key in its metadata
/// line); a file whose key already has a private file is left where it is. Returns how many
/// moved.
pub fn migrate_all(legacy: &Path, private: &Path) -> io::Result<usize> {
    let entries = match fs::read_dir(legacy) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    let mut moved = 0;
    for path in entries.filter_map(Result::ok).map(|entry| entry.path()) {
        if path.extension().is_none_or(|ext| ext != "jsonl") {
            continue;
        }
        let Some(key) = key_of(&path) else {
            warn!(path = %path.display(), "a session file without a readable key stays where it is");
            continue;
        };
        if migrate_one(&path, &private.join(storage_name(&key)))? {
            moved += 1;
        }
    }
    Ok(moved)
}

/// Moves `from` to `to` unless `to` exists; returns whether it moved. A move across file
/// systems copies, syncs, then removes the original.
pub(super) fn migrate_one(from: &Path, to: &Path) -> io::Result<bool> {
    if to.exists() {
        return Ok(false);
    }
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::rename(from, to) {
        Ok(()) => {}
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            fs::copy(from, to)?;
            fs::File::open(to)?.sync_all()?;
            fs::remove_file(from)?;
        }
        Err(error) => return Err(error),
    }
    info!(from = %from.display(), to = %to.display(), "moved a session file out of the workspace");
    Ok(true)
}

/// The session key in the metadata line of `path`.
pub fn key_of(path: &Path) -> Option<String> {
    header_of(path)?.get("key").and_then(Value::as_str).map(str::to_owned)
}

/// The metadata line of the session file at `path`, read alone: a session file can hold years
/// of conversation.
pub fn header_of(path: &Path) -> Option<Value> {
    let mut first = String::new();
    io::BufRead::read_line(&mut io::BufReader::new(fs::File::open(path).ok()?), &mut first).ok()?;
    serde_json::from_str(first.trim()).ok()
}

/// The key of the session in `dir` updated most recently among those `wanted` accepts (by the
/// `updated_at` of their metadata lines), if any.
pub fn most_recent(dir: &Path, wanted: impl Fn(&str) -> bool) -> Option<String> {
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|path| header_of(&path))
        .filter_map(|header| {
            let key = header.get("key")?.as_str()?.to_owned();
            let updated = header.get("updated_at")?.as_str()?.to_owned();
            wanted(&key).then_some((updated, key))
        })
        .max()
        .map(|(_, key)| key)
}

/// URL-safe base64 without padding (RFC 4648 §5).
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// 64-bit FNV-1a: a stable, dependency-free name for a workspace path.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn keys_are_stored_as_unpadded_url_safe_base64() {
        assert_eq!(storage_name("cli:direct"), "Y2xpOmRpcmVjdA.jsonl");
        assert_eq!(storage_name("a"), "YQ.jsonl");
        assert_eq!(storage_name("ab"), "YWI.jsonl");
        assert_eq!(storage_name("abc"), "YWJj.jsonl");
        assert_eq!(storage_name("web:../../etc"), "d2ViOi4uLy4uL2V0Yw.jsonl");
        assert_eq!(storage_name("\u{ff}\u{fe}"), "w7_Dvg.jsonl");
    }

    #[test]
    fn each_workspace_gets_its_own_private_directory_outside_it() {
        let home = TempDir::new("loc-home");
        let (a, b) = (home.path().join("ws-a"), home.path().join("ws-b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let dir_a = private_dir(home.path(), &a);
        assert_ne!(dir_a, private_dir(home.path(), &b));
        assert_eq!(dir_a, private_dir(home.path(), &a.join(".")));
        assert!(dir_a.starts_with(home.path().join("sessions")));
        assert!(!dir_a.starts_with(&a));
    }

    #[test]
    fn legacy_files_move_by_the_key_in_their_metadata_and_never_overwrite() {
        let dir = TempDir::new("loc-migrate");
        dir.write("ws/sessions/cli_direct.jsonl", "{\"_type\": \"metadata\", \"key\": \"cli:direct\"}\n");
        dir.write("ws/sessions/telegram_1.jsonl", "{\"_type\": \"metadata\", \"key\": \"telegram:1\"}\n");
        dir.write("ws/sessions/notes.txt", "not a session");
        let private = dir.path().join("private");
        dir.write("private/dGVsZWdyYW06MQ.jsonl", "{\"_type\": \"metadata\", \"key\": \"telegram:1\"}\n{}\n");

        assert_eq!(migrate_all(&dir.path().join("ws/sessions"), &private).unwrap(), 1);
        assert!(private.join("Y2xpOmRpcmVjdA.jsonl").exists());
        assert!(!dir.path().join("ws/sessions/cli_direct.jsonl").exists());
        assert!(dir.path().join("ws/sessions/telegram_1.jsonl").exists(), "an existing private file wins");
        assert_eq!(dir.read("private/dGVsZWdyYW06MQ.jsonl").lines().count(), 2);
    }
}

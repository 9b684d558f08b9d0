//! `write_file`, and the atomic write (temp file in the same directory, then rename) that
//! every tool changing a file uses, so a kill mid-write never leaves a half-written file.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use oxibot_plugin::beneath::{AccessError, DirHandle, Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

/// Marks temp files so a leftover one (after a power cut) is recognisable.
const TEMP_MARK: &str = ".oxibot-tmp";

/// The arguments of `write_file`.
#[derive(Deserialize)]
struct Args {
    path: String,
    content: String,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "write_file",
        "Create or overwrite a whole file; for changes use edit_file.",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"]
        }),
    )
}

/// Runs `write_file`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let files = WorkspaceDir::open(&ctx)?;
    let target = files.resolve(&args.path)?;
    crate::blocking(move || {
        match files.metadata(&target) {
            Ok(meta) if meta.is_dir() => {
                return Err(ToolError::new(format!("{} is a directory; give the path of a file inside it", args.path)));
            }
            Err(AccessError::Io(_)) | Ok(_) => {}
            Err(refused) => return Err(refused.into()),
        }
        write_atomically(&files, &target, args.content.as_bytes()).map_err(|e| write_error(&args.path, e))?;
        Ok(format!("wrote {} to {}", crate::plural(args.content.len(), "byte"), args.path))
    })
    .await
}

/// The error for a failed write of `shown`.
pub fn write_error(shown: &str, error: AccessError) -> ToolError {
    crate::access_error(error, |e| ToolError::new(format!("cannot write {shown}: {e}")))
}

/// Replaces the content of `target` so that readers (and a crash) see the old file or the
/// new one, never a mix: write a temp file beside it, flush it to disk, rename it over the
/// target. The temp file is made and renamed relative to one handle on the directory, opened
/// beneath the workspace root, so no symlink swapped meanwhile can redirect the write.
///
/// Missing parent directories are created. An existing file keeps its permissions. When
/// `target` is a symlink to a file (beneath the root when restricted), that file is replaced
/// and the link kept; a dangling link is itself replaced by the file.
pub fn write_atomically(files: &WorkspaceDir, target: &Target, content: &[u8]) -> Result<(), AccessError> {
    let (dir, name) = files.replace_slot(target)?;
    let temp = temp_name(&name);
    let result = write_then_rename(&dir, &temp, &name, content);
    if result.is_err() {
        let _ = dir.remove_file(&temp);
    }
    // Best effort: not all systems let a directory be flushed.
    let _ = dir.sync();
    result
}

/// A temp name beside `name` that no other write (in this or another process) uses.
fn temp_name(name: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".{}.{}-{n}{TEMP_MARK}", name.to_string_lossy(), std::process::id()).into()
}

fn write_then_rename(dir: &DirHandle, temp: &OsStr, name: &OsStr, content: &[u8]) -> Result<(), AccessError> {
    // Never write through something already sitting at the temp name, not even a symlink.
    let mut file = dir.create_new(temp)?;
    file.write_all(content)?;
    if let Ok(meta) = dir.symlink_metadata(name)
        && meta.is_file()
    {
        file.set_permissions(meta.permissions())?;
    }
    file.sync_all()?;
    drop(file);
    dir.rename(temp, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn temp_files_in(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(TEMP_MARK))
            .collect()
    }

    #[tokio::test]
    async fn writing_creates_parents_and_leaves_no_temp_files() {
        let ws = Workspace::new("write");
        let out = handle(ws.ctx(), json!({"path": "deep/dir/note.md", "content": "hello"})).await.unwrap();
        assert_eq!(out, "wrote 5 bytes to deep/dir/note.md");
        assert_eq!(ws.read("deep/dir/note.md"), "hello");
        assert!(temp_files_in(&ws.path().join("deep/dir")).is_empty());
    }

    #[tokio::test]
    async fn overwriting_replaces_the_whole_content_and_keeps_permissions() {
        let ws = Workspace::new("write");
        let path = ws.write("run.sh", "a much longer old content");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
        handle(ws.ctx(), json!({"path": "run.sh", "content": "new"})).await.unwrap();
        assert_eq!(ws.read("run.sh"), "new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o750);
    }

    #[tokio::test]
    async fn many_concurrent_writes_to_one_file_leave_one_whole_version_and_no_temp_files() {
        let ws = Workspace::new("write");
        let calls: Vec<_> = (0..16)
            .map(|i| {
                tokio::spawn(handle(
                    ws.ctx(),
                    json!({"path": "same.txt", "content": format!("version {i}\n").repeat(1000)}),
                ))
            })
            .collect();
        for call in calls {
            call.await.unwrap().unwrap();
        }
        let content = ws.read("same.txt");
        let first = content.lines().next().unwrap().to_owned();
        assert!(content.lines().all(|l| l == first), "versions were mixed");
        assert!(temp_files_in(ws.path()).is_empty());
    }

    #[tokio::test]
    async fn writing_through_a_symlink_inside_the_workspace_updates_its_target() {
        let ws = Workspace::new("write");
        ws.write("real.txt", "old");
        std::os::unix::fs::symlink(ws.path().join("real.txt"), ws.path().join("alias.txt")).unwrap();
        handle(ws.ctx(), json!({"path": "alias.txt", "content": "new"})).await.unwrap();
        assert_eq!(ws.read("real.txt"), "new");
        assert!(std::fs::symlink_metadata(ws.path().join("alias.txt")).unwrap().file_type().is_symlink());
    }

    #[tokio::test]
    async fn writing_outside_the_workspace_is_refused() {
        let ws = Workspace::new("write");
        let err = handle(ws.ctx(), json!({"path": "../escape.txt", "content": "x"})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert!(!ws.path().parent().unwrap().join("escape.txt").exists());
        let outside = outside_dir("write");
        let absolute = outside.path().join("abs.txt").display().to_string();
        assert!(handle(ws.ctx(), json!({"path": absolute, "content": "x"})).await.is_err());
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).unwrap();
        assert!(handle(ws.ctx(), json!({"path": "out/new.txt", "content": "x"})).await.is_err());
        assert!(!outside.path().join("new.txt").exists() && !outside.path().join("abs.txt").exists());
    }

    #[tokio::test]
    async fn writing_onto_a_directory_or_without_content_is_an_error() {
        let ws = Workspace::new("write");
        std::fs::create_dir(ws.path().join("d")).unwrap();
        assert!(
            handle(ws.ctx(), json!({"path": "d", "content": "x"}))
                .await
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
        let err = handle(ws.ctx(), json!({"path": "a.txt"})).await.unwrap_err();
        assert!(err.to_string().contains("missing field `content`"), "{err}");
    }

    #[test]
    fn a_failed_write_removes_its_temp_file() {
        let ws = Workspace::new("write");
        // Renaming a file over a non-empty directory fails after the temp file was written.
        ws.write("full/inner.txt", "x");
        let files = ws.files();
        assert!(write_atomically(&files, &files.resolve("full").unwrap(), b"data").is_err());
        assert!(temp_files_in(ws.path()).is_empty());
    }
}

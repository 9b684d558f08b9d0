//! `write_file`, and the atomic write (temp file + rename) every writing tool uses.

use std::io::Write;
use std::path::Path;

use oxibot_plugin::{parse_args, workspace, CallContext, Tool, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
struct Args {
    path: String,
    content: String,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "write_file",
        "Create or overwrite a file with the given content. Missing parent directories are created.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to write, relative to the workspace"},
                "content": {"type": "string", "description": "The complete new content"}
            },
            "required": ["path", "content"]
        }),
    )
}

/// Runs `write_file`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let path = workspace::resolve(&ctx, &args.path)?;
    crate::blocking(move || {
        if path.is_dir() {
            return Err(ToolError::new(format!("{} is a directory", args.path)));
        }
        write_atomically(&path, args.content.as_bytes()).map_err(|e| ToolError::new(format!("cannot write {}: {e}", args.path)))?;
        Ok(format!("wrote {} bytes to {}", args.content.len(), args.path))
    })
    .await
}

/// Writes `content` to `path` so that a reader (or a crash) sees the old file or the new one,
/// never a mix: write a temp file in the same directory, flush it to disk, rename it over.
pub fn write_atomically(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.oxibot-tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(content)?;
        file.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&temp, meta.permissions())?;
        }
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Workspace;

    #[tokio::test]
    async fn writing_creates_parents_and_leaves_no_temp_files() {
        let ws = Workspace::new("write");
        let out = handle(ws.ctx(), json!({"path": "deep/dir/note.md", "content": "hello"})).await.unwrap();
        assert_eq!(out, "wrote 5 bytes to deep/dir/note.md");
        assert_eq!(std::fs::read_to_string(ws.path().join("deep/dir/note.md")).unwrap(), "hello");
        let leftovers: Vec<_> = std::fs::read_dir(ws.path().join("deep/dir")).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains("oxibot-tmp")).collect();
        assert!(leftovers.is_empty());
    }

    #[tokio::test]
    async fn overwriting_replaces_the_whole_content() {
        let ws = Workspace::new("write");
        ws.write("a.txt", "a much longer old content");
        handle(ws.ctx(), json!({"path": "a.txt", "content": "new"})).await.unwrap();
        assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "new");
    }

    #[tokio::test]
    async fn writing_outside_the_workspace_is_refused() {
        let ws = Workspace::new("write");
        let err = handle(ws.ctx(), json!({"path": "../escape.txt", "content": "x"})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workspace"));
        assert!(!ws.path().parent().unwrap().join("escape.txt").exists());
    }

    #[tokio::test]
    async fn missing_content_is_an_argument_error() {
        let ws = Workspace::new("write");
        let err = handle(ws.ctx(), json!({"path": "a.txt"})).await.unwrap_err();
        assert!(err.to_string().contains("missing field `content`"), "{err}");
    }
}

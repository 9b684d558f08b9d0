//! `list_dir`: the entries of a directory, optionally recursive, capped.

use oxibot_plugin::{parse_args, workspace, CallContext, Tool, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::walk::{walk, WalkOptions};

const DEFAULT_MAX_ENTRIES: usize = 200;

#[derive(Deserialize)]
struct Args {
    #[serde(default = "dot")]
    path: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    max_entries: Option<usize>,
}

fn dot() -> String {
    ".".to_owned()
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "list_dir",
        "List the contents of a directory. Directories end with `/`. With recursive, list the whole \
         tree (version-control, dependency and cache directories are skipped).",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list, relative to the workspace (default: the workspace)"},
                "recursive": {"type": "boolean", "description": "Include everything below it (default false)"},
                "max_entries": {"type": "integer", "minimum": 1, "description": "Most entries to return (default 200)"}
            },
            "required": []
        }),
    )
    .read_only()
}

/// Runs `list_dir`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let dir = workspace::resolve(&ctx, &args.path)?;
    let confine = ctx.restrict_to_workspace.then(|| workspace::root(&ctx));
    crate::blocking(move || {
        if !dir.exists() {
            return Err(ToolError::new(format!("directory not found: {}", args.path)));
        }
        if !dir.is_dir() {
            return Err(ToolError::new(format!("{} is a file, not a directory; use read_file to read it", args.path)));
        }
        let max = args.max_entries.unwrap_or(DEFAULT_MAX_ENTRIES).max(1);
        let options = WalkOptions { confine_to: confine.as_deref(), max_depth: (!args.recursive).then_some(1), skip_noise: args.recursive };
        let mut lines = Vec::new();
        let mut total = 0usize;
        walk(&dir, &options, |entry| {
            total += 1;
            if lines.len() < max {
                let relative = entry.path.strip_prefix(&dir).unwrap_or(&entry.path).display().to_string();
                lines.push(if entry.is_dir { format!("{relative}/") } else { relative });
            }
            true
        });
        if total == 0 {
            return Ok(format!("{} is empty", args.path));
        }
        let mut out = lines.join("\n");
        if total > max {
            out.push_str(&format!("\n\n(showing {max} of {total} entries; raise max_entries or list a subdirectory)"));
        }
        Ok(out)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Workspace;

    #[tokio::test]
    async fn a_directory_lists_files_and_marks_subdirectories() {
        let ws = Workspace::new("list");
        ws.write("b.txt", "");
        ws.write("a/c.txt", "");
        let out = handle(ws.ctx(), json!({})).await.unwrap();
        assert_eq!(out, "a/\nb.txt");
    }

    #[tokio::test]
    async fn recursive_listing_skips_noise_and_is_capped() {
        let ws = Workspace::new("list");
        for i in 0..5 {
            ws.write(&format!("src/f{i}.rs"), "");
        }
        ws.write(".git/HEAD", "");
        let out = handle(ws.ctx(), json!({"recursive": true, "max_entries": 3})).await.unwrap();
        assert!(!out.contains(".git"), "{out}");
        assert!(out.starts_with("src/\nsrc/f0.rs\nsrc/f1.rs"), "{out}");
        assert!(out.contains("showing 3 of 6 entries"), "{out}");
    }

    #[tokio::test]
    async fn symlinks_leading_out_of_the_workspace_are_not_listed() {
        let ws = Workspace::new("list");
        ws.write("inside.txt", "");
        std::os::unix::fs::symlink("/etc/hostname", ws.path().join("outside")).unwrap();
        let out = handle(ws.ctx(), json!({})).await.unwrap();
        assert_eq!(out, "inside.txt");
    }

    #[tokio::test]
    async fn listing_a_file_or_a_missing_directory_explains_the_mistake() {
        let ws = Workspace::new("list");
        ws.write("f.txt", "");
        assert!(handle(ws.ctx(), json!({"path": "f.txt"})).await.unwrap_err().to_string().contains("read_file"));
        assert!(handle(ws.ctx(), json!({"path": "nope"})).await.unwrap_err().to_string().contains("not found"));
    }
}

//! `list_dir`: what a directory holds, optionally the whole tree below it, sorted, with
//! directories marked by a trailing `/`, noise directories left out, and a cap.

use std::fmt::Write as _;
use std::path::Path;

use oxibot_plugin::beneath::{DirHandle, Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::walk::{Report, Walk};

/// Entries returned when the call gives no `max_entries`.
const DEFAULT_MAX_ENTRIES: usize = 200;

/// The arguments of `list_dir`.
#[derive(Deserialize)]
struct Args {
    #[serde(default, deserialize_with = "crate::args::optional_text")]
    path: Option<String>,
    #[serde(default, deserialize_with = "crate::args::flag")]
    recursive: bool,
    #[serde(default, deserialize_with = "crate::args::count")]
    max_entries: Option<usize>,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "list_dir",
        "List a directory; skips .git, node_modules and build output.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "recursive": {"type": "boolean"},
                "max_entries": {"type": "integer"}
            },
            "required": ["path"]
        }),
    )
    .read_only()
}

/// Runs `list_dir`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let shown = args.path.unwrap_or_else(|| ".".to_owned());
    let files = WorkspaceDir::open(&ctx)?;
    let target = files.resolve(&shown)?;
    let max = args.max_entries.filter(|n| *n > 0).unwrap_or(DEFAULT_MAX_ENTRIES);
    crate::blocking(move || {
        let dir = open_directory(&files, &target)?;
        let mut walk = Walk::new();
        if !args.recursive {
            walk = walk.max_depth(1);
        }
        Ok(list(&files, dir, &shown, &walk, max))
    })
    .await
}

/// Opens the directory to list, refusing a missing path or a file and pointing at the right tool.
fn open_directory(files: &WorkspaceDir, target: &Target) -> Result<DirHandle, ToolError> {
    let shown = target.shown();
    files.open_dir(target).map_err(|e| {
        crate::access_error(e, |e| match e.kind() {
            std::io::ErrorKind::NotFound => ToolError::new(format!("directory not found: {shown}")),
            std::io::ErrorKind::NotADirectory => {
                ToolError::new(format!("{shown} is a file, not a directory; use read_file to read it"))
            }
            _ => ToolError::new(format!("cannot list {shown}: {e}")),
        })
    })
}

/// The listing of `dir`, at most `max` entries, with notes on what was left out.
fn list(files: &WorkspaceDir, dir: DirHandle, shown: &str, walk: &Walk, max: usize) -> String {
    let mut lines = Vec::new();
    let mut total = 0usize;
    let base = dir.target().path().to_path_buf();
    let report = walk.run(files, dir, |entry| {
        total += 1;
        if lines.len() < max {
            let relative = entry.path.strip_prefix(&base).unwrap_or(&entry.path).display().to_string();
            lines.push(if entry.is_dir { format!("{relative}/") } else { relative });
        }
        true
    });
    let mut out = if total == 0 { format!("{shown} is empty") } else { lines.join("\n") };
    let mut notes = Vec::new();
    if report.cut_short {
        notes.push(format!("(showing {} of more than {total} entries; list a subdirectory)", lines.len()));
    } else if total > max {
        notes.push(format!("(showing {max} of {total} entries; list a subdirectory or raise max_entries)"));
    }
    if let Some(note) = skipped_note(&base, &report) {
        notes.push(note);
    }
    if !notes.is_empty() {
        let _ = write!(out, "\n\n{}", notes.join("\n"));
    }
    out
}

/// Names the noise directories that were left out, so the model knows they exist.
fn skipped_note(dir: &Path, report: &Report) -> Option<String> {
    if report.skipped_count == 0 {
        return None;
    }
    let names: Vec<String> =
        report.skipped.iter().map(|p| format!("{}/", p.strip_prefix(dir).unwrap_or(p).display())).collect();
    let more = report.skipped_count - names.len();
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    Some(format!("(not listed: {}{more}; list one by its path to see inside)", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};

    #[tokio::test]
    async fn a_directory_lists_files_and_marks_subdirectories() {
        let ws = Workspace::new("list");
        ws.write("b.txt", "");
        ws.write("a/c.txt", "");
        let out = handle(ws.ctx(), json!({"path": "."})).await.unwrap();
        assert_eq!(out, "a/\nb.txt");
    }

    #[tokio::test]
    async fn a_missing_path_lists_the_workspace() {
        let ws = Workspace::new("list");
        ws.write("only.txt", "");
        assert_eq!(handle(ws.ctx(), json!({})).await.unwrap(), "only.txt");
    }

    #[tokio::test]
    async fn recursive_listing_is_depth_first_skips_noise_and_is_capped() {
        let ws = Workspace::new("list");
        for i in 0..5 {
            ws.write(&format!("src/f{i}.rs"), "");
        }
        ws.write(".git/HEAD", "");
        ws.write("node_modules/x/index.js", "");
        let out = handle(ws.ctx(), json!({"path": ".", "recursive": true, "max_entries": 3})).await.unwrap();
        assert_eq!(
            out,
            "src/\nsrc/f0.rs\nsrc/f1.rs\n\n(showing 3 of 6 entries; list a subdirectory or raise max_entries)\n\
             (not listed: .git/, node_modules/; list one by its path to see inside)"
        );
    }

    #[tokio::test]
    async fn a_noise_directory_can_be_listed_by_its_path() {
        let ws = Workspace::new("list");
        ws.write("node_modules/pkg/index.js", "");
        let out = handle(ws.ctx(), json!({"path": "node_modules", "recursive": true})).await.unwrap();
        assert_eq!(out, "pkg/\npkg/index.js");
    }

    #[tokio::test]
    async fn symlinks_leading_out_of_the_workspace_are_not_listed() {
        let ws = Workspace::new("list");
        let outside = outside_dir("list");
        outside.write("secret.txt", "");
        ws.write("inside.txt", "");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("outside")).unwrap();
        let out = handle(ws.ctx(), json!({"path": ".", "recursive": true})).await.unwrap();
        assert_eq!(out, "inside.txt");
        let err = handle(ws.ctx(), json!({"path": "outside"})).await.unwrap_err();
        assert!(err.message().contains("outside the workspace"), "{err}");
    }

    #[tokio::test]
    async fn listing_outside_the_workspace_is_refused() {
        let ws = Workspace::new("list");
        assert!(handle(ws.ctx(), json!({"path": ".."})).await.unwrap_err().message().contains("outside the workspace"));
        assert!(
            handle(ws.ctx(), json!({"path": "/etc"})).await.unwrap_err().message().contains("outside the workspace")
        );
    }

    #[tokio::test]
    async fn listing_a_file_a_missing_or_an_empty_directory_explains_itself() {
        let ws = Workspace::new("list");
        ws.write("f.txt", "");
        std::fs::create_dir(ws.path().join("empty")).unwrap();
        assert!(handle(ws.ctx(), json!({"path": "f.txt"})).await.unwrap_err().message().contains("use read_file"));
        assert_eq!(handle(ws.ctx(), json!({"path": "nope"})).await.unwrap_err().message(), "directory not found: nope");
        assert_eq!(handle(ws.ctx(), json!({"path": "empty"})).await.unwrap(), "empty is empty");
    }
}

//! `glob`: files whose paths match a pattern, newest first.

use std::time::SystemTime;

use oxibot_plugin::{parse_args, workspace, CallContext, Tool, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::walk::{walk, Glob, WalkOptions};

const DEFAULT_MAX_RESULTS: usize = 200;

#[derive(Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    max_results: Option<usize>,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "glob",
        "Find files by name pattern, e.g. `*.py`, `src/**/*.rs`, `docs/*.{md,txt}`. A pattern without \
         `/` matches file names at any depth. Results are paths relative to the workspace, most \
         recently modified first.",
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match"},
                "path": {"type": "string", "description": "Directory to search in (default: the workspace)"},
                "max_results": {"type": "integer", "minimum": 1, "description": "Most paths to return (default 200)"}
            },
            "required": ["pattern"]
        }),
    )
    .read_only()
}

/// Runs `glob`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let glob = Glob::new(&args.pattern).map_err(ToolError::new)?;
    let base = workspace::resolve(&ctx, args.path.as_deref().unwrap_or("."))?;
    let root = workspace::root(&ctx);
    let confine = ctx.restrict_to_workspace.then(|| root.clone());
    crate::blocking(move || {
        if !base.is_dir() {
            return Err(ToolError::new(format!("not a directory: {}", args.path.as_deref().unwrap_or("."))));
        }
        let mut found: Vec<(SystemTime, String)> = Vec::new();
        let options = WalkOptions { confine_to: confine.as_deref(), max_depth: None, skip_noise: true };
        walk(&base, &options, |entry| {
            let relative = entry.path.strip_prefix(&base).unwrap_or(&entry.path);
            if !entry.is_dir && glob.matches(relative) {
                let modified = std::fs::metadata(&entry.path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((modified, crate::display_path(&root, &entry.path)));
            }
            true
        });
        if found.is_empty() {
            return Ok(format!("no files match '{}'", args.pattern));
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let max = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1);
        let total = found.len();
        let mut out: Vec<String> = found.into_iter().take(max).map(|(_, p)| p).collect::<Vec<_>>();
        if total > max {
            out.push(format!("\n(showing {max} of {total} matches; narrow the pattern or raise max_results)"));
        }
        Ok(out.join("\n"))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Workspace;

    #[tokio::test]
    async fn matching_files_are_listed_relative_to_the_workspace() {
        let ws = Workspace::new("glob");
        ws.write("src/a.rs", "");
        ws.write("src/deep/b.rs", "");
        ws.write("README.md", "");
        ws.write("target/debug/c.rs", "");
        let out = handle(ws.ctx(), json!({"pattern": "*.rs"})).await.unwrap();
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        assert_eq!(lines, ["src/a.rs", "src/deep/b.rs"]);
    }

    #[tokio::test]
    async fn no_match_says_so_and_bad_patterns_are_errors() {
        let ws = Workspace::new("glob");
        assert_eq!(handle(ws.ctx(), json!({"pattern": "*.zig"})).await.unwrap(), "no files match '*.zig'");
        assert!(handle(ws.ctx(), json!({"pattern": "*.rs", "path": "../.."})).await.is_err());
    }
}

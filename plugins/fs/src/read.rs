//! `read_file`: numbered lines of a text file, with offset/limit paging and a size cap.

use oxibot_plugin::{parse_args, workspace, CallContext, Tool, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

/// Lines returned when the call gives no `limit`.
const DEFAULT_LIMIT: usize = 2000;
/// Most characters returned in one call; the rest is left for the next page.
const MAX_CHARS: usize = 128_000;
/// Longest line shown in full.
const MAX_LINE_CHARS: usize = 2000;

#[derive(Deserialize)]
struct Args {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "read_file",
        "Read a text file. Lines come back numbered as `N| text`. For long files, read a slice with \
         offset (first line, 1-based) and limit (number of lines); the output says how to continue.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read, relative to the workspace"},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to return, counting from 1 (default 1)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to return (default 2000)"}
            },
            "required": ["path"]
        }),
    )
    .read_only()
}

/// Runs `read_file`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let path = workspace::resolve(&ctx, &args.path)?;
    crate::blocking(move || read(&path, &args.path, args.offset.unwrap_or(1).max(1), args.limit.unwrap_or(DEFAULT_LIMIT).max(1))).await
}

fn read(path: &std::path::Path, shown: &str, offset: usize, limit: usize) -> ToolOutput {
    if !path.exists() {
        return Err(ToolError::new(format!("file not found: {shown}")));
    }
    if path.is_dir() {
        return Err(ToolError::new(format!("{shown} is a directory; use list_dir to see what it contains")));
    }
    let bytes = std::fs::read(path).map_err(|e| ToolError::new(format!("cannot read {shown}: {e}")))?;
    if looks_binary(&bytes) {
        return Err(ToolError::new(format!("{shown} looks like a binary file ({} bytes); read_file only shows text", bytes.len())));
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.is_empty() {
        return Ok(format!("({shown} is empty)"));
    }
    render(&text, shown, offset, limit)
}

/// Whether the first bytes contain a NUL, the usual sign of a binary file.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}

fn render(text: &str, shown: &str, offset: usize, limit: usize) -> ToolOutput {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if offset > total {
        return Err(ToolError::new(format!("offset {offset} is past the end of {shown}, which has {total} lines")));
    }
    let mut out = String::new();
    let mut last = offset - 1;
    for (index, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
        let line = shorten_line(line);
        let numbered = format!("{}| {line}\n", index + 1);
        if !out.is_empty() && out.len() + numbered.len() > MAX_CHARS {
            break;
        }
        out.push_str(&numbered);
        last = index + 1;
    }
    if last < total {
        out.push_str(&format!("\n(lines {offset}-{last} of {total}; call again with offset={} to read on)", last + 1));
    } else {
        out.push_str(&format!("\n(end of file, {total} lines)"));
    }
    Ok(out)
}

fn shorten_line(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_owned();
    }
    let kept: String = line.chars().take(MAX_LINE_CHARS).collect();
    format!("{kept}… [line cut at {MAX_LINE_CHARS} characters]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Workspace;

    async fn call(ws: &Workspace, args: Value) -> ToolOutput {
        handle(ws.ctx(), args).await
    }

    #[tokio::test]
    async fn lines_come_back_numbered_with_an_end_marker() {
        let ws = Workspace::new("read");
        ws.write("a.txt", "alpha\nbeta\n");
        let out = call(&ws, json!({"path": "a.txt"})).await.unwrap();
        assert_eq!(out, "1| alpha\n2| beta\n\n(end of file, 2 lines)");
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_slice_and_say_how_to_continue() {
        let ws = Workspace::new("read");
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        ws.write("long.txt", &text);
        let out = call(&ws, json!({"path": "long.txt", "offset": 4, "limit": 3})).await.unwrap();
        assert!(out.starts_with("4| line 4\n5| line 5\n6| line 6\n"), "{out}");
        assert!(out.contains("offset=7"), "{out}");
    }

    #[tokio::test]
    async fn a_huge_file_is_capped_by_characters() {
        let ws = Workspace::new("read");
        let line = "x".repeat(1000);
        let text: String = (0..500).map(|_| format!("{line}\n")).collect();
        ws.write("big.txt", &text);
        let out = call(&ws, json!({"path": "big.txt"})).await.unwrap();
        assert!(out.len() <= MAX_CHARS + 200, "{}", out.len());
        assert!(out.contains("call again with offset="), "no continuation hint");
    }

    #[tokio::test]
    async fn missing_files_directories_and_binaries_get_readable_errors() {
        let ws = Workspace::new("read");
        ws.write("dir/x.txt", "x");
        std::fs::write(ws.path().join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
        assert!(call(&ws, json!({"path": "nope.txt"})).await.unwrap_err().to_string().contains("file not found"));
        assert!(call(&ws, json!({"path": "dir"})).await.unwrap_err().to_string().contains("list_dir"));
        assert!(call(&ws, json!({"path": "blob.bin"})).await.unwrap_err().to_string().contains("binary"));
    }

    #[tokio::test]
    async fn an_offset_past_the_end_is_an_error() {
        let ws = Workspace::new("read");
        ws.write("a.txt", "one\n");
        let err = call(&ws, json!({"path": "a.txt", "offset": 5})).await.unwrap_err();
        assert!(err.to_string().contains("has 1 lines"), "{err}");
    }

    #[tokio::test]
    async fn paths_outside_the_workspace_are_refused() {
        let ws = Workspace::new("read");
        let err = call(&ws, json!({"path": "../../../etc/passwd"})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert!(call(&ws, json!({"path": "/etc/passwd"})).await.is_err());
    }
}

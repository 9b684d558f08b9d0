//! `grep`: search file contents with a regular expression.

use std::fmt::Write as _;
use std::path::Path;

use oxibot_plugin::{parse_args, workspace, CallContext, Tool, ToolError, ToolOutput};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::read::looks_binary;
use crate::walk::{walk, Glob, WalkOptions};

/// Result lines (or files) returned when the call gives no `head_limit`.
const DEFAULT_HEAD_LIMIT: usize = 250;
/// Files larger than this are not searched.
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Longest matching line shown in full.
const MAX_LINE_CHARS: usize = 500;

#[derive(Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    fixed_strings: bool,
    #[serde(default)]
    output_mode: Option<String>,
    #[serde(default)]
    context: Option<usize>,
    #[serde(default)]
    head_limit: Option<usize>,
}

/// What `grep` reports.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Matching lines as `path:line: text`.
    Content,
    /// Only the names of files with a match.
    Files,
    /// `path: count` per file.
    Count,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "grep",
        "Search file contents with a regular expression (Rust regex syntax). By default lists the \
         files that match; output_mode `content` shows matching lines with line numbers, `count` \
         shows matches per file. Binary files and files over 2 MB are skipped.",
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for"},
                "path": {"type": "string", "description": "File or directory to search (default: the workspace)"},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.py`"},
                "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)"},
                "fixed_strings": {"type": "boolean", "description": "Treat pattern as plain text, not a regex (default false)"},
                "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"], "description": "What to return (default files_with_matches)"},
                "context": {"type": "integer", "minimum": 0, "description": "Lines of context around each match in content mode (default 0)"},
                "head_limit": {"type": "integer", "minimum": 1, "description": "Most result lines to return (default 250)"}
            },
            "required": ["pattern"]
        }),
    )
    .read_only()
}

/// Runs `grep`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let mode = match args.output_mode.as_deref() {
        None | Some("files_with_matches") => Mode::Files,
        Some("content") => Mode::Content,
        Some("count") => Mode::Count,
        Some(other) => return Err(ToolError::new(format!("unknown output_mode '{other}'; use files_with_matches, content or count"))),
    };
    let source = if args.fixed_strings { regex::escape(&args.pattern) } else { args.pattern.clone() };
    let regex = RegexBuilder::new(&source).case_insensitive(args.case_insensitive).build().map_err(|e| ToolError::new(format!("invalid regex: {e}")))?;
    let filter = args.glob.as_deref().map(Glob::new).transpose().map_err(ToolError::new)?;
    let base = workspace::resolve(&ctx, args.path.as_deref().unwrap_or("."))?;
    let root = workspace::root(&ctx);
    let confine = ctx.restrict_to_workspace.then(|| root.clone());
    crate::blocking(move || {
        if !base.exists() {
            return Err(ToolError::new(format!("path not found: {}", args.path.as_deref().unwrap_or("."))));
        }
        let search = Search { regex, mode, context: args.context.unwrap_or(0), limit: args.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT).max(1), root };
        Ok(search.run(&base, filter.as_ref(), confine.as_deref()))
    })
    .await
}

/// One grep run's settings and output.
struct Search {
    regex: Regex,
    mode: Mode,
    context: usize,
    limit: usize,
    root: std::path::PathBuf,
}

impl Search {
    fn run(&self, base: &Path, filter: Option<&Glob>, confine: Option<&Path>) -> String {
        let mut lines: Vec<String> = Vec::new();
        let mut truncated = false;
        let mut search_file = |path: &Path| {
            if lines.len() >= self.limit {
                truncated = true;
                return false;
            }
            self.search_file(path, &mut lines);
            true
        };
        if base.is_file() {
            search_file(base);
        } else {
            let options = WalkOptions { confine_to: confine, max_depth: None, skip_noise: true };
            walk(base, &options, |entry| {
                let relative = entry.path.strip_prefix(base).unwrap_or(&entry.path);
                if entry.is_dir || filter.is_some_and(|g| !g.matches(relative)) {
                    return true;
                }
                search_file(&entry.path)
            });
        }
        if lines.is_empty() {
            return format!("no matches for '{}'", self.regex.as_str());
        }
        if lines.len() > self.limit {
            lines.truncate(self.limit);
            truncated = true;
        }
        let mut out = lines.join("\n");
        if truncated {
            let _ = write!(out, "\n\n(results cut at {} lines; narrow the search or raise head_limit)", self.limit);
        }
        out
    }

    fn search_file(&self, path: &Path, out: &mut Vec<String>) {
        if std::fs::metadata(path).map(|m| m.len() > MAX_FILE_BYTES).unwrap_or(true) {
            return;
        }
        let Ok(bytes) = std::fs::read(path) else { return };
        if looks_binary(&bytes) {
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = crate::display_path(&self.root, path);
        let file_lines: Vec<&str> = text.lines().collect();
        let hits: Vec<usize> = file_lines.iter().enumerate().filter(|(_, l)| self.regex.is_match(l)).map(|(i, _)| i).collect();
        if hits.is_empty() {
            return;
        }
        match self.mode {
            Mode::Files => out.push(shown),
            Mode::Count => out.push(format!("{shown}: {}", hits.len())),
            Mode::Content => self.push_content(&shown, &file_lines, &hits, out),
        }
    }

    fn push_content(&self, shown: &str, lines: &[&str], hits: &[usize], out: &mut Vec<String>) {
        let mut last_printed: Option<usize> = None;
        for &hit in hits {
            let start = hit.saturating_sub(self.context);
            let end = (hit + self.context).min(lines.len() - 1);
            if self.context > 0 && last_printed.is_some_and(|l| start > l + 1) {
                out.push("--".to_owned());
            }
            for (index, line) in lines.iter().enumerate().take(end + 1).skip(start) {
                if last_printed.is_some_and(|l| index <= l) {
                    continue;
                }
                let marker = if index == hit { ':' } else { '-' };
                let text: String = line.chars().take(MAX_LINE_CHARS).collect();
                out.push(format!("{shown}:{}{marker} {text}", index + 1));
                last_printed = Some(index);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Workspace;

    fn workspace() -> Workspace {
        let ws = Workspace::new("grep");
        ws.write("src/a.rs", "fn main() {\n    println!(\"Hello\");\n}\n");
        ws.write("src/b.py", "print('hello')\n");
        ws.write("notes.md", "nothing here\n");
        std::fs::write(ws.path().join("blob.bin"), b"hello\0world").unwrap();
        ws
    }

    #[tokio::test]
    async fn by_default_grep_lists_matching_files() {
        let ws = workspace();
        let out = handle(ws.ctx(), json!({"pattern": "hello", "case_insensitive": true})).await.unwrap();
        assert_eq!(out, "src/a.rs\nsrc/b.py", "binary files are skipped");
    }

    #[tokio::test]
    async fn content_mode_shows_numbered_lines_with_context() {
        let ws = workspace();
        let out = handle(ws.ctx(), json!({"pattern": "println", "output_mode": "content", "context": 1})).await.unwrap();
        assert_eq!(out, "src/a.rs:1- fn main() {\nsrc/a.rs:2:     println!(\"Hello\");\nsrc/a.rs:3- }");
    }

    #[tokio::test]
    async fn glob_filter_count_mode_and_fixed_strings_work_together() {
        let ws = workspace();
        let out = handle(ws.ctx(), json!({"pattern": "print(", "fixed_strings": true, "glob": "*.py", "output_mode": "count"})).await.unwrap();
        assert_eq!(out, "src/b.py: 1");
    }

    #[tokio::test]
    async fn results_are_capped_by_head_limit() {
        let ws = Workspace::new("grep");
        ws.write("many.txt", &"match\n".repeat(50));
        let out = handle(ws.ctx(), json!({"pattern": "match", "output_mode": "content", "head_limit": 5})).await.unwrap();
        assert_eq!(out.lines().filter(|l| l.starts_with("many.txt:")).count(), 5);
        assert!(out.contains("results cut at 5 lines"), "{out}");
    }

    #[tokio::test]
    async fn a_bad_regex_is_an_error_the_model_can_fix() {
        let ws = workspace();
        let err = handle(ws.ctx(), json!({"pattern": "fn ("})).await.unwrap_err();
        assert!(err.to_string().contains("invalid regex"), "{err}");
    }
}

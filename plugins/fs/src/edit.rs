//! `edit_file`: replace an exact, unique snippet; on a miss, show the closest match as a diff.

use std::collections::HashMap;

use oxibot_plugin::{parse_args, workspace, CallContext, Tool, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::write::write_atomically;

#[derive(Deserialize)]
struct Args {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "edit_file",
        "Edit a file by replacing old_text with new_text. old_text must match the file exactly \
         (whitespace included) and only once, unless replace_all is true. Read the file first.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit, relative to the workspace"},
                "old_text": {"type": "string", "description": "The exact text to find"},
                "new_text": {"type": "string", "description": "The text to put in its place"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring one (default false)"}
            },
            "required": ["path", "old_text", "new_text"]
        }),
    )
}

/// Runs `edit_file`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let path = workspace::resolve(&ctx, &args.path)?;
    crate::blocking(move || {
        let original = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ToolError::new(format!("file not found: {}", args.path)),
            _ => ToolError::new(format!("cannot read {}: {e}", args.path)),
        })?;
        let edited = apply(&original, &args)?;
        write_atomically(&path, edited.as_bytes()).map_err(|e| ToolError::new(format!("cannot write {}: {e}", args.path)))?;
        Ok(format!("edited {}", args.path))
    })
    .await
}

fn apply(original: &str, args: &Args) -> Result<String, ToolError> {
    if args.old_text.is_empty() {
        return Err(ToolError::new("old_text is empty; give the exact text to replace"));
    }
    // Files with Windows line endings still match snippets written with plain newlines.
    let (old, new) = if original.contains("\r\n") && !args.old_text.contains("\r\n") {
        (args.old_text.replace('\n', "\r\n"), args.new_text.replace('\n', "\r\n"))
    } else {
        (args.old_text.clone(), args.new_text.clone())
    };
    match original.matches(old.as_str()).count() {
        0 => Err(ToolError::new(not_found_message(original, &args.old_text, &args.path))),
        1 => Ok(original.replacen(old.as_str(), &new, 1)),
        _ if args.replace_all => Ok(original.replace(old.as_str(), &new)),
        count => Err(ToolError::new(format!(
            "old_text appears {count} times in {}; include more surrounding lines so it matches exactly once, \
             or set replace_all to true to change every occurrence",
            args.path
        ))),
    }
}

fn not_found_message(original: &str, old_text: &str, path: &str) -> String {
    let file_lines: Vec<&str> = original.lines().collect();
    let wanted: Vec<&str> = old_text.lines().collect();
    match closest_window(&file_lines, old_text, wanted.len().max(1)) {
        Some((start, score)) if score >= 0.4 => {
            let end = (start + wanted.len().max(1)).min(file_lines.len());
            let diff = line_diff(&wanted, &file_lines[start..end]);
            format!(
                "old_text was not found in {path}. The closest match ({:.0}% similar) is at lines {}-{}; \
                 lines marked - are in your old_text, lines marked + are in the file:\n{diff}",
                score * 100.0,
                start + 1,
                end
            )
        }
        _ => format!("old_text was not found in {path} and nothing in it is close; read the file and copy the text exactly"),
    }
}

/// The start of the window of `size` lines most similar to `wanted`, with its similarity.
fn closest_window(lines: &[&str], wanted: &str, size: usize) -> Option<(usize, f64)> {
    if lines.is_empty() {
        return None;
    }
    let target = bigrams(wanted);
    let windows = lines.len().saturating_sub(size) + 1;
    (0..windows)
        .map(|start| {
            let window = lines[start..(start + size).min(lines.len())].join("\n");
            (start, dice(&target, &bigrams(&window)))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

fn bigrams(text: &str) -> HashMap<(char, char), usize> {
    let chars: Vec<char> = text.chars().collect();
    let mut counts = HashMap::new();
    for pair in chars.windows(2) {
        *counts.entry((pair[0], pair[1])).or_insert(0) += 1;
    }
    counts
}

/// Dice coefficient of two bigram multisets: 1.0 for identical texts, 0.0 for nothing shared.
fn dice(a: &HashMap<(char, char), usize>, b: &HashMap<(char, char), usize>) -> f64 {
    let total: usize = a.values().sum::<usize>() + b.values().sum::<usize>();
    if total == 0 {
        return 0.0;
    }
    let shared: usize = a.iter().map(|(k, n)| (*n).min(*b.get(k).unwrap_or(&0))).sum();
    2.0 * shared as f64 / total as f64
}

/// A line diff (longest common subsequence): `-` only in `ours`, `+` only in `theirs`.
fn line_diff(ours: &[&str], theirs: &[&str]) -> String {
    let (n, m) = (ours.len(), theirs.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if ours[i] == theirs[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < n || j < m {
        if i < n && j < m && ours[i] == theirs[j] {
            out.push_str(&format!("  {}\n", ours[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", ours[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", theirs[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Workspace;

    async fn edit(ws: &Workspace, args: Value) -> ToolOutput {
        handle(ws.ctx(), args).await
    }

    #[tokio::test]
    async fn a_unique_match_is_replaced() {
        let ws = Workspace::new("edit");
        ws.write("a.md", "one\ntwo\nthree\n");
        let out = edit(&ws, json!({"path": "a.md", "old_text": "two", "new_text": "2"})).await.unwrap();
        assert_eq!(out, "edited a.md");
        assert_eq!(std::fs::read_to_string(ws.path().join("a.md")).unwrap(), "one\n2\nthree\n");
    }

    #[tokio::test]
    async fn edit_with_two_matches_asks_for_more_context() {
        let ws = Workspace::new("edit");
        ws.write("a.md", "x = 1\ny = 1\n");
        let err = edit(&ws, json!({"path": "a.md", "old_text": "= 1", "new_text": "= 2"})).await.unwrap_err();
        assert!(err.to_string().contains("appears 2 times") && err.to_string().contains("more surrounding lines"), "{err}");
        assert_eq!(std::fs::read_to_string(ws.path().join("a.md")).unwrap(), "x = 1\ny = 1\n", "a refused edit changes nothing");
    }

    #[tokio::test]
    async fn replace_all_changes_every_occurrence() {
        let ws = Workspace::new("edit");
        ws.write("a.md", "x = 1\ny = 1\n");
        edit(&ws, json!({"path": "a.md", "old_text": "= 1", "new_text": "= 2", "replace_all": true})).await.unwrap();
        assert_eq!(std::fs::read_to_string(ws.path().join("a.md")).unwrap(), "x = 2\ny = 2\n");
    }

    #[tokio::test]
    async fn a_miss_shows_the_closest_match_as_a_diff() {
        let ws = Workspace::new("edit");
        ws.write("a.py", "def greet(name):\n    print('hello', name)\n    return name\n\ndef other():\n    pass\n");
        let err = edit(&ws, json!({"path": "a.py", "old_text": "def greet(name):\n    print(\"hello\", name)", "new_text": "x"})).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("closest match") && text.contains("lines 1-2"), "{text}");
        assert!(text.contains("-     print(\"hello\", name)"), "{text}");
        assert!(text.contains("+     print('hello', name)"), "{text}");
        assert!(text.contains("  def greet(name):"), "{text}");
    }

    #[tokio::test]
    async fn crlf_files_match_snippets_with_plain_newlines() {
        let ws = Workspace::new("edit");
        ws.write("w.txt", "a\r\nb\r\nc\r\n");
        edit(&ws, json!({"path": "w.txt", "old_text": "a\nb", "new_text": "A\nB"})).await.unwrap();
        assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "A\r\nB\r\nc\r\n");
    }

    #[tokio::test]
    async fn editing_a_missing_file_says_so() {
        let ws = Workspace::new("edit");
        let err = edit(&ws, json!({"path": "nope.md", "old_text": "a", "new_text": "b"})).await.unwrap_err();
        assert!(err.to_string().contains("file not found"), "{err}");
    }
}

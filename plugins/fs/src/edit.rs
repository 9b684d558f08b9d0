//! `edit_file`: replace an exact snippet that must match once (or a chosen match, or all),
//! explaining a miss with the closest text as a diff and several matches with their lines.

use std::io::Read as _;
use std::path::Path;

use oxibot_plugin::beneath::{AccessError, EntryKind, Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::closest::{not_found_message, similarity};
use crate::matching::{Found, Span, find, reindent};
use crate::plural;
use crate::read::open_regular_file;
use crate::text::looks_binary;
use crate::write::{write_atomically, write_error};

/// Largest file `edit_file` will load.
const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;
/// Match lines listed when old_text matches several places.
const LINES_LISTED: usize = 5;

/// The arguments of `edit_file`.
#[derive(Deserialize)]
struct Args {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default, deserialize_with = "crate::args::flag")]
    replace_all: bool,
    #[serde(default, deserialize_with = "crate::args::count")]
    occurrence: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    line_hint: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    expected_replacements: Option<usize>,
}

/// The tool's manifest entry. `expected_replacements` is still read but not offered: every
/// schema byte is paid on every model call.
pub fn tool() -> Tool {
    Tool::new(
        "edit_file",
        "Replace old_text (exact, without read_file's `N| `) with new_text; it must match once unless \
         occurrence, line_hint or replace_all picks. Empty old_text creates the file.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string"},
                "new_text": {"type": "string"},
                "replace_all": {"type": "boolean"},
                "occurrence": {"type": "integer"},
                "line_hint": {"type": "integer"}
            },
            "required": ["path", "old_text", "new_text"]
        }),
    )
}

/// Runs `edit_file`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    check_choices(&args)?;
    let files = WorkspaceDir::open(&ctx)?;
    let target = files.resolve(&args.path)?;
    crate::blocking(move || edit(&files, &target, &args)).await
}

/// Refuses zero counts and combinations of choices that contradict each other.
fn check_choices(args: &Args) -> Result<(), ToolError> {
    for (name, value) in [
        ("occurrence", args.occurrence),
        ("line_hint", args.line_hint),
        ("expected_replacements", args.expected_replacements),
    ] {
        if value == Some(0) {
            return Err(ToolError::new(format!("{name} counts from 1; 0 is not valid")));
        }
    }
    let conflict = match (args.replace_all, args.occurrence.is_some(), args.line_hint.is_some()) {
        (true, true, _) => Some("occurrence cannot be combined with replace_all"),
        (true, _, true) => Some("line_hint cannot be combined with replace_all"),
        (_, true, true) => Some("occurrence and line_hint both pick a match; give only one of them"),
        _ => None,
    };
    conflict.map_or(Ok(()), |message| Err(ToolError::new(message)))
}

/// Edits the file at `target` as `args` say.
fn edit(files: &WorkspaceDir, target: &Target, args: &Args) -> ToolOutput {
    match files.symlink_metadata(target) {
        Ok(_) => {}
        Err(AccessError::Io(_)) => return create(files, target, args),
        Err(refused) => return Err(refused.into()),
    }
    let original = load(files, target)?;
    if args.old_text.is_empty() {
        return fill_empty(files, target, &original, args);
    }
    if args.old_text == args.new_text {
        return Err(ToolError::new("old_text and new_text are the same, so there is nothing to change"));
    }
    let crlf = original.contains("\r\n");
    let content = if crlf { original.replace("\r\n", "\n") } else { original };
    let old = args.old_text.replace("\r\n", "\n");
    let new = args.new_text.replace("\r\n", "\n");
    let (matches, found) = find(&content, &old);
    if matches.is_empty() {
        return Err(ToolError::new(not_found_message(&content, &old, &args.path)));
    }
    let chosen = choose(&matches, args)?;
    let edited = replace(&content, &chosen, &old, &new, found);
    let edited = if crlf { edited.replace('\n', "\r\n") } else { edited };
    write_atomically(files, target, edited.as_bytes()).map_err(|e| write_error(&args.path, e))?;
    Ok(summary(&args.path, &chosen, found))
}

/// A missing file: created when old_text is empty, else an error suggesting similar names.
fn create(files: &WorkspaceDir, target: &Target, args: &Args) -> ToolOutput {
    if !args.old_text.is_empty() {
        return Err(ToolError::new(missing_file_message(files, target)));
    }
    write_atomically(files, target, args.new_text.as_bytes()).map_err(|e| write_error(&args.path, e))?;
    Ok(format!("created {} ({})", args.path, plural(args.new_text.len(), "byte")))
}

/// An empty old_text on an existing file: allowed only when the file has no content yet.
fn fill_empty(files: &WorkspaceDir, target: &Target, original: &str, args: &Args) -> ToolOutput {
    if !original.trim().is_empty() {
        return Err(ToolError::new(format!(
            "old_text is empty, which only creates a new (or fills an empty) file, but {} already has \
             content; put the exact text to replace in old_text",
            args.path
        )));
    }
    write_atomically(files, target, args.new_text.as_bytes()).map_err(|e| write_error(&args.path, e))?;
    Ok(format!("wrote {} to the empty file {}", plural(args.new_text.len(), "byte"), args.path))
}

/// The file as UTF-8 text, refusing what cannot be edited safely as text.
fn load(files: &WorkspaceDir, target: &Target) -> Result<String, ToolError> {
    let shown = target.shown();
    let mut file = open_regular_file(files, target)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_EDIT_BYTES {
        return Err(ToolError::new(format!(
            "{shown} is too large to edit ({} MiB; the limit is {} MiB); use write_file to replace it whole",
            size / (1024 * 1024),
            MAX_EDIT_BYTES / (1024 * 1024)
        )));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| ToolError::new(format!("cannot read {shown}: {e}")))?;
    if looks_binary(&bytes) {
        return Err(ToolError::new(format!("{shown} is a binary file; edit_file only changes text files")));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::new(format!(
            "{shown} is not valid UTF-8 text, so editing it could damage it; use write_file to replace it whole"
        ))
    })
}

/// "file not found", with up to three files of similar names beside it.
fn missing_file_message(files: &WorkspaceDir, target: &Target) -> String {
    let shown = target.shown();
    let wanted = target.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut close: Vec<(f64, String)> = target
        .parent()
        .and_then(|dir| files.read_dir(&dir).ok())
        .into_iter()
        .flatten()
        .filter(|entry| entry.kind == EntryKind::File)
        .map(|entry| entry.name.to_string_lossy().into_owned())
        .map(|name| (similarity(&wanted, &name), name))
        .filter(|(score, _)| *score >= 0.5)
        .collect();
    close.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let names: Vec<String> = close
        .into_iter()
        .take(3)
        .map(|(_, name)| Path::new(shown).with_file_name(name).display().to_string())
        .collect();
    if names.is_empty() {
        format!("file not found: {shown}; to create a file, use write_file (or edit_file with an empty old_text)")
    } else {
        format!("file not found: {shown}; did you mean {}?", names.join(", "))
    }
}

/// The matches to replace, or an error explaining why the choice is not clear.
fn choose(matches: &[Span], args: &Args) -> Result<Vec<Span>, ToolError> {
    let count = matches.len();
    let chosen = if args.replace_all {
        matches.to_vec()
    } else if let Some(n) = args.occurrence {
        let span = matches.get(n - 1).ok_or_else(|| {
            ToolError::new(format!(
                "occurrence {n} does not exist: old_text matches {} ({})",
                plural(count, "place"),
                lines_of(matches)
            ))
        })?;
        vec![span.clone()]
    } else if let Some(line) = args.line_hint {
        by_line(matches, line)?
    } else if count > 1 {
        return Err(ToolError::new(format!(
            "old_text matches {count} places ({}); include more surrounding lines so it matches only one, \
             or pick one with occurrence or line_hint, or set replace_all to true to change them all",
            lines_of(matches)
        )));
    } else {
        matches.to_vec()
    };
    match args.expected_replacements {
        Some(expected) if expected != chosen.len() => Err(ToolError::new(format!(
            "expected_replacements is {expected} but this edit would make {}; nothing was changed",
            chosen.len()
        ))),
        _ => Ok(chosen),
    }
}

/// The one match covering 1-based `line`.
fn by_line(matches: &[Span], line: usize) -> Result<Vec<Span>, ToolError> {
    let covering: Vec<Span> = matches.iter().filter(|s| s.covers(line)).cloned().collect();
    match covering.len() {
        1 => Ok(covering),
        0 => Err(ToolError::new(format!(
            "no match of old_text includes line {line}; old_text matches at {}; read that part of the file again",
            lines_of(matches)
        ))),
        n => Err(ToolError::new(format!("line {line} holds {n} matches of old_text; use occurrence to pick one"))),
    }
}

/// "line 3, line 9, …" for the first few matches.
fn lines_of(matches: &[Span]) -> String {
    let mut listed: Vec<String> = matches.iter().take(LINES_LISTED).map(|s| format!("line {}", s.first_line)).collect();
    if matches.len() > LINES_LISTED {
        listed.push(format!("and {} more", matches.len() - LINES_LISTED));
    }
    listed.join(", ")
}

/// `content` with each chosen span replaced by `new`.
///
/// A loose match gets `new` re-indented like the file. Deleting whole lines (an empty `new`
/// over a span that starts a line) also removes the newline after them, so no blank line is
/// left behind.
fn replace(content: &str, chosen: &[Span], old: &str, new: &str, found: Found) -> String {
    let mut out = content.to_owned();
    for span in chosen.iter().rev() {
        let matched = &content[span.start..span.end];
        let replacement = if found == Found::Loose { reindent(old, matched, new) } else { new.to_owned() };
        let starts_line = span.start == 0 || content.as_bytes()[span.start - 1] == b'\n';
        let mut end = span.end;
        if replacement.is_empty() && starts_line && !matched.ends_with('\n') && content[end..].starts_with('\n') {
            end += 1;
        }
        out.replace_range(span.start..end, &replacement);
    }
    out
}

/// What the edit did, for the model.
fn summary(shown: &str, chosen: &[Span], found: Found) -> String {
    let mut text = match chosen {
        [one] => format!("edited {shown}: replaced 1 match at line {}", one.first_line),
        many => format!("edited {shown}: replaced {} matches ({})", many.len(), lines_of(many)),
    };
    if found == Found::Loose {
        text.push_str(" (old_text matched after ignoring indentation, trailing spaces and quote style)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};

    async fn edit(ws: &Workspace, args: Value) -> ToolOutput {
        handle(ws.ctx(), args).await
    }

    #[tokio::test]
    async fn a_unique_match_is_replaced_and_its_line_reported() {
        let ws = Workspace::new("edit");
        ws.write("a.md", "one\ntwo\nthree\n");
        let out = edit(&ws, json!({"path": "a.md", "old_text": "two", "new_text": "2"})).await.unwrap();
        assert_eq!(out, "edited a.md: replaced 1 match at line 2");
        assert_eq!(ws.read("a.md"), "one\n2\nthree\n");
    }

    #[tokio::test]
    async fn edit_with_two_matches_asks_for_more_context() {
        let ws = Workspace::new("edit");
        ws.write("a.md", "x = 1\ny = 1\n");
        let err = edit(&ws, json!({"path": "a.md", "old_text": "= 1", "new_text": "= 2"})).await.unwrap_err();
        assert!(
            err.message().starts_with("old_text matches 2 places (line 1, line 2); include more surrounding lines"),
            "{err}"
        );
        assert!(err.message().contains("replace_all"), "{err}");
        assert_eq!(ws.read("a.md"), "x = 1\ny = 1\n", "a refused edit changes nothing");
    }

    #[tokio::test]
    async fn replace_all_changes_every_match() {
        let ws = Workspace::new("edit");
        ws.write("a.md", "x = 1\ny = 1\n");
        let out = edit(&ws, json!({"path": "a.md", "old_text": "= 1", "new_text": "= 2", "replace_all": true}))
            .await
            .unwrap();
        assert_eq!(out, "edited a.md: replaced 2 matches (line 1, line 2)");
        assert_eq!(ws.read("a.md"), "x = 2\ny = 2\n");
    }

    #[tokio::test]
    async fn occurrence_and_line_hint_pick_one_of_several_matches() {
        let ws = Workspace::new("edit");
        ws.write("a.txt", "v\nv\nv\n");
        edit(&ws, json!({"path": "a.txt", "old_text": "v", "new_text": "second", "occurrence": 2})).await.unwrap();
        assert_eq!(ws.read("a.txt"), "v\nsecond\nv\n");
        edit(&ws, json!({"path": "a.txt", "old_text": "v", "new_text": "third", "line_hint": 3})).await.unwrap();
        assert_eq!(ws.read("a.txt"), "v\nsecond\nthird\n");
        let err =
            edit(&ws, json!({"path": "a.txt", "old_text": "v", "new_text": "x", "occurrence": 4})).await.unwrap_err();
        assert!(err.message().contains("occurrence 4 does not exist"), "{err}");
        let err =
            edit(&ws, json!({"path": "a.txt", "old_text": "v", "new_text": "x", "line_hint": 2})).await.unwrap_err();
        assert!(err.message().contains("no match of old_text includes line 2"), "{err}");
    }

    #[tokio::test]
    async fn expected_replacements_guards_the_edit() {
        let ws = Workspace::new("edit");
        ws.write("a.txt", "v v v");
        let err = edit(
            &ws,
            json!({"path": "a.txt", "old_text": "v", "new_text": "w", "replace_all": true, "expected_replacements": 2}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.message(), "expected_replacements is 2 but this edit would make 3; nothing was changed");
        assert_eq!(ws.read("a.txt"), "v v v");
    }

    #[tokio::test]
    async fn contradictory_choices_are_refused() {
        let ws = Workspace::new("edit");
        ws.write("a.txt", "v v");
        let err =
            edit(&ws, json!({"path": "a.txt", "old_text": "v", "new_text": "w", "replace_all": true, "occurrence": 1}))
                .await
                .unwrap_err();
        assert!(err.message().contains("cannot be combined"), "{err}");
        let err =
            edit(&ws, json!({"path": "a.txt", "old_text": "v", "new_text": "w", "occurrence": 0})).await.unwrap_err();
        assert!(err.message().contains("counts from 1"), "{err}");
    }

    #[tokio::test]
    async fn edit_miss_shows_the_closest_match_as_a_diff() {
        let ws = Workspace::new("edit");
        ws.write("a.py", "def greet(name):\n    print('hello', name)\n    return name\n\ndef other():\n    pass\n");
        let args = json!({"path": "a.py", "old_text": "def greet(name):\n    print(\"hello\", name)", "new_text": "x"});
        let text = edit(&ws, args).await.unwrap_err().to_string();
        assert!(text.starts_with("Error: old_text was not found in a.py; the most similar text"), "{text}");
        assert!(text.contains("is at lines 1-2"), "{text}");
        assert!(text.contains("--- old_text\n+++ a.py (lines 1-2)\n def greet(name):\n-    print(\"hello\", name)\n+    print('hello', name)"), "{text}");
        assert_eq!(ws.read("a.py").lines().count(), 6, "nothing changed");
    }

    #[tokio::test]
    async fn indentation_differences_still_match_and_keep_the_files_indentation() {
        let ws = Workspace::new("edit");
        ws.write("a.py", "class A:\n    def f(self):\n        return 1\n");
        let out = edit(
            &ws,
            json!({"path": "a.py", "old_text": "def f(self):\n    return 1", "new_text": "def f(self):\n    return 2"}),
        )
        .await
        .unwrap();
        assert!(out.contains("ignoring indentation"), "{out}");
        assert_eq!(ws.read("a.py"), "class A:\n    def f(self):\n        return 2\n");
    }

    #[tokio::test]
    async fn crlf_files_match_snippets_with_plain_newlines_and_stay_crlf() {
        let ws = Workspace::new("edit");
        ws.write("w.txt", "a\r\nb\r\nc\r\n");
        edit(&ws, json!({"path": "w.txt", "old_text": "a\nb", "new_text": "A\nB"})).await.unwrap();
        assert_eq!(ws.read("w.txt"), "A\r\nB\r\nc\r\n");
    }

    #[tokio::test]
    async fn deleting_a_whole_line_leaves_no_blank_line() {
        let ws = Workspace::new("edit");
        ws.write("a.txt", "keep\ndrop me\nkeep too # note\n");
        edit(&ws, json!({"path": "a.txt", "old_text": "drop me", "new_text": ""})).await.unwrap();
        edit(&ws, json!({"path": "a.txt", "old_text": " # note", "new_text": ""})).await.unwrap();
        assert_eq!(ws.read("a.txt"), "keep\nkeep too\n");
    }

    #[tokio::test]
    async fn an_empty_old_text_creates_a_missing_file_but_never_overwrites_content() {
        let ws = Workspace::new("edit");
        let out = edit(&ws, json!({"path": "new/file.txt", "old_text": "", "new_text": "hello"})).await.unwrap();
        assert_eq!(out, "created new/file.txt (5 bytes)");
        assert_eq!(ws.read("new/file.txt"), "hello");
        let err = edit(&ws, json!({"path": "new/file.txt", "old_text": "", "new_text": "bye"})).await.unwrap_err();
        assert!(err.message().contains("already has content"), "{err}");
    }

    #[tokio::test]
    async fn identical_old_and_new_text_is_refused() {
        let ws = Workspace::new("edit");
        ws.write("a.txt", "same");
        let err = edit(&ws, json!({"path": "a.txt", "old_text": "same", "new_text": "same"})).await.unwrap_err();
        assert!(err.message().contains("nothing to change"), "{err}");
    }

    #[tokio::test]
    async fn a_missing_file_suggests_similar_names() {
        let ws = Workspace::new("edit");
        ws.write("src/main.rs", "fn main() {}");
        let err = edit(&ws, json!({"path": "src/mian.rs", "old_text": "a", "new_text": "b"})).await.unwrap_err();
        assert_eq!(err.message(), "file not found: src/mian.rs; did you mean src/main.rs?");
    }

    #[tokio::test]
    async fn binary_and_non_utf8_files_are_not_edited() {
        let ws = Workspace::new("edit");
        std::fs::write(ws.path().join("b.bin"), b"ab\0cd").unwrap();
        std::fs::write(ws.path().join("l1.txt"), b"caf\xe9 au lait").unwrap();
        assert!(
            edit(&ws, json!({"path": "b.bin", "old_text": "ab", "new_text": "x"}))
                .await
                .unwrap_err()
                .message()
                .contains("binary")
        );
        assert!(
            edit(&ws, json!({"path": "l1.txt", "old_text": "au", "new_text": "x"}))
                .await
                .unwrap_err()
                .message()
                .contains("not valid UTF-8")
        );
    }

    #[tokio::test]
    async fn editing_through_a_symlink_out_of_the_workspace_is_refused() {
        let ws = Workspace::new("edit");
        let outside = outside_dir("edit");
        outside.write("target.txt", "original");
        std::os::unix::fs::symlink(outside.path().join("target.txt"), ws.path().join("link.txt")).unwrap();
        let err =
            edit(&ws, json!({"path": "link.txt", "old_text": "original", "new_text": "changed"})).await.unwrap_err();
        assert!(err.message().contains("outside the workspace"), "{err}");
        assert_eq!(outside.read("target.txt"), "original");
    }
}

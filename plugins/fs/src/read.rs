//! `read_file`: a text file as numbered lines (`N| text`), paged with offset/limit and
//! capped in size, with a footer that says how to read the next part.

use std::fmt::Write as _;
use std::fs::{File, Metadata};
use std::io::{BufRead, BufReader};

use oxibot_plugin::beneath::{Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::plural;
use crate::text::{count_lines, decode_line, looks_binary, next_line, shorten};

/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Most characters of numbered lines returned by one call; the rest waits for the next page.
pub const MAX_CHARS: usize = 128_000;
/// Longest line shown in full; longer ones are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line kept in memory while reading (enough for [`MAX_LINE_CHARS`] characters).
const LINE_BYTES_KEPT: usize = 4 * MAX_LINE_CHARS + 4;

/// The arguments of `read_file`.
#[derive(Deserialize)]
struct Args {
    path: String,
    #[serde(default, deserialize_with = "crate::args::count")]
    offset: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    limit: Option<usize>,
}

/// Which lines a call asks for: `limit` lines starting at line `offset` (1-based).
#[derive(Debug, Clone, Copy)]
struct Window {
    offset: usize,
    limit: usize,
}

/// The tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new(
        "read_file",
        "Read a text file as `N| text` lines; a large one comes in parts (offset, limit).",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
            "required": ["path"]
        }),
    )
    .read_only()
}

/// Runs `read_file`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let files = WorkspaceDir::open(&ctx)?;
    let target = files.resolve(&args.path)?;
    let window = Window {
        offset: args.offset.unwrap_or(1).max(1),
        limit: args.limit.filter(|n| *n > 0).unwrap_or(DEFAULT_LIMIT),
    };
    crate::blocking(move || read(&files, &target, window)).await
}

/// Reads the window of `target`.
fn read(files: &WorkspaceDir, target: &Target, window: Window) -> ToolOutput {
    let shown = target.shown();
    let file = open_regular_file(files, target)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let sample = reader.fill_buf().map_err(|e| read_error(shown, &e))?;
    if sample.is_empty() {
        return Ok(format!("(empty file: {shown})"));
    }
    if looks_binary(sample) {
        return Err(ToolError::new(format!(
            "{shown} is a binary file ({size} bytes), not text; read_file only shows text files"
        )));
    }
    let page = collect_window(&mut reader, window).map_err(|e| read_error(shown, &e))?;
    page.render(shown, window)
}

/// Opens `target` for reading if it is a regular file (following symlinks), else explains.
///
/// Devices, pipes and sockets are refused before opening: reading one could block forever or
/// never end (`/dev/zero`, a FIFO nobody writes to). What was opened is checked again, since
/// the path may lead somewhere else by then (the open does not block on a FIFO).
pub fn open_regular_file(files: &WorkspaceDir, target: &Target) -> Result<File, ToolError> {
    let shown = target.shown();
    let meta = files.metadata(target).map_err(|e| {
        crate::access_error(e, |e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ToolError::new(format!("file not found: {shown}; use list_dir or glob to find the right path"))
            }
            _ => read_error(shown, e),
        })
    })?;
    check_regular(&meta, shown)?;
    let file = files.open_read(target).map_err(|e| crate::access_error(e, |e| read_error(shown, e)))?;
    check_regular(&file.metadata().map_err(|e| read_error(shown, &e))?, shown)?;
    Ok(file)
}

/// Refuses directories, devices, pipes and sockets.
fn check_regular(meta: &Metadata, shown: &str) -> Result<(), ToolError> {
    if meta.is_dir() {
        return Err(ToolError::new(format!(
            "{shown} is a directory, not a file; use list_dir to see what it contains"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::new(format!(
            "{shown} is not a regular file (it is a device, pipe or socket) and cannot be read"
        )));
    }
    Ok(())
}

fn read_error(shown: &str, error: &std::io::Error) -> ToolError {
    ToolError::new(format!("cannot read {shown}: {error}"))
}

/// The numbered lines of one window, and where they stopped.
struct Page {
    /// The numbered lines, joined with newlines.
    body: String,
    /// The number of the last line in `body` (0 when none).
    last: usize,
    /// How many lines the whole file has.
    total: usize,
}

/// Reads the lines of `window` (within [`MAX_CHARS`]) and counts the rest of the file.
fn collect_window(reader: &mut impl BufRead, window: Window) -> std::io::Result<Page> {
    let end = window.offset.saturating_add(window.limit);
    let (mut body, mut chars, mut last, mut number) = (String::new(), 0usize, 0usize, 0usize);
    let mut buf = Vec::new();
    while next_line(reader, &mut buf, LINE_BYTES_KEPT)? {
        number += 1;
        if number < window.offset {
            continue;
        }
        let line = decode_line(&buf);
        let numbered = format!("{number}| {}", shorten(&line, MAX_LINE_CHARS));
        let added = numbered.chars().count() + usize::from(last > 0);
        if number >= end || (last > 0 && chars + added > MAX_CHARS) {
            // This line is not shown; count it and everything after it.
            number += count_lines(reader)?;
            break;
        }
        if last > 0 {
            body.push('\n');
        }
        body.push_str(&numbered);
        chars += added;
        last = number;
    }
    Ok(Page { body, last, total: number })
}

impl Page {
    /// The page with its footer, or an error when the window starts past the end.
    fn render(mut self, shown: &str, window: Window) -> ToolOutput {
        if self.last == 0 {
            return Err(ToolError::new(format!(
                "offset {} is past the end of {shown}, which has {}",
                window.offset,
                plural(self.total, "line")
            )));
        }
        if self.last < self.total {
            let _ = write!(
                self.body,
                "\n\n(lines {}-{} of {}; call read_file with offset={} to read on)",
                window.offset,
                self.last,
                self.total,
                self.last + 1
            );
        } else {
            let _ = write!(self.body, "\n\n(end of file, {})", plural(self.total, "line"));
        }
        Ok(self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};

    async fn call(ws: &Workspace, args: Value) -> ToolOutput {
        handle(ws.ctx(), args).await
    }

    fn numbered_file(ws: &Workspace, name: &str, lines: usize) {
        let text: String = (1..=lines).map(|n| format!("line {n}\n")).collect();
        ws.write(name, &text);
    }

    #[tokio::test]
    async fn lines_come_back_numbered_with_an_end_marker() {
        let ws = Workspace::new("read");
        ws.write("a.txt", "alpha\nbeta\n");
        let out = call(&ws, json!({"path": "a.txt"})).await.unwrap();
        assert_eq!(out, "1| alpha\n2| beta\n\n(end of file, 2 lines)");
    }

    #[tokio::test]
    async fn windows_line_endings_and_a_missing_final_newline_are_handled() {
        let ws = Workspace::new("read");
        ws.write("w.txt", "one\r\ntwo");
        let out = call(&ws, json!({"path": "w.txt"})).await.unwrap();
        assert_eq!(out, "1| one\n2| two\n\n(end of file, 2 lines)");
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_slice_and_say_how_to_continue() {
        let ws = Workspace::new("read");
        numbered_file(&ws, "long.txt", 10);
        let out = call(&ws, json!({"path": "long.txt", "offset": 4, "limit": 3})).await.unwrap();
        assert_eq!(
            out,
            "4| line 4\n5| line 5\n6| line 6\n\n(lines 4-6 of 10; call read_file with offset=7 to read on)"
        );
    }

    #[tokio::test]
    async fn the_default_limit_is_two_thousand_lines() {
        let ws = Workspace::new("read");
        numbered_file(&ws, "many.txt", 2500);
        let out = call(&ws, json!({"path": "many.txt"})).await.unwrap();
        assert!(
            out.contains("\n2000| line 2000\n\n(lines 1-2000 of 2500; call read_file with offset=2001"),
            "{}",
            &out[out.len() - 200..]
        );
    }

    #[tokio::test]
    async fn numbers_given_as_strings_are_accepted() {
        let ws = Workspace::new("read");
        numbered_file(&ws, "a.txt", 5);
        let out = call(&ws, json!({"path": "a.txt", "offset": "5"})).await.unwrap();
        assert_eq!(out, "5| line 5\n\n(end of file, 5 lines)");
    }

    #[tokio::test]
    async fn a_huge_file_is_capped_by_characters_with_a_continuation_note() {
        let ws = Workspace::new("read");
        let line = "x".repeat(1000);
        let text: String = (0..500).map(|_| format!("{line}\n")).collect();
        ws.write("big.txt", &text);
        let out = call(&ws, json!({"path": "big.txt"})).await.unwrap();
        assert!(out.chars().count() <= MAX_CHARS + 200, "{}", out.len());
        let shown = out.lines().filter(|l| l.contains("| x")).count();
        assert!(
            out.ends_with(&format!("(lines 1-{shown} of 500; call read_file with offset={} to read on)", shown + 1)),
            "{}",
            &out[out.len() - 100..]
        );
    }

    #[tokio::test]
    async fn a_very_long_line_is_cut_with_a_marker() {
        let ws = Workspace::new("read");
        ws.write("min.js", &format!("{}\nend\n", "y".repeat(50_000)));
        let out = call(&ws, json!({"path": "min.js"})).await.unwrap();
        assert!(
            out.starts_with(&format!("1| {}… [line cut at 2000 characters]\n2| end", "y".repeat(2000))),
            "{}",
            &out[..100]
        );
    }

    #[tokio::test]
    async fn missing_files_directories_and_binaries_get_readable_errors() {
        let ws = Workspace::new("read");
        ws.write("dir/x.txt", "x");
        std::fs::write(ws.path().join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
        let missing = call(&ws, json!({"path": "nope.txt"})).await.unwrap_err().to_string();
        assert_eq!(missing, "Error: file not found: nope.txt; use list_dir or glob to find the right path");
        assert!(call(&ws, json!({"path": "dir"})).await.unwrap_err().to_string().contains("is a directory"));
        let binary = call(&ws, json!({"path": "blob.bin"})).await.unwrap_err().to_string();
        assert!(binary.contains("binary file (4 bytes)"), "{binary}");
    }

    #[tokio::test]
    async fn devices_are_refused_without_being_opened() {
        let ws = Workspace::new("read");
        let err = handle(ws.unrestricted(), json!({"path": "/dev/zero"})).await.unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[tokio::test]
    async fn an_empty_file_says_so() {
        let ws = Workspace::new("read");
        ws.write("empty.txt", "");
        assert_eq!(call(&ws, json!({"path": "empty.txt"})).await.unwrap(), "(empty file: empty.txt)");
    }

    #[tokio::test]
    async fn an_offset_past_the_end_is_an_error() {
        let ws = Workspace::new("read");
        ws.write("a.txt", "one\n");
        let err = call(&ws, json!({"path": "a.txt", "offset": 5})).await.unwrap_err();
        assert_eq!(err.message(), "offset 5 is past the end of a.txt, which has 1 line");
    }

    #[tokio::test]
    async fn dot_dot_and_absolute_paths_outside_the_workspace_are_refused() {
        let ws = Workspace::new("read");
        let err = call(&ws, json!({"path": "../../../etc/passwd"})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        let err = call(&ws, json!({"path": "/etc/passwd"})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
    }

    #[tokio::test]
    async fn a_symlink_leading_outside_the_workspace_is_refused() {
        let ws = Workspace::new("read");
        let outside = outside_dir("read");
        outside.write("secret.txt", "top secret\n");
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("link.txt")).unwrap();
        let err = call(&ws, json!({"path": "link.txt"})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        let out = handle(ws.unrestricted(), json!({"path": "link.txt"})).await.unwrap();
        assert!(out.contains("top secret"), "without the restriction the link is followed: {out}");
    }
}

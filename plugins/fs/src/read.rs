//! `read_file`: a text file as numbered lines (`N| text`), paged with offset/limit and
//! capped in size, with a footer that says how to read the next part.
//!
//! It reads only what it shows, plus the lines it skips to reach `offset`: the lines after
//! the page are counted for the footer only while few bytes follow ([`COUNT_REST_BYTES`]),
//! and no line is scanned further than [`LINE_SCAN_BYTES`], so a huge file (a 20 GB log, a
//! sparse file's hole) answers as fast as a small one.

use std::fmt::Write as _;
use std::fs::{File, Metadata};
use std::io::{BufRead, BufReader, Seek};

use oxibot_plugin::beneath::{Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::plural;
use crate::text::{LineRead, count_lines, decode_line, looks_binary, read_line_within, shorten};

/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Most characters of numbered lines returned by one call; the rest waits for the next page.
pub const MAX_CHARS: usize = 128_000;
/// Longest line shown in full; longer ones are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line kept in memory while reading (enough for [`MAX_LINE_CHARS`] characters).
const LINE_BYTES_KEPT: usize = 4 * MAX_LINE_CHARS + 4;
/// Most bytes after a page that are read to count the file's lines for the footer; when more
/// follow, the footer says so without a total.
pub const COUNT_REST_BYTES: u64 = 4 * 1024 * 1024;
/// Most bytes of one line scanned; a longer line is shown cut and ends the page (or, while
/// skipping to `offset`, cannot be paged past).
pub const LINE_SCAN_BYTES: u64 = 16 * 1024 * 1024;
/// Most bytes the lines of one page may span; the page ends after the line that passes it.
const PAGE_SCAN_BYTES: u64 = 32 * 1024 * 1024;

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
    let page = collect_window(&mut reader, window, size).map_err(|e| read_error(shown, &e))?;
    page.render(shown, window, size)
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
    /// How the file goes on after the page.
    rest: Rest,
}

/// What follows the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    /// The file has this many lines in all (counted, since few bytes followed).
    Total(usize),
    /// More lines follow, too many bytes of them to count.
    More,
    /// The page's last line goes on past [`LINE_SCAN_BYTES`]; it is shown cut.
    LongLine,
    /// Skipping to `offset` met a line longer than [`LINE_SCAN_BYTES`], line `.0`.
    Unskippable(usize),
}

/// Reads the lines of `window` (within [`MAX_CHARS`]) from a file of `size` bytes, and
/// counts the rest of the file when that is cheap.
fn collect_window<R: BufRead + Seek>(reader: &mut R, window: Window, size: u64) -> std::io::Result<Page> {
    let end = window.offset.saturating_add(window.limit);
    let mut buf = Vec::new();
    let mut number = 0usize;
    while number + 1 < window.offset {
        match read_line_within(reader, &mut buf, 0, LINE_SCAN_BYTES)? {
            LineRead::End => return Ok(Page { body: String::new(), last: 0, rest: Rest::Total(number) }),
            LineRead::Line => number += 1,
            LineRead::Unfinished => {
                return Ok(Page { body: String::new(), last: 0, rest: Rest::Unskippable(number + 1) });
            }
        }
    }
    let page_start = reader.stream_position()?;
    let (mut body, mut chars, mut last) = (String::new(), 0usize, 0usize);
    while number + 1 < end {
        let read = read_line_within(reader, &mut buf, LINE_BYTES_KEPT, LINE_SCAN_BYTES)?;
        if read == LineRead::End {
            return Ok(Page { body, last, rest: Rest::Total(number) });
        }
        number += 1;
        let numbered = format!("{number}| {}", shorten(&decode_line(&buf), MAX_LINE_CHARS));
        let added = numbered.chars().count() + usize::from(last > 0);
        if last > 0 && chars + added > MAX_CHARS {
            // This line is not shown; it counts among the rest (unless it is not over yet).
            let counted = if read == LineRead::Unfinished { None } else { count_rest(reader, size)? };
            let rest = counted.map_or(Rest::More, |more| Rest::Total(number + more));
            return Ok(Page { body, last, rest });
        }
        if last > 0 {
            body.push('\n');
        }
        body.push_str(&numbered);
        chars += added;
        last = number;
        if read == LineRead::Unfinished {
            return Ok(Page { body, last, rest: Rest::LongLine });
        }
        if reader.stream_position()? - page_start > PAGE_SCAN_BYTES {
            break;
        }
    }
    let rest = count_rest(reader, size)?.map_or(Rest::More, |more| Rest::Total(number + more));
    Ok(Page { body, last, rest })
}

/// How many lines are left, when at most [`COUNT_REST_BYTES`] are; `None` when more are.
fn count_rest<R: BufRead + Seek>(reader: &mut R, size: u64) -> std::io::Result<Option<usize>> {
    let left = size.saturating_sub(reader.stream_position()?);
    if left > COUNT_REST_BYTES {
        // The size is what the file had when opened: look, in case it shrank since.
        return Ok(if reader.fill_buf()?.is_empty() { Some(0) } else { None });
    }
    count_lines(reader).map(Some)
}

impl Page {
    /// The page with its footer, or an error when the window starts past the end.
    fn render(mut self, shown: &str, window: Window, size: u64) -> ToolOutput {
        if self.last == 0 {
            return Err(ToolError::new(match self.rest {
                Rest::Unskippable(line) => format!(
                    "line {line} of {shown} is longer than {}, so read_file cannot page past it; use grep to find what you need",
                    human_bytes(LINE_SCAN_BYTES)
                ),
                Rest::Total(total) => {
                    format!("offset {} is past the end of {shown}, which has {}", window.offset, plural(total, "line"))
                }
                Rest::More | Rest::LongLine => {
                    format!("nothing could be read from {shown} at offset {}", window.offset)
                }
            }));
        }
        let (first, last, next) = (window.offset, self.last, self.last + 1);
        let _ = match self.rest {
            Rest::Total(total) if last < total => {
                write!(self.body, "\n\n(lines {first}-{last} of {total}; call read_file with offset={next} to read on)")
            }
            Rest::Total(total) => write!(self.body, "\n\n(end of file, {})", plural(total, "line")),
            Rest::More | Rest::Unskippable(_) => write!(
                self.body,
                "\n\n(lines {first}-{last}; more lines follow in this {} file, not counted; call read_file with offset={next} to read on)",
                human_bytes(size)
            ),
            Rest::LongLine => write!(
                self.body,
                "\n\n(lines {first}-{last}; line {last} goes on past {} and is cut; call read_file with offset={next} to read on)",
                human_bytes(LINE_SCAN_BYTES)
            ),
        };
        Ok(self.body)
    }
}

/// A byte count as people write it: `512 bytes`, `16 MiB`, `20.0 GiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 { format!("{value:.0} {}", UNITS[unit]) } else { format!("{value:.1} {}", UNITS[unit]) }
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

    /// A sparse file of 20 GiB: `lines` numbered lines, then a hole (NUL bytes) to the end.
    fn sparse_file(ws: &Workspace, name: &str, lines: usize) {
        numbered_file(ws, name, lines);
        let file = std::fs::OpenOptions::new().write(true).open(ws.path().join(name)).unwrap();
        file.set_len(20 << 30).unwrap();
    }

    // Issue 23, finding 10b: five lines of a 20 GB file took 40 s, every line counted.
    #[tokio::test]
    async fn a_page_of_a_huge_file_reads_only_its_lines_and_says_more_follow() {
        let ws = Workspace::new("read");
        sparse_file(&ws, "huge.log", 3000);
        let started = std::time::Instant::now();
        let out = call(&ws, json!({"path": "huge.log", "offset": 2, "limit": 3})).await.unwrap();
        assert_eq!(
            out,
            "2| line 2\n3| line 3\n4| line 4\n\n(lines 2-4; more lines follow in this 20 GiB file, not counted; call read_file with offset=5 to read on)"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_page_that_reaches_a_huge_line_shows_it_cut_and_stops_there() {
        let ws = Workspace::new("read");
        sparse_file(&ws, "holey.log", 3000);
        let out = call(&ws, json!({"path": "holey.log", "offset": 2999})).await.unwrap();
        assert!(out.starts_with("2999| line 2999\n3000| line 3000\n3001| \0"), "{}", &out[..60]);
        assert!(
            out.ends_with("(lines 2999-3001; line 3001 goes on past 16 MiB and is cut; call read_file with offset=3002 to read on)"),
            "{}",
            &out[out.len() - 120..]
        );
        let past = call(&ws, json!({"path": "holey.log", "offset": 3002})).await.unwrap_err();
        assert!(past.message().contains("line 3001 of holey.log is longer than 16 MiB"), "{}", past.message());
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(20 << 30), "20 GiB");
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

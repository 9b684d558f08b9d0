//! `grep`: search file contents with a regular expression; list matching files (default),
//! count matches per file, or show matching lines with context, paged and capped.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Read as _;
use std::path::Path;
use std::time::SystemTime;

use oxibot_plugin::beneath::{Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::page::{MAX_OUTPUT_CHARS, Page};
use crate::pattern::{Glob, has_extension, type_extensions};
use crate::text::{looks_binary, shorten};
use crate::walk::{MAX_VISITS, Walk};

/// Files larger than this are skipped when searching a directory.
const MAX_FILE_BYTES: u64 = 2_000_000;
/// Larger limit for a file the call names directly.
const MAX_NAMED_FILE_BYTES: u64 = 100_000_000;
/// Most lines of context asked for on either side of a match.
const MAX_CONTEXT: usize = 20;
/// Longest line shown in full in content mode.
const MAX_LINE_CHARS: usize = 500;

/// The arguments of `grep`.
#[derive(Deserialize)]
struct Args {
    pattern: String,
    #[serde(default, deserialize_with = "crate::args::optional_text")]
    path: Option<String>,
    #[serde(default, deserialize_with = "crate::args::optional_text")]
    glob: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "crate::args::optional_text")]
    file_type: Option<String>,
    #[serde(default, deserialize_with = "crate::args::flag")]
    case_insensitive: bool,
    #[serde(default, deserialize_with = "crate::args::flag")]
    fixed_strings: bool,
    #[serde(default, deserialize_with = "crate::args::optional_text")]
    output_mode: Option<String>,
    #[serde(default, deserialize_with = "crate::args::count")]
    context_before: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    context_after: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    max_matches: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    max_results: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    head_limit: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    offset: Option<usize>,
}

/// What `grep` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The paths of files with at least one matching line.
    Files,
    /// Each matching line, numbered, with context.
    Content,
    /// `path: n` matching lines per file.
    Count,
}

impl Mode {
    fn parse(value: Option<&str>) -> Result<Mode, ToolError> {
        match value {
            None | Some("files_with_matches") => Ok(Mode::Files),
            Some("content") => Ok(Mode::Content),
            Some("count") => Ok(Mode::Count),
            Some(other) => {
                Err(ToolError::new(format!("output_mode '{other}' is not one of files_with_matches, content, count")))
            }
        }
    }
}

/// The tool's manifest entry. `type` (a file type; `glob` does the same) and the older names
/// `max_matches` and `max_results` (for `head_limit`) are still read but not offered: every
/// schema byte is paid on every model call.
pub fn tool() -> Tool {
    Tool::new(
        "grep",
        "Search file contents for a regex. output_mode: files_with_matches (default), content (`N| text`), count.",
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"},
                "case_insensitive": {"type": "boolean"},
                "fixed_strings": {"type": "boolean"},
                "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]},
                "context_before": {"type": "integer"},
                "context_after": {"type": "integer"},
                "head_limit": {"type": "integer"},
                "offset": {"type": "integer"}
            },
            "required": ["pattern"]
        }),
    )
    .read_only()
}

/// Runs `grep`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let mode = Mode::parse(args.output_mode.as_deref())?;
    let regex = compile(&args.pattern, args.fixed_strings, args.case_insensitive)?;
    let filters = Filters {
        glob: args.glob.as_deref().map(Glob::new).transpose().map_err(ToolError::new)?,
        extensions: args.file_type.as_deref().map(type_extensions),
    };
    let legacy = if mode == Mode::Content { args.max_matches } else { args.max_results };
    let page = Page::new(args.head_limit, legacy, args.offset);
    let shown = args.path.unwrap_or_else(|| ".".to_owned());
    let files = WorkspaceDir::open(&ctx)?;
    let target = files.resolve(&shown)?;
    let context = (args.context_before.unwrap_or(0).min(MAX_CONTEXT), args.context_after.unwrap_or(0).min(MAX_CONTEXT));
    crate::blocking(move || {
        let meta = files.metadata(&target).map_err(|e| {
            crate::access_error(e, |e| match e.kind() {
                std::io::ErrorKind::NotFound => ToolError::new(format!("path not found: {shown}")),
                _ => ToolError::new(format!("cannot search {shown}: {e}")),
            })
        })?;
        let search = Search { regex, mode, context, page, root: files.root(), filters };
        let tally =
            if meta.is_file() { search.run_file(&files, &target) } else { search.run(&files, &target, &Walk::new()) };
        Ok(search.render(tally, &args.pattern, &shown))
    })
    .await
}

/// The regex for `pattern`, with an error that says how to fix a bad one.
fn compile(pattern: &str, fixed: bool, case_insensitive: bool) -> Result<Regex, ToolError> {
    if pattern.is_empty() {
        return Err(ToolError::new("pattern is empty; give the text or regex to search for"));
    }
    let source = if fixed { regex::escape(pattern) } else { pattern.to_owned() };
    RegexBuilder::new(&source).case_insensitive(case_insensitive).build().map_err(|e| {
        ToolError::new(format!(
            "invalid regex: {e}\n(this is Rust regex syntax, which has no look-around or back-references; \
             escape special characters, or set fixed_strings=true to search for plain text)"
        ))
    })
}

/// Which files a directory search looks into.
struct Filters {
    glob: Option<Glob>,
    extensions: Option<Vec<String>>,
}

impl Filters {
    fn accepts(&self, relative: &Path) -> bool {
        let name = relative.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        self.glob.as_ref().is_none_or(|g| g.matches(relative))
            && self.extensions.as_ref().is_none_or(|e| has_extension(&name, e))
    }
}

/// One file with matches, for files_with_matches and count modes.
struct FileHits {
    modified: SystemTime,
    shown: String,
    lines: usize,
}

/// Why a content search stopped before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The page is full and at least one more match exists.
    PageFull,
    /// The next block would pass the output size cap.
    SizeCap,
}

/// What a search collected.
#[derive(Default)]
struct Tally {
    files: Vec<FileHits>,
    blocks: Vec<String>,
    block_chars: usize,
    /// Matching lines met in content mode, including those skipped by `offset`.
    matches_seen: usize,
    stopped: Option<Stop>,
    skipped_binary: usize,
    skipped_large: usize,
    cut_short: bool,
}

/// One grep run's settings.
struct Search<'a> {
    regex: Regex,
    mode: Mode,
    /// Lines of context before and after a match.
    context: (usize, usize),
    page: Page,
    root: &'a Path,
    filters: Filters,
}

impl Search<'_> {
    /// Searches the one file the call named.
    fn run_file(&self, files: &WorkspaceDir, target: &Target) -> Tally {
        let mut tally = Tally::default();
        if let Ok(file) = files.open_read(target) {
            self.search_file(file, target.path(), MAX_NAMED_FILE_BYTES, &mut tally);
        }
        tally
    }

    /// Searches the files below the directory `base`, walked with `walk`.
    fn run(&self, files: &WorkspaceDir, base: &Target, walk: &Walk) -> Tally {
        let mut tally = Tally::default();
        let Ok(dir) = files.open_dir(base) else { return tally };
        let report = walk.run(files, dir, |entry| {
            let relative = entry.path.strip_prefix(base.path()).unwrap_or(&entry.path);
            if entry.is_file
                && self.filters.accepts(relative)
                && let Ok(file) = entry.open_file(files)
            {
                self.search_file(file, &entry.path, MAX_FILE_BYTES, &mut tally);
            }
            tally.stopped.is_none()
        });
        tally.cut_short = report.cut_short;
        tally
    }

    /// Searches the open `file`, shown by `path`.
    fn search_file(&self, file: File, path: &Path, max_bytes: u64, tally: &mut Tally) {
        let Some((text, modified)) = load(file, max_bytes, tally) else { return };
        let lines = split_lines(&text);
        let shown = crate::display_path(self.root, path);
        if self.mode != Mode::Content {
            let hits = lines.iter().filter(|line| self.regex.is_match(line)).count();
            if hits > 0 {
                tally.files.push(FileHits { modified, shown, lines: hits });
            }
            return;
        }
        for (index, line) in lines.iter().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            tally.matches_seen += 1;
            if tally.matches_seen <= self.page.offset {
                continue;
            }
            if self.page.is_full(tally.blocks.len()) {
                tally.stopped = Some(Stop::PageFull);
                return;
            }
            let block = self.block(&shown, &lines, index);
            let added = block.chars().count() + 2;
            if !tally.blocks.is_empty() && tally.block_chars + added > MAX_OUTPUT_CHARS {
                tally.stopped = Some(Stop::SizeCap);
                return;
            }
            tally.block_chars += added;
            tally.blocks.push(block);
        }
    }

    /// One match with its context: a `path:line` header, then `> N| text` for the match and
    /// `  N| text` around it.
    fn block(&self, shown: &str, lines: &[&str], index: usize) -> String {
        let first = index.saturating_sub(self.context.0);
        let last = (index + self.context.1).min(lines.len() - 1);
        let mut block = format!("{shown}:{}", index + 1);
        for (i, line) in lines.iter().enumerate().take(last + 1).skip(first) {
            let marker = if i == index { '>' } else { ' ' };
            let _ = write!(block, "\n{marker} {}| {}", i + 1, shorten(line, MAX_LINE_CHARS));
        }
        block
    }

    /// The reply for what the search found.
    fn render(&self, tally: Tally, pattern: &str, shown: &str) -> String {
        let nothing = format!("no matches for '{pattern}' in {shown}");
        let mut out = match self.mode {
            Mode::Content => self.render_content(&tally).unwrap_or(nothing),
            _ if tally.files.is_empty() => nothing,
            _ => self.render_files(&tally),
        };
        let notes = notes(&tally);
        if !notes.is_empty() {
            let _ = write!(out, "\n\n{}", notes.join("\n"));
        }
        out
    }

    fn render_files(&self, tally: &Tally) -> String {
        let mut files: Vec<&FileHits> = tally.files.iter().collect();
        files.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.shown.cmp(&b.shown)));
        let items: Vec<String> = match self.mode {
            Mode::Count => files.iter().map(|f| format!("{}: {}", f.shown, f.lines)).collect(),
            _ => files.iter().map(|f| f.shown.clone()).collect(),
        };
        let mut out = self.page.render(&items);
        if self.mode == Mode::Count {
            let total: usize = tally.files.iter().map(|f| f.lines).sum();
            let _ = write!(
                out,
                "\n\n({} in {})",
                crate::plural(total, "matching line"),
                crate::plural(files.len(), "file")
            );
        }
        out
    }

    /// The matching blocks with a paging note, or `None` when there are none to show.
    fn render_content(&self, tally: &Tally) -> Option<String> {
        let offset = self.page.offset;
        if tally.blocks.is_empty() {
            return (tally.matches_seen > 0)
                .then(|| format!("(offset {offset} is past the last of the {} matches)", tally.matches_seen));
        }
        let (first, last) = (offset + 1, offset + tally.blocks.len());
        let note = match tally.stopped {
            Some(Stop::PageFull) => {
                Some(format!("(matches {first}-{last} shown; there are more: call again with offset={last})"))
            }
            Some(Stop::SizeCap) => Some(format!(
                "(matches {first}-{last} shown; output cut at {MAX_OUTPUT_CHARS} characters: call again with offset={last}, or narrow the search)"
            )),
            None if offset > 0 => Some(format!("(matches {first}-{last} of {})", tally.matches_seen)),
            None => None,
        };
        let body = tally.blocks.join("\n\n");
        Some(match note {
            Some(note) => format!("{body}\n\n{note}"),
            None => body,
        })
    }
}

/// Notes about files that were not searched.
fn notes(tally: &Tally) -> Vec<String> {
    let mut notes = Vec::new();
    if tally.skipped_binary > 0 {
        notes.push(format!("(skipped {})", crate::plural(tally.skipped_binary, "binary file")));
    }
    if tally.skipped_large > 0 {
        notes.push(format!(
            "(skipped {} over {} MB)",
            crate::plural(tally.skipped_large, "file"),
            MAX_FILE_BYTES / 1_000_000
        ));
    }
    if tally.cut_short {
        notes.push(format!("(the search stopped after {MAX_VISITS} entries; search a narrower path)"));
    }
    notes
}

/// The text and modification time of a searchable file, counting skipped ones in `tally`.
fn load(file: File, max_bytes: u64, tally: &mut Tally) -> Option<(String, SystemTime)> {
    // What was opened is what counts: a path swapped since it was listed may lead elsewhere.
    let meta = file.metadata().ok().filter(|m| m.is_file())?;
    if meta.len() > max_bytes {
        tally.skipped_large += 1;
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes).ok()?;
    if looks_binary(&bytes) {
        tally.skipped_binary += 1;
        return None;
    }
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    Some((String::from_utf8_lossy(&bytes).into_owned(), modified))
}

/// The lines of `text`, without `\r\n`/`\n` endings and without the empty piece after a
/// final newline.
fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};
    use std::time::Duration;

    fn workspace() -> Workspace {
        let ws = Workspace::new("grep");
        ws.write("src/a.rs", "fn main() {\n    println!(\"Hello\");\n}\n");
        ws.write("src/b.py", "print('hello')\n");
        ws.write("notes.md", "nothing here\n");
        ws.write(".git/config", "hello from git\n");
        std::fs::write(ws.path().join("blob.bin"), b"hello\0world").unwrap();
        ws
    }

    fn sorted_lines(text: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort();
        lines
    }

    #[tokio::test]
    async fn by_default_grep_lists_matching_files_and_skips_binaries_and_noise() {
        let ws = workspace();
        let out = handle(ws.ctx(), json!({"pattern": "hello", "case_insensitive": true})).await.unwrap();
        let (files, note) = out.split_once("\n\n").unwrap();
        assert_eq!(sorted_lines(files), ["src/a.rs", "src/b.py"]);
        assert_eq!(note, "(skipped 1 binary file)");
    }

    #[tokio::test]
    async fn matching_is_case_sensitive_unless_asked() {
        let ws = workspace();
        let out = handle(ws.ctx(), json!({"pattern": "Hello", "glob": "*.rs"})).await.unwrap();
        assert_eq!(out, "src/a.rs");
        let out = handle(ws.ctx(), json!({"pattern": "HELLO", "path": "src"})).await.unwrap();
        assert_eq!(out, "no matches for 'HELLO' in src");
    }

    #[tokio::test]
    async fn content_mode_shows_numbered_lines_with_context() {
        let ws = workspace();
        let out = handle(
            ws.ctx(),
            json!({"pattern": "println", "output_mode": "content", "context_before": 1, "context_after": 1}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            "src/a.rs:2\n  1| fn main() {\n> 2|     println!(\"Hello\");\n  3| }\n\n(skipped 1 binary file)"
        );
    }

    #[tokio::test]
    async fn glob_type_count_mode_and_fixed_strings_work_together() {
        let ws = workspace();
        let out = handle(
            ws.ctx(),
            json!({"pattern": "print(", "fixed_strings": true, "type": "python", "output_mode": "count"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "src/b.py: 1\n\n(1 matching line in 1 file)");
        let out =
            handle(ws.ctx(), json!({"pattern": "print", "glob": "src/*.py", "output_mode": "count"})).await.unwrap();
        assert_eq!(out, "src/b.py: 1\n\n(1 matching line in 1 file)");
    }

    #[tokio::test]
    async fn content_results_are_capped_by_head_limit_and_paged_by_offset() {
        let ws = Workspace::new("grep");
        ws.write("many.txt", &"match\n".repeat(50));
        let out =
            handle(ws.ctx(), json!({"pattern": "match", "output_mode": "content", "head_limit": 5})).await.unwrap();
        assert_eq!(out.matches("> ").count(), 5);
        assert!(out.ends_with("(matches 1-5 shown; there are more: call again with offset=5)"), "{out}");
        let out = handle(ws.ctx(), json!({"pattern": "match", "output_mode": "content", "offset": 48})).await.unwrap();
        assert_eq!(out, "many.txt:49\n> 49| match\n\nmany.txt:50\n> 50| match\n\n(matches 49-50 of 50)");
    }

    #[tokio::test]
    async fn files_mode_pages_newest_first() {
        let ws = Workspace::new("grep");
        for (i, age) in [(1, 30), (2, 20), (3, 10)] {
            let path = ws.write(&format!("f{i}.txt"), "needle\n");
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(SystemTime::now() - Duration::from_secs(age)).unwrap();
        }
        let out = handle(ws.ctx(), json!({"pattern": "needle", "head_limit": 2})).await.unwrap();
        assert_eq!(out, "f3.txt\nf2.txt\n\n(results 1-2 of 3; call again with offset=2 for more)");
        let out = handle(ws.ctx(), json!({"pattern": "needle", "max_results": 1, "offset": 2})).await.unwrap();
        assert_eq!(out, "f1.txt\n\n(results 3-3 of 3)");
    }

    #[tokio::test]
    async fn large_files_are_skipped_in_directories_but_searched_when_named() {
        let ws = Workspace::new("grep");
        let big = format!("{}\nneedle\n", "x".repeat(MAX_FILE_BYTES as usize));
        ws.write("big.log", &big);
        let out = handle(ws.ctx(), json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(out, "no matches for 'needle' in .\n\n(skipped 1 file over 2 MB)");
        let out =
            handle(ws.ctx(), json!({"pattern": "needle", "path": "big.log", "output_mode": "count"})).await.unwrap();
        assert!(out.starts_with("big.log: 1"), "{out}");
    }

    #[tokio::test]
    async fn a_bad_regex_or_mode_is_an_error_the_model_can_fix() {
        let ws = workspace();
        let err = handle(ws.ctx(), json!({"pattern": "fn ("})).await.unwrap_err();
        assert!(err.message().starts_with("invalid regex") && err.message().contains("fixed_strings"), "{err}");
        let err = handle(ws.ctx(), json!({"pattern": "x", "output_mode": "lines"})).await.unwrap_err();
        assert!(err.message().contains("files_with_matches, content, count"), "{err}");
        assert_eq!(
            handle(ws.ctx(), json!({"pattern": "x", "path": "nope"})).await.unwrap_err().message(),
            "path not found: nope"
        );
    }

    #[tokio::test]
    async fn the_search_never_leaves_the_workspace() {
        let ws = Workspace::new("grep");
        let outside = outside_dir("grep");
        outside.write("secret.txt", "password\n");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("out-file.txt")).unwrap();
        assert_eq!(handle(ws.ctx(), json!({"pattern": "password"})).await.unwrap(), "no matches for 'password' in .");
        assert!(handle(ws.ctx(), json!({"pattern": "password", "path": "out-file.txt"})).await.is_err());
        assert!(handle(ws.ctx(), json!({"pattern": "password", "path": "../"})).await.is_err());
    }

    #[test]
    fn lines_are_split_without_their_endings() {
        assert_eq!(split_lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(split_lines("a\n\nb"), ["a", "", "b"]);
        assert_eq!(split_lines("\n"), [""]);
        assert!(split_lines("").is_empty());
    }
}

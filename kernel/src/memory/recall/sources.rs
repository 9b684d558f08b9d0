//! What the memory index is built from, and how it is cut into chunks: `memory/MEMORY.md`
//! and other notes (core), daily logs `memory/YYYY-MM-DD.md` (daily), session flushes
//! `memory/YYYY-MM-DD-<slug>.md` and `memory/history.jsonl` entries (conversation).
//!
//! Markdown is cut into list items and paragraphs (long paragraphs at line boundaries), each
//! remembering the heading above it; history is one chunk per entry. A chunk's id is a hash
//! of its file, text and position among equal texts, so rebuilding the index gives the same
//! ids and the model can name a chunk across turns.

use std::fs;
use std::path::{Path, PathBuf};

use crate::history::HistoryEntry;
use crate::memory::prompts::is_nothing_notable;
use crate::message::is_kernel_line;

/// The memory directory, relative to the workspace.
pub const MEMORY_DIR: &str = "memory";
/// The archive, relative to the workspace.
pub const HISTORY_PATH: &str = "memory/history.jsonl";
/// Long-term memory, relative to the workspace.
pub const MEMORY_PATH: &str = "memory/MEMORY.md";

/// Longest chunk of prose, in bytes (longer paragraphs are cut at line boundaries).
const MAX_CHUNK_BYTES: usize = 1200;

/// What kind of memory a chunk is (ZeroClaw's categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Lasting facts: `memory/MEMORY.md` and other notes.
    Core,
    /// Notes of a day: `memory/YYYY-MM-DD.md`.
    Daily,
    /// Past conversation: history entries and session flushes.
    Conversation,
}

impl Category {
    /// Every category, in display order.
    pub const ALL: [Category; 3] = [Category::Core, Category::Daily, Category::Conversation];

    /// The name the tool and the index use.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Core => "core",
            Category::Daily => "daily",
            Category::Conversation => "conversation",
        }
    }

    /// The category named `name` (case-insensitive).
    pub fn parse(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// How a source file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown notes.
    Markdown,
    /// `history.jsonl`: one JSON entry per line.
    History,
}

/// One file the index reads.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// Relative to the workspace, `/`-separated (`memory/MEMORY.md`).
    pub path: String,
    /// The file on disk.
    pub absolute: PathBuf,
    /// Its chunks' category.
    pub category: Category,
    /// How it is read.
    pub format: Format,
    /// The day a dated file is about (`YYYY-MM-DD`).
    pub day: Option<String>,
}

/// One piece of memory the index can find.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Stable id (12 hex digits).
    pub id: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// Its category.
    pub category: Category,
    /// First line in the file (1-based).
    pub start_line: usize,
    /// Last line in the file (inclusive).
    pub end_line: usize,
    /// The history cursor, for history entries.
    pub cursor: Option<u64>,
    /// When it was written, as seconds since the epoch; `None` for undated (evergreen) memory.
    pub time: Option<i64>,
    /// The heading it sits under, for Markdown.
    pub context: String,
    /// The text.
    pub text: String,
}

/// The memory files of `workspace` that exist, `MEMORY.md` and the history first, then the
/// other Markdown files by name.
pub fn list_sources(workspace: &Path) -> Vec<SourceFile> {
    let dir = workspace.join(MEMORY_DIR);
    let mut names: Vec<String> = match fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.') && (name.ends_with(".md") || name == "history.jsonl"))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort_by_key(|name| (name != "MEMORY.md", name != "history.jsonl", name.clone()));
    names.into_iter().map(|name| source_for(workspace, &name)).collect()
}

/// How `memory/<name>` is indexed.
pub fn source_for(workspace: &Path, name: &str) -> SourceFile {
    let path = format!("{MEMORY_DIR}/{name}");
    let absolute = workspace.join(&path);
    if name == "history.jsonl" {
        return SourceFile { path, absolute, category: Category::Conversation, format: Format::History, day: None };
    }
    let stem = name.trim_end_matches(".md");
    let day = leading_day(stem);
    let category = match &day {
        Some(day) if stem.len() == day.len() => Category::Daily,
        Some(_) => Category::Conversation,
        None => Category::Core,
    };
    SourceFile { path, absolute, category, format: Format::Markdown, day }
}

/// `2026-04-16` when `stem` starts with a date like that.
fn leading_day(stem: &str) -> Option<String> {
    let head = stem.get(..10)?;
    let ok = head.char_indices().all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() });
    (ok && (stem.len() == 10 || stem[10..].starts_with('-'))).then(|| head.to_owned())
}

/// Seconds since the epoch at `YYYY-MM-DD[ HH:MM]` (read as UTC), if it parses.
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(time) = chrono::NaiveDateTime::parse_from_str(text.get(..16)?, "%Y-%m-%d %H:%M") {
        return Some(time.and_utc().timestamp());
    }
    None
}

fn day_time(day: Option<&str>) -> Option<i64> {
    day.and_then(|d| parse_time(&format!("{d} 00:00")))
}

/// Chunks of a Markdown file's `text`.
pub fn chunk_markdown(source: &SourceFile, text: &str) -> Vec<Chunk> {
    let time = day_time(source.day.as_deref());
    let mut pieces: Vec<(usize, usize, String, String)> = Vec::new();
    let mut heading = String::new();
    let mut current: Option<(usize, usize, String)> = None;
    let flush = |current: &mut Option<(usize, usize, String)>, pieces: &mut Vec<_>, heading: &str| {
        if let Some((start, end, body)) = current.take() {
            let body: String = body;
            if !body.trim().is_empty() {
                pieces.push((start, end, heading.to_owned(), body));
            }
        }
    };
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            flush(&mut current, &mut pieces, &heading);
            continue;
        }
        if trimmed.starts_with('#') {
            flush(&mut current, &mut pieces, &heading);
            heading = trimmed.trim_start_matches('#').trim().to_owned();
            continue;
        }
        let starts_item = is_item(line);
        let too_long = current.as_ref().is_some_and(|(_, _, body)| body.len() + line.len() > MAX_CHUNK_BYTES);
        if (starts_item || too_long) && current.is_some() {
            flush(&mut current, &mut pieces, &heading);
        }
        match &mut current {
            Some((_, end, body)) => {
                *end = number;
                body.push('\n');
                body.push_str(line);
            }
            None => current = Some((number, number, line.to_owned())),
        }
    }
    flush(&mut current, &mut pieces, &heading);
    let mut seen: Vec<(u64, usize)> = Vec::new();
    pieces
        .into_iter()
        .map(|(start, end, context, text)| Chunk {
            id: chunk_id(&source.path, &text, &mut seen),
            path: source.path.clone(),
            category: source.category,
            start_line: start,
            end_line: end,
            cursor: None,
            time,
            context,
            text,
        })
        .collect()
}

/// Whether `line` starts a list item at the top level (`- `, `* `, `+ `, `1. `).
fn is_item(line: &str) -> bool {
    if line.starts_with("- ") || line.starts_with("* ") || line.starts_with("+ ") {
        return true;
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && line[digits..].starts_with(". ")
}

/// Chunks of history entries in `text`, whose first line is line `first_line` of the file.
/// Lines the kernel wrote (a loop-guard stop archived by an older version) and entries that
/// say nothing (`- (nothing notable)`) are left out.
pub fn chunk_history(source: &SourceFile, text: &str, first_line: usize) -> Vec<Chunk> {
    let mut seen = Vec::new();
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let entry = HistoryEntry::parse(line)?;
            let kept: Vec<&str> = entry.content.lines().filter(|line| !is_kernel_line(line)).collect();
            let body = kept.join("\n");
            let body = body.trim();
            if body.is_empty() || is_nothing_notable(body) {
                return None;
            }
            let number = first_line + index;
            Some(Chunk {
                id: chunk_id(&source.path, &format!("{}\n{body}", entry.cursor), &mut seen),
                path: source.path.clone(),
                category: Category::Conversation,
                start_line: number,
                end_line: number,
                cursor: Some(entry.cursor),
                time: parse_time(&entry.timestamp),
                context: entry.timestamp.clone(),
                text: body.to_owned(),
            })
        })
        .collect()
}

/// A stable id for `text` in `path`; equal texts in one file get ids by their order.
fn chunk_id(path: &str, text: &str, seen: &mut Vec<(u64, usize)>) -> String {
    let base = fnv1a64(format!("{path}\0{text}").as_bytes());
    let ordinal = match seen.iter_mut().find(|(hash, _)| *hash == base) {
        Some((_, count)) => {
            *count += 1;
            *count
        }
        None => {
            seen.push((base, 0));
            0
        }
    };
    let hash = if ordinal == 0 { base } else { fnv1a64(format!("{base}\0{ordinal}").as_bytes()) };
    format!("{:012x}", hash & 0xffff_ffff_ffff)
}

/// FNV-1a over `bytes` (change detection and ids, not security).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str) -> SourceFile {
        source_for(Path::new("/ws"), name)
    }

    #[test]
    fn file_names_decide_the_category_and_the_day() {
        assert_eq!(source("MEMORY.md").category, Category::Core);
        let daily = source("2026-04-16.md");
        assert_eq!((daily.category, daily.day.as_deref()), (Category::Daily, Some("2026-04-16")));
        let flush = source("2026-04-16-garden-plan.md");
        assert_eq!((flush.category, flush.day.as_deref()), (Category::Conversation, Some("2026-04-16")));
        assert_eq!(source("2026-04-16x.md").category, Category::Core);
        assert_eq!(source("history.jsonl").format, Format::History);
    }

    #[test]
    fn markdown_is_cut_into_items_and_paragraphs_under_their_heading() {
        let text =
            "# Memory\n\n## Home\n- Lives in Lyon\n- Has a cat\n  called Miso\n\nLikes long walks.\nOn Sundays.\n";
        let chunks = chunk_markdown(&source("MEMORY.md"), text);
        let shape: Vec<(usize, usize, &str, &str)> =
            chunks.iter().map(|c| (c.start_line, c.end_line, c.context.as_str(), c.text.as_str())).collect();
        assert_eq!(
            shape,
            [
                (4, 4, "Home", "- Lives in Lyon"),
                (5, 6, "Home", "- Has a cat\n  called Miso"),
                (8, 9, "Home", "Likes long walks.\nOn Sundays."),
            ]
        );
        assert!(chunks.iter().all(|c| c.time.is_none()), "core memory does not age");
    }

    #[test]
    fn ids_are_stable_and_distinct_for_repeated_text() {
        let text = "- same\n- same\n";
        let first = chunk_markdown(&source("MEMORY.md"), text);
        let again = chunk_markdown(&source("MEMORY.md"), text);
        assert_eq!(first, again);
        assert_ne!(first[0].id, first[1].id);
        assert_eq!(first[0].id.len(), 12);
    }

    #[test]
    fn history_entries_are_one_chunk_each_with_their_cursor_line_and_time() {
        let text =
            "{\"cursor\": 7, \"timestamp\": \"2026-04-03 10:00\", \"content\": \"- Sam moved to Lyon\"}\nbroken\n";
        let chunks = chunk_history(&source("history.jsonl"), text, 10);
        assert_eq!(chunks.len(), 1);
        assert_eq!((chunks[0].cursor, chunks[0].start_line), (Some(7), 10));
        assert_eq!(chunks[0].time, parse_time("2026-04-03 10:00"));
        assert_eq!(chunks[0].text, "- Sam moved to Lyon");
    }

    #[test]
    fn long_paragraphs_are_cut_at_line_boundaries() {
        let line = "word ".repeat(60);
        let text = format!("{line}\n{line}\n{line}\n{line}\n{line}\n");
        let chunks = chunk_markdown(&source("notes.md"), &text);
        assert!(chunks.len() > 1);
        assert!(chunks.iter().all(|c| c.text.len() <= MAX_CHUNK_BYTES));
    }
}

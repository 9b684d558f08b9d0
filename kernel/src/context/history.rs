//! The `# Recent History` section: entries of `memory/history.jsonl` that Dream has not yet
//! folded into long-term memory (cursor above the one in `memory/.dream_cursor`), newest last.
//!
//! The section is bounded three ways, so one huge summary cannot crowd out the conversation:
//! at most [`MAX_ENTRIES`] entries, each cut to [`MAX_ENTRY_CHARS`], and the whole list to about
//! [`MAX_SECTION_CHARS`], dropping the oldest entries first.

use std::io;
use std::path::Path;

use crate::history::HistoryEntry as Entry;
use crate::history::read_tail;
use crate::message::is_kernel_line;

/// Most entries shown.
pub const MAX_ENTRIES: usize = 50;
/// Longest entry content shown, in characters.
pub const MAX_ENTRY_CHARS: usize = 1_000;
/// Budget for all entry lines together, in characters.
pub const MAX_SECTION_CHARS: usize = 8_000;

/// An entry as a list item; continuation lines are indented so they stay in the item.
fn render_entry(entry: &Entry) -> String {
    // A loop-guard stop archived by an older version is not history worth showing the model.
    let kept: Vec<&str> = entry.content.lines().filter(|line| !is_kernel_line(line)).collect();
    let content = truncate(kept.join("\n").trim(), MAX_ENTRY_CHARS);
    let timestamp = if entry.timestamp.is_empty() { "?" } else { entry.timestamp.as_str() };
    format!("- [{timestamp}] {}", content.replace('\n', "\n  "))
}

/// The cursor Dream has processed up to: the integer in `.dream_cursor`, else 0.
pub(crate) fn dream_cursor(text: Option<&str>) -> u64 {
    text.and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

/// The section for the archive at `path`: its newest entries with a cursor above `since`
/// (Dream's cursor), or `None` when there are none.
///
/// Only the file's tail is read: the archive can hold years of entries when Dream is off.
pub(crate) fn section(path: &Path, since: u64) -> io::Result<Option<String>> {
    let entries = read_tail(path, since, MAX_ENTRIES)?;
    // Cursors count up by one per entry, so the newest one tells how many are unprocessed.
    let total =
        entries.last().map_or(0, |last| usize::try_from(last.cursor.saturating_sub(since)).unwrap_or(usize::MAX));
    Ok(render(&entries, total))
}

/// The `# Recent History` section for `entries` (the newest of `total` unprocessed ones), or
/// `None` when there are none.
pub(crate) fn render(entries: &[Entry], total: usize) -> Option<String> {
    let recent = &entries[entries.len().saturating_sub(MAX_ENTRIES)..];
    let mut lines: Vec<String> = Vec::new();
    let mut used = 0;
    for entry in recent.iter().rev() {
        let line = render_entry(entry);
        let size = line.chars().count() + 1;
        if !lines.is_empty() && used + size > MAX_SECTION_CHARS {
            break;
        }
        used += size;
        lines.push(line);
    }
    if lines.is_empty() {
        return None;
    }
    let omitted = total.max(entries.len()) - lines.len();
    lines.reverse();
    let mut section = String::from(
        "# Recent History\n\nSummaries of recent conversations that are not yet part of long-term memory, oldest first.\n\n",
    );
    if omitted > 0 {
        section.push_str(&format!(
            "({omitted} older entries left out; search memory/history.jsonl with `grep` if you need them.)\n"
        ));
    }
    section.push_str(&lines.join("\n"));
    Some(section)
}

/// `text` cut to at most `max` characters, with a marker when something was cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… (truncated)", text[..at].trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    fn line(cursor: u64, content: &str) -> String {
        serde_json::json!({"cursor": cursor, "timestamp": "2026-04-15 14:58", "content": content}).to_string()
    }

    /// The section the prompt shows for an archive holding `lines`, with Dream's cursor at
    /// `since`: written to a file and read back by the same function the prompt uses.
    fn section_of(lines: &[String], since: u64) -> Option<String> {
        let ws = TempDir::new("history-section");
        let path = ws.write("memory/history.jsonl", &(lines.join("\n") + "\n"));
        section(&path, since).expect("read the archive")
    }

    #[test]
    fn only_entries_after_the_dream_cursor_are_shown() {
        let history = [line(1, "old"), line(2, "seen"), line(3, "new"), line(4, "newer")];
        let section = section_of(&history, dream_cursor(Some("2\n"))).expect("section");
        assert!(section.starts_with("# Recent History\n\n"));
        assert!(!section.contains("] old") && !section.contains("] seen"));
        assert!(section.ends_with("- [2026-04-15 14:58] new\n- [2026-04-15 14:58] newer"), "{section}");
    }

    #[test]
    fn a_missing_or_garbled_cursor_file_means_zero() {
        assert_eq!(dream_cursor(None), 0);
        assert_eq!(dream_cursor(Some("not a number")), 0);
        assert_eq!(dream_cursor(Some(" 17 ")), 17);
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let history =
            [line(1, "a"), "not json".to_owned(), "{\"timestamp\":\"x\"}".to_owned(), String::new(), line(2, "b")];
        let section = section_of(&history, 0).expect("section");
        assert!(section.ends_with("- [2026-04-15 14:58] a\n- [2026-04-15 14:58] b"), "{section}");
        assert_eq!(section.matches("\n- [").count(), 2, "{section}");
    }

    #[test]
    fn at_most_fifty_entries_are_shown_the_newest() {
        let history: Vec<String> = (1..=80).map(|n| line(n, &format!("entry {n}"))).collect();
        let section = section_of(&history, 0).expect("section");
        assert_eq!(section.matches("\n- [").count(), 50);
        assert!(!section.contains("entry 30\n") && section.contains("entry 31\n") && section.ends_with("entry 80"));
        assert!(section.contains("(30 older entries left out"));
    }

    #[test]
    fn huge_entries_are_cut_and_the_section_stays_within_budget() {
        let huge = "x".repeat(50_000);
        let history: Vec<String> = (1..=40).map(|n| line(n, &huge)).collect();
        let section = section_of(&history, 0).expect("section");
        assert!(section.chars().count() < MAX_SECTION_CHARS + 400, "section is {} chars", section.chars().count());
        assert!(section.contains("… (truncated)"));
        assert!(section.matches("\n- [").count() >= 5);
    }

    #[test]
    fn multi_line_content_stays_inside_its_list_item() {
        let section = section_of(&[line(1, "- asked about X\n- decided Y")], 0).expect("section");
        assert!(section.ends_with("- [2026-04-15 14:58] - asked about X\n  - decided Y"), "{section}");
    }

    #[test]
    fn no_entries_means_no_section() {
        assert_eq!(render(&[], 0), None);
        assert_eq!(section_of(&[line(3, "x")], 3), None);
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        assert_eq!(truncate("héllo", 10), "héllo");
        assert_eq!(truncate("héllo wörld", 7), "héllo w… (truncated)");
    }
}

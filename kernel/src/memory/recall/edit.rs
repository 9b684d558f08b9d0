//! Storing and forgetting in the memory files themselves (the index follows on its next
//! sync): core facts as list items of `memory/MEMORY.md`, notes of the day in
//! `memory/YYYY-MM-DD.md`, conversation in `memory/history.jsonl`. Every rewrite is atomic.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::index::Hit;
use super::sources::{self, Category, Format, HISTORY_PATH, MEMORY_PATH};
use crate::fsutil::write_atomic;
use crate::history::{HistoryError, HistoryStore, timestamp_now};

/// A memory file could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// A Markdown file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The archive could not be changed.
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Stores `content` as `category` memory; returns the file written, relative to the
/// workspace.
pub fn store(
    workspace: &Path,
    history: &HistoryStore,
    category: Category,
    content: &str,
    timezone: Option<&str>,
) -> Result<String, EditError> {
    let content = content.trim();
    let now = timestamp_now(timezone);
    match category {
        Category::Core => {
            let item = as_item(content);
            append_markdown(&workspace.join(MEMORY_PATH), "# Memory\n", &item)?;
            Ok(MEMORY_PATH.to_owned())
        }
        Category::Daily => {
            let (day, time) = now.split_once(' ').unwrap_or((now.as_str(), ""));
            let relative = daily_path(day);
            append_markdown(&workspace.join(&relative), &format!("# {day}\n"), &as_item(&format!("{time} {content}")))?;
            Ok(relative)
        }
        Category::Conversation => {
            history.append(&now, content, None)?;
            Ok(HISTORY_PATH.to_owned())
        }
    }
}

/// The daily log of `day` (`YYYY-MM-DD`), relative to the workspace.
pub fn daily_path(day: &str) -> String {
    format!("{}/{day}.md", sources::MEMORY_DIR)
}

/// `text` as one list item: `- ` in front, continuation lines indented.
fn as_item(text: &str) -> String {
    let body = text.trim().trim_start_matches("- ").replace('\n', "\n  ");
    format!("- {body}\n")
}

/// Appends `item` to the Markdown file at `path`, creating it with `header` when missing.
fn append_markdown(path: &Path, header: &str, item: &str) -> Result<(), EditError> {
    let current = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => format!("{header}\n"),
        Err(source) => return Err(EditError::Io { action: "read", path: path.to_path_buf(), source }),
    };
    let mut next = current;
    if !next.is_empty() && !next.ends_with('\n') {
        next.push('\n');
    }
    next.push_str(item);
    write_atomic(path, next.as_bytes()).map_err(|source| EditError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// What was removed from one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The file, relative to the workspace.
    pub path: String,
    /// The text removed.
    pub text: String,
}

/// What to forget.
#[derive(Debug, Clone)]
pub enum Forget<'a> {
    /// Every list item, line or history line containing this text (case-insensitive).
    Matching(&'a str),
    /// One chunk, as the index knows it.
    Chunk(&'a Hit),
}

/// Removes what `what` names from the memory files of `workspace`.
pub fn forget(workspace: &Path, history: &HistoryStore, what: &Forget<'_>) -> Result<Vec<Removed>, EditError> {
    let mut removed = Vec::new();
    for source in sources::list_sources(workspace) {
        if let Forget::Chunk(hit) = what
            && hit.path != source.path
        {
            continue;
        }
        match source.format {
            Format::History => removed.extend(forget_in_history(history, what)?),
            Format::Markdown => {
                let text = match fs::read_to_string(&source.absolute) {
                    Ok(text) => text,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                    Err(source_error) => {
                        return Err(EditError::Io {
                            action: "read",
                            path: source.absolute.clone(),
                            source: source_error,
                        });
                    }
                };
                let (kept, gone) = remove_lines(&source, &text, what);
                if gone.is_empty() {
                    continue;
                }
                write_atomic(&source.absolute, kept.as_bytes()).map_err(|error| EditError::Io {
                    action: "write",
                    path: source.absolute.clone(),
                    source: error,
                })?;
                removed.extend(gone.into_iter().map(|text| Removed { path: source.path.clone(), text }));
            }
        }
    }
    Ok(removed)
}

/// `text` without what `what` names, and the pieces removed. A list item goes whole; in a
/// paragraph only the matching lines go; headings stay.
fn remove_lines(source: &sources::SourceFile, text: &str, what: &Forget<'_>) -> (String, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut drop = vec![false; lines.len()];
    let mut gone = Vec::new();
    for chunk in sources::chunk_markdown(source, text) {
        let range = chunk.start_line - 1..chunk.end_line.min(lines.len());
        match what {
            Forget::Chunk(hit) => {
                if chunk.id == hit.id || chunk.text == hit.text {
                    range.for_each(|i| drop[i] = true);
                    gone.push(chunk.text);
                }
            }
            Forget::Matching(needle) => {
                let needle = needle.to_lowercase();
                if !chunk.text.to_lowercase().contains(&needle) {
                    continue;
                }
                if chunk.text.starts_with(['-', '*', '+']) || chunk.text.starts_with(|c: char| c.is_ascii_digit()) {
                    range.for_each(|i| drop[i] = true);
                    gone.push(chunk.text);
                } else {
                    for i in range.filter(|&i| lines[i].to_lowercase().contains(&needle)) {
                        drop[i] = true;
                        gone.push(lines[i].to_owned());
                    }
                }
            }
        }
    }
    let mut kept: String = lines.iter().zip(&drop).filter(|(_, d)| !**d).map(|(l, _)| format!("{l}\n")).collect();
    if !text.ends_with('\n') && kept.ends_with('\n') {
        kept.pop();
    }
    (kept, gone)
}

/// Forgets in the archive: a named entry whole; for text, the matching lines of each entry
/// (an entry left empty goes).
fn forget_in_history(history: &HistoryStore, what: &Forget<'_>) -> Result<Vec<Removed>, EditError> {
    let mut removed = Vec::new();
    history.rewrite(|entry| match what {
        Forget::Chunk(hit) => {
            if hit.cursor == Some(entry.cursor) {
                removed.push(Removed { path: HISTORY_PATH.to_owned(), text: entry.content.clone() });
                entry.content.clear();
            }
        }
        Forget::Matching(needle) => {
            let needle = needle.to_lowercase();
            if !entry.content.to_lowercase().contains(&needle) {
                return;
            }
            let (gone, kept): (Vec<&str>, Vec<&str>) =
                entry.content.lines().partition(|line| line.to_lowercase().contains(&needle));
            removed.push(Removed { path: HISTORY_PATH.to_owned(), text: gone.join("\n") });
            entry.content = kept.join("\n");
        }
    })?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn core_daily_and_conversation_go_to_their_files() {
        let dir = TempDir::new("recall-store");
        let history = HistoryStore::new(dir.path());
        assert_eq!(store(dir.path(), &history, Category::Core, "Sam lives in Lyon", None).unwrap(), MEMORY_PATH);
        store(dir.path(), &history, Category::Core, "- Cat is called Miso", None).unwrap();
        assert_eq!(dir.read(MEMORY_PATH), "# Memory\n\n- Sam lives in Lyon\n- Cat is called Miso\n");
        let daily = store(dir.path(), &history, Category::Daily, "dentist at 3pm", None).unwrap();
        let today = timestamp_now(None)[..10].to_owned();
        assert_eq!(daily, format!("memory/{today}.md"));
        let log = dir.read(&daily);
        assert!(log.starts_with(&format!("# {today}\n\n- ")) && log.ends_with(" dentist at 3pm\n"), "{log}");
        store(dir.path(), &history, Category::Conversation, "talked about bread", None).unwrap();
        assert_eq!(history.entries().unwrap()[0].content, "talked about bread");
    }

    #[test]
    fn forgetting_text_removes_whole_items_matching_paragraph_lines_and_history_lines() {
        let dir = TempDir::new("recall-forget");
        let history = HistoryStore::new(dir.path());
        dir.write(
            MEMORY_PATH,
            "# Memory\n\n- Door code 4417\n  (back door)\n- Likes tea\n\nThe door code changed.\nKeep it.\n",
        );
        history.append("2026-04-03 10:00", "- asked about the door code\n- bought bread", None).unwrap();
        history.append("2026-04-03 11:00", "- door code again", None).unwrap();
        let removed = forget(dir.path(), &history, &Forget::Matching("DOOR CODE")).unwrap();
        assert_eq!(removed.len(), 4, "{removed:?}");
        assert_eq!(dir.read(MEMORY_PATH), "# Memory\n\n- Likes tea\n\nKeep it.\n");
        let left: Vec<String> = history.entries().unwrap().into_iter().map(|e| e.content).collect();
        assert_eq!(left, ["- bought bread"]);
    }

    #[test]
    fn forgetting_a_chunk_removes_exactly_its_lines() {
        let dir = TempDir::new("recall-forget-chunk");
        let history = HistoryStore::new(dir.path());
        dir.write(MEMORY_PATH, "# Memory\n\n- one\n- two\n- three\n");
        let source = sources::source_for(dir.path(), "MEMORY.md");
        let chunk = sources::chunk_markdown(&source, &dir.read(MEMORY_PATH)).remove(1);
        let hit = Hit {
            id: chunk.id,
            path: chunk.path,
            category: chunk.category,
            start_line: chunk.start_line,
            end_line: chunk.end_line,
            cursor: None,
            time: None,
            context: chunk.context,
            text: chunk.text,
            score: 0.0,
            matched: 0,
        };
        let removed = forget(dir.path(), &history, &Forget::Chunk(&hit)).unwrap();
        assert_eq!(removed, [Removed { path: MEMORY_PATH.into(), text: "- two".into() }]);
        assert_eq!(dir.read(MEMORY_PATH), "# Memory\n\n- one\n- three\n");
    }
}

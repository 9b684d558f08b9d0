//! Where `old_text` occurs in a file for `edit_file`: exactly if possible, otherwise line by
//! line with the whitespace around each line (and curly versus straight quotes) ignored.

/// One place where `old_text` matched, as byte offsets into the (LF-normalised) content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the first matched byte.
    pub start: usize,
    /// Byte offset just past the last matched byte.
    pub end: usize,
    /// The 1-based line the match starts on.
    pub first_line: usize,
    /// The 1-based line the match ends on.
    pub last_line: usize,
}

impl Span {
    /// Whether the match covers the 1-based `line`.
    pub fn covers(&self, line: usize) -> bool {
        (self.first_line..=self.last_line).contains(&line)
    }
}

/// How the matches were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `old_text` occurs verbatim.
    Exact,
    /// Only the trimmed, quote-normalised lines matched.
    Loose,
}

/// Every non-overlapping match of `old` in `content`, exact ones if there are any.
pub fn find(content: &str, old: &str) -> (Vec<Span>, Found) {
    let exact = find_exact(content, old);
    if !exact.is_empty() {
        return (exact, Found::Exact);
    }
    (find_loose(content, old), Found::Loose)
}

fn find_exact(content: &str, old: &str) -> Vec<Span> {
    if old.is_empty() {
        return Vec::new();
    }
    let mut spans = Vec::new();
    let (mut line, mut counted_to) = (1, 0);
    for (start, matched) in content.match_indices(old) {
        line += count_newlines(&content[counted_to..start]);
        counted_to = start;
        let inner = matched.strip_suffix('\n').unwrap_or(matched);
        spans.push(Span {
            start,
            end: start + matched.len(),
            first_line: line,
            last_line: line + count_newlines(inner),
        });
    }
    spans
}

fn count_newlines(text: &str) -> usize {
    text.bytes().filter(|b| *b == b'\n').count()
}

/// A line as loose matching sees it: trimmed, with curly quotes made straight.
pub fn loosen(line: &str) -> String {
    line.trim().chars().map(straight_quote).collect()
}

/// The straight quote for a curly one; other characters unchanged.
pub fn straight_quote(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' => '\'',
        '\u{201c}' | '\u{201d}' => '"',
        other => other,
    }
}

/// Lines of `content` with the byte offset each starts at (splitting on `\n` only).
fn lines_with_offsets(content: &str) -> Vec<(usize, &str)> {
    let mut offset = 0;
    content
        .split('\n')
        .map(|line| {
            let start = offset;
            offset += line.len() + 1;
            (start, line)
        })
        .collect()
}

fn find_loose(content: &str, old: &str) -> Vec<Span> {
    let wants_newline = old.ends_with('\n');
    let wanted: Vec<String> = old.strip_suffix('\n').unwrap_or(old).split('\n').map(loosen).collect();
    if wanted.iter().all(String::is_empty) {
        return Vec::new();
    }
    let lines = lines_with_offsets(content);
    let loose: Vec<String> = lines.iter().map(|(_, l)| loosen(l)).collect();
    let size = wanted.len();
    let mut spans = Vec::new();
    let mut i = 0;
    while i + size <= lines.len() {
        if loose[i..i + size] != wanted[..] {
            i += 1;
            continue;
        }
        let (last_start, last_line) = lines[i + size - 1];
        let mut end = last_start + last_line.len();
        if wants_newline && end < content.len() {
            end += 1;
        }
        spans.push(Span { start: lines[i].0, end, first_line: i + 1, last_line: i + size });
        i += size;
    }
    spans
}

/// `new` re-indented the way a loose match was: when the file's lines are indented more than
/// `old`'s, the same extra indentation goes in front of each non-empty line of `new`.
pub fn reindent(old: &str, matched: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.trim_end_matches('\n').split('\n').collect();
    let matched_lines: Vec<&str> = matched.trim_end_matches('\n').split('\n').collect();
    if old_lines.len() != matched_lines.len() {
        return new.to_owned();
    }
    let Some((ours, theirs)) =
        old_lines.iter().zip(&matched_lines).find(|(o, m)| !o.trim().is_empty() && !m.trim().is_empty())
    else {
        return new.to_owned();
    };
    let (ours, theirs) = (leading_whitespace(ours), leading_whitespace(theirs));
    match theirs.strip_prefix(ours) {
        Some(extra) if !extra.is_empty() => new
            .split('\n')
            .map(|line| if line.is_empty() { String::new() } else { format!("{extra}{line}") })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => new.to_owned(),
    }
}

fn leading_whitespace(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_matches_come_with_their_line_numbers() {
        let (spans, found) = find("a\nfoo\nb\nfoo\nbar\n", "foo");
        assert_eq!(found, Found::Exact);
        assert_eq!(spans.iter().map(|s| (s.first_line, s.last_line)).collect::<Vec<_>>(), [(2, 2), (4, 4)]);
        let (spans, _) = find("x\ny\nz\n", "y\nz\n");
        assert_eq!(
            (spans[0].first_line, spans[0].last_line),
            (2, 3),
            "a trailing newline does not reach into the next line"
        );
    }

    #[test]
    fn indentation_and_curly_quotes_are_ignored_when_nothing_matches_exactly() {
        let content = "def f():\n        print(\u{201c}hi\u{201d})\n        return 1\n";
        let (spans, found) = find(content, "    print(\"hi\")\n    return 1");
        assert_eq!(found, Found::Loose);
        assert_eq!(spans.len(), 1);
        assert_eq!(&content[spans[0].start..spans[0].end], "        print(\u{201c}hi\u{201d})\n        return 1");
        assert!(spans[0].covers(2) && spans[0].covers(3) && !spans[0].covers(1));
    }

    #[test]
    fn blank_old_text_never_matches_loosely() {
        assert!(find("a\n\n\nb", "  \n ").0.is_empty());
    }

    #[test]
    fn a_loose_match_reindents_the_replacement_by_the_extra_indentation() {
        assert_eq!(reindent("x = 1\ny = 2", "    x = 1\n    y = 2", "x = 3\n\ny = 4"), "    x = 3\n\n    y = 4");
        assert_eq!(reindent("  x = 1", "  x = 1", "x = 3"), "x = 3", "same indentation: unchanged");
        assert_eq!(reindent("a\nb", "a", "c"), "c", "different line counts: unchanged");
    }
}

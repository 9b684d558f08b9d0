//! Splitting a long Markdown reply into Discord messages of at most 2000 characters: at
//! paragraph or line boundaries where possible, and never leaving a ``` code block open — a
//! block cut between two messages is closed at the end of one and reopened (with its language)
//! at the start of the next.

/// The most characters Discord takes in one message.
pub const MESSAGE_LIMIT: usize = 2000;

/// The closing fence added to a part that ends inside a code block.
const CLOSING_FENCE: &str = "\n```";

/// One line of the text and the code block around it.
#[derive(Debug, Clone)]
struct Line {
    text: String,
    /// What joins it to the previous line: a newline, or nothing for a piece of a line that
    /// was too long to fit in a message.
    glue: &'static str,
    /// The fence line that opened the code block this line is in (the opening line itself is
    /// not in one; the closing line is).
    inside: Option<String>,
    /// The fence line of the code block still open after this line.
    open_after: Option<String>,
}

/// Splits `text` into parts of at most `limit` characters (`limit` ≥ 20).
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    let text = text.trim_matches('\n');
    if text.chars().count() <= limit {
        return if text.trim().is_empty() { Vec::new() } else { vec![text.to_owned()] };
    }
    let lines = annotate(text, limit);
    let mut parts = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let end = best_end(&lines, start, limit);
        let part = render(&lines[start..end]);
        let part = part.trim_matches('\n');
        if !part.trim().is_empty() {
            parts.extend(chop(part, limit));
        }
        start = end;
    }
    parts
}

/// The lines of `text` with their code blocks, lines too long for a message cut in pieces.
fn annotate(text: &str, limit: usize) -> Vec<Line> {
    // Room for a reopened fence and a closing one around a piece of a long line.
    let piece = limit - (limit / 4).min(64);
    let mut lines = Vec::new();
    let mut open: Option<String> = None;
    for raw in text.split('\n') {
        let inside = open.clone();
        if is_fence(raw) {
            open = if open.is_some() { None } else { Some(raw.trim().to_owned()) };
        }
        for (index, text) in cut_line(raw, piece).into_iter().enumerate() {
            let glue = if index == 0 { "\n" } else { "" };
            lines.push(Line { text, glue, inside: inside.clone(), open_after: open.clone() });
        }
    }
    lines
}

/// A line that opens or closes a code block.
fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// A line cut into pieces of at most `max` characters, preferably after a space.
fn cut_line(line: &str, max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = line;
    while rest.chars().count() > max {
        let hard = rest.char_indices().nth(max).map_or(rest.len(), |(at, _)| at);
        let at = match rest[..hard].rfind(' ') {
            Some(space) if space >= hard / 2 => space + 1,
            _ => hard,
        };
        pieces.push(rest[..at].to_owned());
        rest = &rest[at..];
    }
    pieces.push(rest.to_owned());
    pieces
}

/// Where the part starting at `start` ends (exclusive): the last paragraph break that fits
/// and fills at least half a message, else the last line break outside a code block that
/// does, else as many lines as fit (at least one).
fn best_end(lines: &[Line], start: usize, limit: usize) -> usize {
    let prefix = lines[start].inside.as_ref().map_or(0, |fence| fence.chars().count() + 1);
    let mut body = 0;
    let (mut any, mut outside, mut paragraph) = (None, None, None);
    for end in start + 1..=lines.len() {
        let line = &lines[end - 1];
        body += line.text.chars().count() + if end - 1 == start { 0 } else { line.glue.len() };
        let suffix = if line.open_after.is_some() { CLOSING_FENCE.len() } else { 0 };
        let size = prefix + body + suffix;
        if size > limit {
            break;
        }
        any = Some(end);
        let half_full = size >= limit / 2;
        if line.open_after.is_none() && lines.get(end).is_none_or(|next| next.glue == "\n") && half_full {
            outside = Some(end);
            if is_paragraph_break(lines, end) {
                paragraph = Some(end);
            }
        }
    }
    paragraph.or(outside).or(any).unwrap_or(start + 1)
}

/// Whether the text may be cut before line `end` at a paragraph's edge: a blank line on
/// either side, a code block just closed or about to open, or the end of the text.
fn is_paragraph_break(lines: &[Line], end: usize) -> bool {
    let Some(next) = lines.get(end) else { return true };
    let last = &lines[end - 1];
    last.text.trim().is_empty() || next.text.trim().is_empty() || last.inside.is_some() || is_fence(&next.text)
}

/// A part's text: its lines, with the code block reopened at the start and closed at the end
/// if the part begins or ends inside one.
fn render(lines: &[Line]) -> String {
    let mut text = String::new();
    if let Some(fence) = lines.first().and_then(|line| line.inside.as_ref()) {
        text.push_str(fence);
        text.push('\n');
    }
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            text.push_str(line.glue);
        }
        text.push_str(&line.text);
    }
    if lines.last().is_some_and(|line| line.open_after.is_some()) {
        text.push_str(CLOSING_FENCE);
    }
    text
}

/// The last resort for a part still over the limit (a fence line longer than a message):
/// pieces of exactly `limit` characters.
fn chop(part: &str, limit: usize) -> Vec<String> {
    let chars: Vec<char> = part.chars().collect();
    chars.chunks(limit).map(|chunk| chunk.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fences(part: &str) -> usize {
        part.lines().filter(|line| is_fence(line)).count()
    }

    fn prose(words: usize) -> String {
        (0..words).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn a_short_reply_is_one_part_and_an_empty_one_is_none() {
        assert_eq!(split_message("hello", 2000), ["hello"]);
        assert!(split_message("\n \n", 2000).is_empty());
    }

    #[test]
    fn paragraphs_are_kept_whole_when_they_fit() {
        let paragraphs = [prose(100), prose(100), prose(100)];
        let text = paragraphs.join("\n\n");
        let parts = split_message(&text, 1500);
        assert_eq!(parts.len(), 2, "{parts:#?}");
        assert_eq!(parts[0], paragraphs[..2].join("\n\n"));
        assert_eq!(parts[1], paragraphs[2]);
    }

    #[test]
    fn a_code_block_cut_between_parts_is_closed_and_reopened_with_its_language() {
        let code: Vec<String> = (0..80).map(|i| format!("let value_{i:03} = compute({i});")).collect();
        let text = format!("Here is the code:\n\n```rust\n{}\n```\n\nThat is all.", code.join("\n"));
        let parts = split_message(&text, 1000);
        assert!(parts.len() >= 3, "{parts:#?}");
        for part in &parts {
            assert!(part.chars().count() <= 1000);
            assert_eq!(fences(part) % 2, 0, "unbalanced fences in {part}");
        }
        assert!(parts[1].starts_with("```rust\n"), "{}", parts[1]);
        let rejoined: String = parts.concat();
        for line in &code {
            assert!(rejoined.contains(line.as_str()), "lost {line}");
        }
        assert!(parts.last().unwrap().ends_with("That is all."));
    }

    #[test]
    fn a_line_longer_than_a_message_is_cut_at_spaces_or_anywhere_when_it_has_none() {
        let spaced = prose(1000);
        let parts = split_message(&spaced, 2000);
        assert!(parts.iter().all(|part| part.chars().count() <= 2000));
        assert_eq!(parts.concat(), spaced);
        let solid = "x".repeat(4100);
        let parts = split_message(&solid, 2000);
        assert!(parts.iter().all(|part| part.chars().count() <= 2000));
        assert_eq!(parts.concat(), solid);
    }

    #[test]
    fn characters_are_counted_not_bytes() {
        let text = "é".repeat(1999);
        assert_eq!(split_message(&text, 2000), [text]);
    }

    #[test]
    fn every_part_fits_whatever_the_text() {
        let text = format!("{}\n```\n{}\n{}\n```\n{}", prose(300), "y".repeat(2500), prose(200), prose(50));
        for limit in [20, 100, 2000] {
            for part in split_message(&text, limit) {
                assert!(part.chars().count() <= limit, "{} > {limit}", part.chars().count());
            }
        }
    }
}

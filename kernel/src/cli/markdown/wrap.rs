//! Wrapping styled terminal text at word boundaries: escape sequences take no room, and a
//! style open at a line break is closed before it and opened again after the indent, so the
//! indent and anything drawn around the line stay unstyled.

use unicode_width::UnicodeWidthStr;

use super::RESET;

/// The columns `text` takes on a terminal, escape sequences left out.
pub fn visible_width(text: &str) -> usize {
    pieces(text).filter(|piece| !piece.starts_with('\x1b')).map(UnicodeWidthStr::width).sum()
}

/// `text` (one line, styled) broken before words that would pass `width` columns; every
/// line after the first starts with `indent`, which `width` includes. A word wider than a
/// whole line stays whole on a line of its own.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let room = width.max(visible_width(indent) + 1);
    let mut out = String::with_capacity(text.len() + 8);
    // Escape sequences in force (since the last reset).
    let mut open: Vec<&str> = Vec::new();
    let mut column = 0;
    // Spaces seen since the last word, written only if another word follows on this line.
    let mut space = String::new();
    for word in words(text) {
        if word.text.is_empty() {
            space.push_str(word.space);
            continue;
        }
        let fits = column == 0 || column + space.len() + word.width <= room;
        if fits {
            out.push_str(&space);
            column += space.len();
        } else {
            if !open.is_empty() {
                out.push_str(RESET);
            }
            out.push('\n');
            out.push_str(indent);
            out.extend(open.iter().copied());
            column = visible_width(indent);
        }
        space.clear();
        space.push_str(word.space);
        for piece in pieces(word.text) {
            if piece == RESET {
                open.clear();
            } else if piece.starts_with('\x1b') {
                open.push(piece);
            }
            out.push_str(piece);
        }
        column += word.width;
    }
    out
}

/// A run of non-space text (escape sequences included) and the spaces after it.
struct Word<'a> {
    text: &'a str,
    width: usize,
    space: &'a str,
}

/// Splits `text` into words and the spaces after each; leading spaces come as a word with
/// no text.
fn words(text: &str) -> impl Iterator<Item = Word<'_>> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.find(' ').unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        let spaces = after.len() - after.trim_start_matches(' ').len();
        let (space, next) = after.split_at(spaces);
        rest = next;
        Some(Word { text: word, width: visible_width(word), space })
    })
}

/// `text` cut into escape sequences (`ESC [ … letter`) and the plain text between them.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = if rest.starts_with('\x1b') {
            rest.char_indices().skip(1).find(|(_, c)| c.is_ascii_alphabetic()).map_or(rest.len(), |(i, _)| i + 1)
        } else {
            rest.find('\x1b').unwrap_or(rest.len())
        };
        let (piece, next) = rest.split_at(end);
        rest = next;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOLD: &str = "\x1b[1m";

    #[test]
    fn lines_break_between_words_never_inside_one() {
        assert_eq!(wrap("the quick brown fox jumps over", 10, ""), "the quick\nbrown fox\njumps over");
        assert_eq!(wrap("short", 10, ""), "short");
    }

    #[test]
    fn continuation_lines_start_with_the_indent() {
        assert_eq!(wrap("• one two three four", 10, "  "), "• one two\n  three\n  four");
    }

    #[test]
    fn escape_sequences_take_no_room_and_a_style_is_carried_over_the_break() {
        let text = format!("aa {BOLD}bb cc{RESET} dd");
        assert_eq!(wrap(&text, 5, "> "), format!("aa {BOLD}bb{RESET}\n> {BOLD}cc{RESET}\n> dd"));
        assert_eq!(visible_width(&text), 11);
    }

    #[test]
    fn a_word_longer_than_the_line_stays_whole() {
        assert_eq!(
            wrap("see https://example.com/a/long/path now", 12, ""),
            "see\nhttps://example.com/a/long/path\nnow"
        );
    }

    #[test]
    fn wide_characters_count_double() {
        assert_eq!(visible_width("日本語"), 6);
        assert_eq!(wrap("日本 語語 本本", 6, ""), "日本\n語語\n本本");
    }
}

//! Cutting a long mrkdwn text into messages Slack takes whole: parts end at line boundaries,
//! and a code block cut in two is closed at the end of one part and reopened in the next.

use crate::mrkdwn::is_fence;

/// The most characters one posted message holds (Slack truncates `text` past 4000).
pub const MESSAGE_LIMIT: usize = 3900;

/// What a part may need besides its lines: a reopened fence and a closing one.
const FENCE_ROOM: usize = "```\n".len() + "\n```".len();

/// `text` in parts of at most `limit` characters (`limit` must leave room for fences: > 16),
/// none of them empty.
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    let text = text.trim_matches('\n');
    if text.chars().count() <= limit {
        return if text.trim().is_empty() { Vec::new() } else { vec![text.to_owned()] };
    }
    let mut parts = Parts { limit, done: Vec::new(), lines: Vec::new(), length: 0, in_fence: false };
    let line_limit = limit - FENCE_ROOM;
    for line in text.split('\n') {
        for (index, piece) in pieces(line, line_limit).into_iter().enumerate() {
            if index > 0 {
                // A line too long for one message goes on at the start of the next one.
                parts.cut();
            }
            parts.push_line(piece);
        }
    }
    parts.finish()
}

/// The parts made so far and the one being filled.
struct Parts {
    limit: usize,
    done: Vec<String>,
    /// Lines of the part being filled.
    lines: Vec<String>,
    /// Characters of those lines joined with newlines.
    length: usize,
    /// Whether the text is inside a code block after the last line pushed.
    in_fence: bool,
}

impl Parts {
    fn push_line(&mut self, line: String) {
        let length = line.chars().count();
        let opens_or_closes = is_fence(&line);
        let inside_after = self.in_fence != opens_or_closes;
        let closing_room = if inside_after { "\n```".len() } else { 0 };
        let needed = if self.lines.is_empty() { length } else { self.length + 1 + length };
        if !self.lines.is_empty() && needed + closing_room > self.limit {
            self.cut();
        }
        self.length = if self.lines.is_empty() { length } else { self.length + 1 + length };
        self.lines.push(line);
        self.in_fence = inside_after;
    }

    /// Ends the current part, closing an open code block and reopening it in the next part.
    fn cut(&mut self) {
        if self.in_fence && self.lines.len() > 1 && self.lines.last().is_some_and(|line| is_fence(line)) {
            // The block opened on the last line: move the opening fence to the next part.
            let opening = self.lines.pop().unwrap_or_default();
            self.keep_current();
            self.length = opening.chars().count();
            self.lines.push(opening);
            return;
        }
        if self.in_fence {
            self.lines.push("```".to_owned());
        }
        self.keep_current();
        if self.in_fence {
            self.lines.push("```".to_owned());
            self.length = 3;
        }
    }

    fn keep_current(&mut self) {
        let part = std::mem::take(&mut self.lines).join("\n");
        self.length = 0;
        let part = part.trim_matches('\n');
        if !part.trim().is_empty() {
            self.done.push(part.to_owned());
        }
    }

    fn finish(mut self) -> Vec<String> {
        self.keep_current();
        self.done
    }
}

/// `line` cut into pieces of at most `limit` characters, at spaces where possible.
fn pieces(line: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    while rest.len() > limit {
        let cut = rest[..limit].iter().rposition(|c| *c == ' ').filter(|&at| at > limit / 2).map_or(limit, |at| at + 1);
        out.push(rest[..cut].iter().collect());
        rest = rest.split_off(cut);
    }
    out.push(rest.into_iter().collect());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(count: usize, width: usize) -> String {
        (0..count).map(|n| format!("{n:0>width$}")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn a_short_text_is_one_part_and_an_empty_one_none() {
        assert_eq!(split_message("hello\nworld", 100), ["hello\nworld"]);
        assert!(split_message("\n \n", 100).is_empty());
    }

    #[test]
    fn a_long_text_is_cut_at_line_boundaries_within_the_limit() {
        let text = lines(30, 9);
        let parts = split_message(&text, 50);
        assert!(parts.iter().all(|part| part.chars().count() <= 50), "{parts:?}");
        assert_eq!(parts.join("\n"), text);
        assert!(parts.iter().all(|part| part.split('\n').all(|line| line.len() == 9)));
    }

    #[test]
    fn a_code_block_cut_in_two_is_closed_and_reopened() {
        let text = format!("intro\n```\n{}\n```\noutro", lines(12, 9));
        let parts = split_message(&text, 60);
        assert!(parts.len() > 2, "{parts:?}");
        for part in &parts {
            assert!(part.chars().count() <= 60, "{part:?}");
            let fences = part.lines().filter(|line| is_fence(line)).count();
            assert_eq!(fences % 2, 0, "unbalanced fences in {part:?}");
        }
        let rejoined: String = parts.join("\n").replace("\n```\n```\n", "\n");
        assert_eq!(rejoined, text);
    }

    #[test]
    fn a_line_longer_than_the_limit_is_cut_at_spaces_or_else_anywhere() {
        let words = "word ".repeat(40);
        let parts = split_message(words.trim_end(), 40);
        assert!(parts.iter().all(|part| part.chars().count() <= 40 && !part.starts_with(' ')), "{parts:?}");
        assert_eq!(parts.concat(), words.trim_end());
        let solid = "x".repeat(100);
        let parts = split_message(&solid, 40);
        assert!(parts.iter().all(|part| part.chars().count() <= 40));
        assert_eq!(parts.concat(), solid);
    }

    #[test]
    fn a_code_block_opening_on_the_last_line_of_a_part_moves_to_the_next_part() {
        let text = format!("{}\n```\n{}\n```", "a".repeat(30), "b".repeat(30));
        let parts = split_message(&text, 40);
        assert_eq!(parts, ["a".repeat(30), format!("```\n{}\n```", "b".repeat(30))]);
    }

    #[test]
    fn limits_count_characters_not_bytes() {
        let text = "é".repeat(30);
        assert_eq!(split_message(&text, 30), vec![text]);
    }
}

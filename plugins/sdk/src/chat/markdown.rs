//! Pieces of Markdown as models write it that every channel converting it (to Slack's mrkdwn,
//! to Telegram's HTML) recognises the same way: thematic breaks, runs of a marker, code spans.

use std::ops::Range;

/// A thematic break: three or more `-`, `*` or `_`, spaces allowed between (`---`, `* * *`).
pub fn is_rule(line: &str) -> bool {
    let marks: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && ['-', '*', '_'].iter().any(|mark| marks.iter().all(|c| c == mark))
}

/// How many times `mark` repeats from `chars[at]` on.
pub fn run_length(chars: &[char], at: usize, mark: char) -> usize {
    chars[at..].iter().take_while(|&&c| c == mark).count()
}

/// A code span: `` `code` ``, or with as many backticks around as it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSpan {
    /// Where its text is, between the backticks.
    pub text: Range<usize>,
    /// The index just after its closing backticks.
    pub end: usize,
}

/// The code span opened by the backticks at `chars[at]`: closed by the next run of exactly as
/// many backticks; `None` when no run closes it.
pub fn code_span_at(chars: &[char], at: usize) -> Option<CodeSpan> {
    let width = run_length(chars, at, '`');
    let mut k = at + width;
    while k < chars.len() {
        if chars[k] != '`' {
            k += 1;
            continue;
        }
        let run = run_length(chars, k, '`');
        if run == width {
            return Some(CodeSpan { text: at + width..k, end: k + run });
        }
        k += run;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(text: &str) -> Vec<char> {
        text.chars().collect()
    }

    #[test]
    fn rules_are_three_or_more_of_one_mark() {
        for rule in ["---", "***", "_ _ _", " - - - - "] {
            assert!(is_rule(rule), "{rule}");
        }
        for other in ["--", "-*-", "--- x", ""] {
            assert!(!is_rule(other), "{other}");
        }
    }

    #[test]
    fn a_code_span_is_closed_by_a_run_of_as_many_backticks() {
        let text = chars("a ``code with ` tick`` b");
        let span = code_span_at(&text, 2).unwrap();
        assert_eq!(text[span.text.clone()].iter().collect::<String>(), "code with ` tick");
        assert_eq!(span.end, text.len() - 2);
        assert_eq!(run_length(&text, 2, '`'), 2);
    }

    #[test]
    fn backticks_that_nothing_closes_are_no_code_span() {
        assert_eq!(code_span_at(&chars("a lone ` tick"), 7), None);
        assert_eq!(code_span_at(&chars("``a`"), 0), None);
    }
}

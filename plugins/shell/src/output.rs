//! A command's output: collected in bounded memory, then rendered as the text the model reads.
//!
//! The rendered text is stdout, then stderr under a `[stderr]` line, then `[exit code N]` when
//! the code is not zero; `(no output)` stands in when both streams are blank. Text longer than
//! [`MAX_CHARS`] keeps its first and last halves, with a line saying how many characters were
//! cut between them.

use std::collections::VecDeque;

/// The most characters of output the model receives.
pub const MAX_CHARS: usize = 10_000;

/// Bytes of each stream kept from its start, and again from its end.
const KEEP_BYTES: usize = 64 * 1024;

// Whatever a capture drops lies more than `MAX_CHARS / 2` characters from both ends of the
// rendered text (a kept run of bytes decodes to at least a quarter as many characters), so it
// always falls inside the part `shorten` cuts out and never shows as a seam.
const _: () = assert!(MAX_CHARS / 2 <= KEEP_BYTES / 4);

/// One output stream as read so far: its first and last bytes, and a count of those between.
#[derive(Debug, Default)]
pub struct Capture {
    /// Up to `KEEP_BYTES` from the start of the stream.
    head: Vec<u8>,
    /// Up to `KEEP_BYTES` from the end of the stream (so far).
    tail: VecDeque<u8>,
    /// Bytes dropped between `head` and `tail`.
    dropped_bytes: usize,
    /// Characters among the dropped bytes (bytes that start a UTF-8 sequence).
    dropped_chars: usize,
}

impl Capture {
    /// Adds bytes read from the stream, dropping from the middle to stay within bounds.
    pub fn push(&mut self, bytes: &[u8]) {
        let room = KEEP_BYTES.saturating_sub(self.head.len());
        let (first, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(first);
        if rest.len() >= KEEP_BYTES {
            // Everything in the tail and the start of `rest` is about to be dropped anyway.
            let old_tail = std::mem::take(&mut self.tail);
            self.count_dropped(old_tail.iter().copied());
            let (dropped, kept) = rest.split_at(rest.len() - KEEP_BYTES);
            self.count_dropped(dropped.iter().copied());
            self.tail.extend(kept);
            return;
        }
        self.tail.extend(rest);
        let excess = self.tail.len().saturating_sub(KEEP_BYTES);
        let dropped: Vec<u8> = self.tail.drain(..excess).collect();
        self.count_dropped(dropped.into_iter());
    }

    /// Whether nothing but whitespace was captured.
    pub fn is_blank(&self) -> bool {
        self.dropped_bytes == 0 && self.head.iter().chain(self.tail.iter()).all(u8::is_ascii_whitespace)
    }

    /// The kept text, decoded lossily as UTF-8, and how many characters were dropped from it.
    pub fn text(&self) -> (String, usize) {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if self.dropped_bytes == 0 {
            let whole = [self.head.as_slice(), tail.as_slice()].concat();
            return (String::from_utf8_lossy(&whole).into_owned(), 0);
        }
        let text = String::from_utf8_lossy(&self.head).into_owned() + &String::from_utf8_lossy(&tail);
        (text, self.dropped_chars)
    }

    fn count_dropped(&mut self, bytes: impl Iterator<Item = u8>) {
        for byte in bytes {
            self.dropped_bytes += 1;
            if !is_continuation_byte(byte) {
                self.dropped_chars += 1;
            }
        }
    }
}

/// Whether `byte` continues a UTF-8 sequence rather than starting one.
fn is_continuation_byte(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// Renders a command's output; `exit_code` is shown when it is given and not zero.
pub fn render(stdout: &Capture, stderr: &Capture, exit_code: Option<i32>) -> String {
    let mut parts = Vec::new();
    let mut dropped = 0;
    if !stdout.is_blank() {
        let (text, lost) = stdout.text();
        parts.push(text.trim_end_matches(['\n', '\r']).to_owned());
        dropped += lost;
    }
    if !stderr.is_blank() {
        let (text, lost) = stderr.text();
        parts.push(format!("[stderr]\n{}", text.trim_end_matches(['\n', '\r'])));
        dropped += lost;
    }
    if parts.is_empty() {
        parts.push("(no output)".to_owned());
    }
    if let Some(code) = exit_code.filter(|code| *code != 0) {
        parts.push(format!("[exit code {code}]"));
    }
    shorten(&parts.join("\n"), dropped)
}

/// Keeps the first and last `MAX_CHARS / 2` characters of `text` when its full length, counting
/// `dropped` characters already left out of it, exceeds [`MAX_CHARS`].
pub fn shorten(text: &str, dropped: usize) -> String {
    let kept = text.chars().count();
    let total = kept + dropped;
    if total <= MAX_CHARS {
        return text.to_owned();
    }
    let half = MAX_CHARS / 2;
    let head_end = byte_offset(text, half);
    let tail_start = byte_offset(text, kept.saturating_sub(half)).max(head_end);
    let shown = text[..head_end].chars().count() + text[tail_start..].chars().count();
    let cut = total - shown;
    format!("{}\n\n[... {cut} characters cut from the middle ...]\n\n{}", &text[..head_end], &text[tail_start..])
}

/// The byte offset of character number `index` in `text` (its length when past the end).
fn byte_offset(text: &str, index: usize) -> usize {
    text.char_indices().nth(index).map_or(text.len(), |(offset, _)| offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(bytes: &[u8]) -> Capture {
        let mut capture = Capture::default();
        capture.push(bytes);
        capture
    }

    #[test]
    fn stdout_comes_first_then_stderr_under_a_heading_then_a_non_zero_exit_code() {
        let text = render(&capture(b"out\n"), &capture(b"err\n"), Some(2));
        assert_eq!(text, "out\n[stderr]\nerr\n[exit code 2]");
    }

    #[test]
    fn a_zero_exit_code_is_not_mentioned() {
        assert_eq!(render(&capture(b"hello\n"), &capture(b""), Some(0)), "hello");
    }

    #[test]
    fn blank_output_reads_as_no_output() {
        assert_eq!(render(&capture(b"\n"), &capture(b"  \n"), Some(0)), "(no output)");
        assert_eq!(render(&capture(b""), &capture(b""), Some(1)), "(no output)\n[exit code 1]");
    }

    #[test]
    fn invalid_utf8_is_replaced_rather_than_refused() {
        assert_eq!(render(&capture(b"a\xffb"), &capture(b""), None), "a\u{fffd}b");
    }

    #[test]
    fn text_at_the_limit_is_left_whole() {
        let text = "x".repeat(MAX_CHARS);
        assert_eq!(shorten(&text, 0), text);
    }

    #[test]
    fn long_text_keeps_both_ends_and_says_how_much_was_cut() {
        let text = format!("{}{}{}", "a".repeat(6_000), "#".repeat(3_000), "z".repeat(6_000));
        let short = shorten(&text, 0);
        assert!(short.starts_with(&"a".repeat(5_000)), "{short}");
        assert!(short.ends_with(&"z".repeat(5_000)));
        assert!(short.contains("[... 5000 characters cut from the middle ...]"), "{short}");
        assert!(!short.contains('#'));
    }

    #[test]
    fn shortening_counts_characters_not_bytes() {
        let text = "é".repeat(MAX_CHARS + 10);
        assert!(shorten(&text, 0).contains("[... 10 characters cut"));
    }

    #[test]
    fn a_huge_stream_keeps_bounded_ends_and_counts_what_it_dropped() {
        let mut capture = Capture::default();
        for _ in 0..100 {
            capture.push(&[b'a'; 10_000]);
        }
        let (text, dropped) = capture.text();
        assert_eq!(text.len(), 2 * KEEP_BYTES);
        assert_eq!(dropped, 1_000_000 - 2 * KEEP_BYTES);
        let short = render(&capture, &Capture::default(), Some(0));
        assert!(short.contains(&format!("[... {} characters cut", 1_000_000 - MAX_CHARS)), "{}", &short[4_990..5_100]);
    }

    #[test]
    fn dropped_multibyte_characters_are_counted_once_each() {
        let mut capture = Capture::default();
        capture.push("é".repeat(200_000).as_bytes());
        let (text, dropped) = capture.text();
        assert_eq!(text.chars().count() + dropped, 200_000);
    }
}

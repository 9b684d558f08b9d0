//! Telling text from binary, reading lines with bounded memory and a bounded scan, and
//! shortening long lines.

use std::borrow::Cow;
use std::io::BufRead;

/// How many leading bytes the binary check looks at.
pub const SAMPLE_BYTES: usize = 8192;

/// Whether `sample` (the start of a file) looks like binary data rather than text.
///
/// A NUL byte is decisive; otherwise a file is binary when more than a fifth of the sample
/// is control characters other than tab, newline, vertical tab, form feed and carriage
/// return. Bytes of UTF-8 multi-byte sequences are never counted as control characters.
pub fn looks_binary(sample: &[u8]) -> bool {
    let sample = &sample[..sample.len().min(SAMPLE_BYTES)];
    if sample.is_empty() {
        return false;
    }
    if sample.contains(&0) {
        return true;
    }
    let control = sample.iter().filter(|b| **b < 9 || (**b > 13 && **b < 32)).count();
    control * 5 > sample.len()
}

/// One raw line (without its `\n`) as text: a trailing `\r` dropped, bad UTF-8 replaced.
pub fn decode_line(raw: &[u8]) -> Cow<'_, str> {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    String::from_utf8_lossy(raw)
}

/// `line` cut to at most `max` characters, with a marker saying that it was cut.
pub fn shorten(line: &str, max: usize) -> Cow<'_, str> {
    match line.char_indices().nth(max) {
        None => Cow::Borrowed(line),
        Some((cut, _)) => Cow::Owned(format!("{}… [line cut at {max} characters]", &line[..cut])),
    }
}

/// How reading one line ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRead {
    /// Nothing was left to read.
    End,
    /// A whole line was read (the last one may lack its `\n`).
    Line,
    /// The line goes on past the bytes the caller allowed; what follows is still unread.
    Unfinished,
}

/// Reads the next line (without its `\n`) into `buf`, keeping at most `cap` bytes of it, so
/// one enormous line cannot exhaust memory, and looking at no more than `scan` bytes, so one
/// enormous line (say the hole of a sparse file) cannot take minutes either.
pub fn read_line_within(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
    scan: u64,
) -> std::io::Result<LineRead> {
    buf.clear();
    let mut scanned: u64 = 0;
    loop {
        if scanned >= scan {
            return Ok(LineRead::Unfinished);
        }
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(if scanned > 0 { LineRead::Line } else { LineRead::End });
        }
        let allowed = usize::try_from(scan - scanned).unwrap_or(usize::MAX);
        let chunk = &chunk[..chunk.len().min(allowed)];
        let newline = chunk.iter().position(|b| *b == b'\n');
        let body = &chunk[..newline.unwrap_or(chunk.len())];
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&body[..body.len().min(room)]);
        let used = newline.map_or(chunk.len(), |at| at + 1);
        reader.consume(used);
        scanned += used as u64;
        if newline.is_some() {
            return Ok(LineRead::Line);
        }
    }
}

/// Counts the lines left in `reader`; a last line without a final `\n` counts too.
pub fn count_lines(reader: &mut impl BufRead) -> std::io::Result<usize> {
    let mut lines = 0;
    let mut open_line = false;
    loop {
        let chunk = reader.fill_buf()?;
        let Some(&last) = chunk.last() else { break };
        lines += chunk.iter().filter(|b| **b == b'\n').count();
        open_line = last != b'\n';
        let used = chunk.len();
        reader.consume(used);
    }
    Ok(lines + usize::from(open_line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_tabs_and_utf8_is_not_binary() {
        assert!(!looks_binary(b"fn main() {\n\tprintln!(\"hi\");\r\n}\n"));
        assert!(!looks_binary("naïve café — ünïcödé\n".as_bytes()));
        assert!(!looks_binary(b""));
    }

    #[test]
    fn nul_bytes_or_many_control_characters_mean_binary() {
        assert!(looks_binary(b"hello\0world"));
        assert!(looks_binary(&[1, 2, 3, 4, 5, b'a']));
    }

    #[test]
    fn lines_lose_their_carriage_return_and_keep_bad_bytes_visible() {
        assert_eq!(decode_line(b"abc\r"), "abc");
        assert_eq!(decode_line(b"a\xffb"), "a\u{fffd}b");
    }

    fn all_lines(input: &[u8], cap: usize) -> Vec<String> {
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while read_line_within(&mut reader, &mut buf, cap, u64::MAX).unwrap() == LineRead::Line {
            out.push(String::from_utf8_lossy(&buf).into_owned());
        }
        out
    }

    #[test]
    fn lines_split_on_newlines_across_buffer_boundaries() {
        assert_eq!(all_lines(b"alpha\nbeta\n\ngamma", 100), ["alpha", "beta", "", "gamma"]);
        assert!(all_lines(b"", 100).is_empty());
    }

    #[test]
    fn only_the_start_of_a_huge_line_is_kept() {
        assert_eq!(all_lines(b"abcdefghij\nxy\n", 3), ["abc", "xy"]);
    }

    #[test]
    fn a_line_longer_than_the_scan_limit_is_left_unfinished() {
        let mut reader = std::io::BufReader::with_capacity(4, &b"abcdefghij\nxy\n"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_within(&mut reader, &mut buf, 100, 6).unwrap(), LineRead::Unfinished);
        assert_eq!(buf, b"abcdef");
        assert_eq!(read_line_within(&mut reader, &mut buf, 100, 6).unwrap(), LineRead::Line);
        assert_eq!(buf, b"ghij");
        assert_eq!(read_line_within(&mut reader, &mut buf, 100, 6).unwrap(), LineRead::Line);
        assert_eq!(read_line_within(&mut reader, &mut buf, 100, 6).unwrap(), LineRead::End);
    }

    #[test]
    fn count_lines_counts_a_final_line_without_newline() {
        assert_eq!(count_lines(&mut &b"a\nb\nc"[..]).unwrap(), 3);
        assert_eq!(count_lines(&mut &b"a\nb\n"[..]).unwrap(), 2);
        assert_eq!(count_lines(&mut &b""[..]).unwrap(), 0);
    }

    #[test]
    fn long_lines_are_shortened_with_a_marker() {
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("abcd", 4), "abcd");
        assert_eq!(shorten("abcdefghij", 4), "abcd… [line cut at 4 characters]");
        assert_eq!(shorten("ééééé", 2), "éé… [line cut at 2 characters]");
    }
}

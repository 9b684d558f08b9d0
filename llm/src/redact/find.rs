//! Finding a secret's forms in text: each form as a substring (the secret in any ASCII case,
//! its hex and base64 widened to the whole token), the secret with bytes escaped, and a start
//! or end of any form shown next to a mask (`sk-abcdefgh****wxyz1234`). Each finder adds the
//! byte spans to cover.

use memchr::memchr2_iter;

use super::forms::{Alphabet, Form, Forms, MIN_SHOWN, Windows};

/// A byte range of the text to cover, `start..end`.
pub(super) type Span = (usize, usize);

/// One text to scrub, as it is and lower-cased (the same length: only ASCII letters change).
pub(super) struct Text<'a> {
    /// The text as it is.
    pub(super) exact: &'a [u8],
    /// The text with ASCII letters lower-cased, for forms that ignore case.
    pub(super) folded: Vec<u8>,
}

impl<'a> Text<'a> {
    pub(super) fn new(text: &'a str) -> Text<'a> {
        Text { exact: text.as_bytes(), folded: text.as_bytes().to_ascii_lowercase() }
    }

    /// The text a form is compared with.
    fn for_form(&self, form: &Form) -> &[u8] {
        if form.fold_case { &self.folded } else { self.exact }
    }
}

/// Every place a form appears whole, widened to the token around it.
pub(super) fn substrings(text: &Text, forms: &Forms, spans: &mut Vec<Span>) {
    for form in &forms.all {
        for start in form.finder.find_iter(text.for_form(form)) {
            spans.push(widen(text.exact, (start, start + form.text.len()), form.run));
        }
    }
}

/// Every place the secret appears with some bytes escaped and the others as themselves, in
/// any ASCII case: `%HH` (URL-encoding, either case of hex digit), `\xHH`, `\u00HH` or `\/`
/// (JSON). Only the stretch before each escape can start such a match, so only that is tried.
pub(super) fn escaped(text: &[u8], forms: &Forms, spans: &mut Vec<Span>) {
    let secret = &forms.raw;
    let mut tried = 0;
    for escape in memchr2_iter(b'%', b'\\', text) {
        let mut at = escape.saturating_sub(secret.len().saturating_sub(1)).max(tried);
        while at <= escape {
            match match_escaped(text, at, secret) {
                Some(end) => {
                    spans.push((at, end));
                    at = end;
                }
                None => at += 1,
            }
        }
        tried = at;
    }
}

/// Where `secret`, written from `start` with any byte escaped, ends.
fn match_escaped(text: &[u8], start: usize, secret: &[u8]) -> Option<usize> {
    secret.iter().try_fold(start, |at, &want| byte_end(text, at, want))
}

/// Where the byte `want`, written at `at` as itself or escaped, ends.
fn byte_end(text: &[u8], at: usize, want: u8) -> Option<usize> {
    let rest = text.get(at..)?;
    if let Some((byte, len)) = unescape(rest)
        && byte == want
    {
        return Some(at + len);
    }
    rest.first().filter(|byte| byte.eq_ignore_ascii_case(&want)).map(|_| at + 1)
}

/// The byte an escape at the start of `rest` stands for, and the escape's length.
fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    match rest {
        [b'%', high, low, ..] => Some((hex_byte(*high, *low)?, 3)),
        [b'\\', b'x', high, low, ..] => Some((hex_byte(*high, *low)?, 4)),
        [b'\\', b'u', b'0', b'0', high, low, ..] => Some((hex_byte(*high, *low)?, 6)),
        [b'\\', b'/', ..] => Some((b'/', 2)),
        _ => None,
    }
}

fn hex_byte(high: u8, low: u8) -> Option<u8> {
    let digit = |d: u8| char::from(d).to_digit(16);
    Some((digit(high)? * 16 + digit(low)?) as u8)
}

/// `span` grown over the neighbouring digits of `run`'s alphabet and the padding after them.
fn widen(text: &[u8], (mut start, mut end): Span, run: Option<Alphabet>) -> Span {
    if let Some(alphabet) = run {
        while start > 0 && alphabet.contains(text[start - 1]) {
            start -= 1;
        }
        while end < text.len() && alphabet.contains(text[end]) {
            end += 1;
        }
        while end < text.len() && alphabet.pads(text[end]) {
            end += 1;
        }
    }
    (start, end)
}

/// The masks in `text`: runs of characters that stand for hidden ones (`*`, `•`, `…`, two
/// or more dots, three or more `x`, `X` or `#`).
pub(super) fn masks(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut masks = Vec::new();
    let mut at = 0;
    while let Some(found) = bytes[at..].iter().position(|&byte| MAY_START_MASK[usize::from(byte)]) {
        let start = at + found;
        // A candidate byte is ASCII or a lead byte, so `start` is a character boundary.
        let Some(first) = text[start..].chars().next() else { break };
        let width = first.len_utf8();
        let (mut end, mut count) = (start + width, 1);
        while text[end..].starts_with(first) {
            (end, count) = (end + width, count + 1);
        }
        if run_needed(first).is_some_and(|needed| count >= needed) {
            masks.push((start, end));
        }
        at = end;
    }
    masks
}

/// The bytes a mask character starts with: ASCII ones and the UTF-8 lead bytes of the others
/// (a cheap filter; `run_needed` decides).
const MAY_START_MASK: [bool; 256] = {
    let mut table = [false; 256];
    let starts = [b'*', b'.', b'x', b'X', b'#', 0xC2, 0xE2];
    let mut i = 0;
    while i < starts.len() {
        table[starts[i] as usize] = true;
        i += 1;
    }
    table
};

/// How many of `c` in a row make a mask (`None`: it never does).
fn run_needed(c: char) -> Option<usize> {
    match c {
        '*' | '∗' | '•' | '●' | '·' | '…' => Some(1),
        '.' => Some(2),
        'x' | 'X' | '#' => Some(3),
        _ => None,
    }
}

/// Covers every mask with at least [`MIN_SHOWN`] characters of a form's start just before it
/// (one space between allowed) or of its end just after it, together with those characters
/// and whatever part of the same form shows on the other side.
pub(super) fn beside_masks(text: &Text, masks: &[Span], secrets: &[Forms], windows: &Windows, spans: &mut Vec<Span>) {
    let bytes = text.exact;
    for &(start, end) in masks {
        let before = if start > 0 && bytes[start - 1] == b' ' { start - 1 } else { start };
        let after = if bytes.get(end) == Some(&b' ') { end + 1 } else { end };
        let ahead = before.checked_sub(MIN_SHOWN).and_then(|from| bytes.get(from..before));
        let behind = bytes.get(after..after + MIN_SHOWN);
        for window in [ahead, behind].into_iter().flatten() {
            let Ok(window) = <&[u8; MIN_SHOWN]>::try_from(window) else { continue };
            for (secret, index, _) in windows.lookup(window) {
                let form = &secrets[secret].all[index];
                let text = text.for_form(form);
                let (start_shown, end_shown) =
                    (start_ending_at(text, before, form), end_starting_at(text, after, form));
                if start_shown.max(end_shown) >= MIN_SHOWN {
                    let start = if start_shown > 0 { before - start_shown } else { start };
                    let end = if end_shown > 0 { after + end_shown } else { end };
                    spans.push(widen(bytes, (start, end), form.run));
                }
            }
        }
    }
}

/// The length of the longest start of `form` that `text` shows just before `at`.
fn start_ending_at(text: &[u8], at: usize, form: &Form) -> usize {
    (1..=form.text.len().min(at)).rev().find(|&len| text[at - len..at] == form.text[..len]).unwrap_or(0)
}

/// The length of the longest end of `form` that `text` shows from `at` on.
fn end_starting_at(text: &[u8], at: usize, form: &Form) -> usize {
    let whole = form.text.len();
    (1..=whole.min(text.len().saturating_sub(at)))
        .rev()
        .find(|&len| text[at..at + len] == form.text[whole - len..])
        .unwrap_or(0)
}

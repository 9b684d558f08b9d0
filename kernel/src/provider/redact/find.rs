//! Finding a secret's forms in text: the secret itself with any byte escaped and in any ASCII
//! case, its hex and base64 widened to the whole token, and a start or end of any of them
//! shown next to a mask (`sk-abcdefgh****wxyz1234`). Each finder adds byte spans to cover.

use super::forms::{Alphabet, Form, Forms};

/// A byte range of the text to cover, `start..end`.
pub(super) type Span = (usize, usize);

/// How much of a secret's start or end must show next to a mask before it is covered.
const MIN_SHOWN: usize = 8;

/// Every place the secret appears with each byte written as itself in any ASCII case or
/// escaped: `%HH` (URL-encoding, either case of hex digit), `\xHH`, `\u00HH` or `\/` (JSON).
pub(super) fn escaped(text: &[u8], forms: &Forms, spans: &mut Vec<Span>) {
    let Some(&first) = forms.raw.first() else { return };
    let mut at = 0;
    while at < text.len() {
        let byte = text[at];
        let candidate = byte.eq_ignore_ascii_case(&first) || byte == b'%' || byte == b'\\';
        match candidate.then(|| match_escaped(text, at, &forms.raw)).flatten() {
            Some(end) => {
                spans.push((at, end));
                at = end;
            }
            None => at += 1,
        }
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

/// Every place an encoded form (hex, base64) appears, widened to the whole token around it.
pub(super) fn encoded(text: &[u8], forms: &Forms, spans: &mut Vec<Span>) {
    for form in forms.encoded() {
        let mut from = 0;
        while let Some(start) = find(text, from, form) {
            let end = start + form.text.len();
            spans.push(widen(text, (start, end), form.run));
            from = end;
        }
    }
}

/// The first place at or after `from` where `form` appears.
fn find(text: &[u8], from: usize, form: &Form) -> Option<usize> {
    let needle = &form.text;
    let last = text.len().checked_sub(needle.len())?;
    (from..=last).find(|&at| same(&text[at..at + needle.len()], needle, form.fold_case))
}

fn same(a: &[u8], b: &[u8], fold_case: bool) -> bool {
    if fold_case { a.eq_ignore_ascii_case(b) } else { a == b }
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
/// or more dots, three or more `x`, `X` or `#`), each with one space on either side.
pub(super) fn masks(text: &str) -> Vec<Span> {
    let mut masks = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, first)) = chars.next() {
        let Some(needed) = run_needed(first) else { continue };
        let (mut end, mut count) = (start + first.len_utf8(), 1);
        while let Some((at, next)) = chars.next_if(|&(_, next)| next == first) {
            (end, count) = (at + next.len_utf8(), count + 1);
        }
        if count >= needed {
            masks.push((start, end));
        }
    }
    masks
}

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
/// or of its end just after it, together with those characters and whatever part of the form
/// shows on the other side.
pub(super) fn beside_masks(text: &[u8], masks: &[Span], forms: &Forms, spans: &mut Vec<Span>) {
    for &(start, end) in masks {
        let before = if start > 0 && text[start - 1] == b' ' { start - 1 } else { start };
        let after = if text.get(end) == Some(&b' ') { end + 1 } else { end };
        for form in &forms.all {
            let start_shown = start_ending_at(text, before, form);
            let end_shown = end_starting_at(text, after, form);
            if start_shown.max(end_shown) >= MIN_SHOWN {
                let start = if start_shown > 0 { before - start_shown } else { start };
                let end = if end_shown > 0 { after + end_shown } else { end };
                spans.push(widen(text, (start, end), form.run));
            }
        }
    }
}

/// The length of the longest start of `form` that `text` shows just before `at`.
fn start_ending_at(text: &[u8], at: usize, form: &Form) -> usize {
    let Some(&last) = at.checked_sub(1).and_then(|i| text.get(i)) else { return 0 };
    (1..=form.text.len().min(at))
        .rev()
        .filter(|&len| same(&[form.text[len - 1]], &[last], form.fold_case))
        .find(|&len| same(&text[at - len..at], &form.text[..len], form.fold_case))
        .unwrap_or(0)
}

/// The length of the longest end of `form` that `text` shows from `at` on.
fn end_starting_at(text: &[u8], at: usize, form: &Form) -> usize {
    let Some(&first) = text.get(at) else { return 0 };
    let whole = form.text.len();
    (1..=whole.min(text.len() - at))
        .rev()
        .filter(|&len| same(&[form.text[whole - len]], &[first], form.fold_case))
        .find(|&len| same(&text[at..at + len], &form.text[whole - len..], form.fold_case))
        .unwrap_or(0)
}

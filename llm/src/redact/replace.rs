//! Scrubbing one text: every finder's spans for every secret, merged where they overlap or
//! touch, each run replaced by [`REDACTED`] once.

use super::REDACTED;
use super::find::{self, Span, Text};
use super::forms::{Forms, Windows};

/// `text` with every form of every secret in `secrets` replaced; `windows` indexes their forms.
pub(super) fn scrub(text: &str, secrets: &[Forms], windows: &Windows) -> String {
    if secrets.is_empty() {
        return text.to_owned();
    }
    let prepared = Text::new(text);
    let mut spans = Vec::new();
    for forms in secrets {
        find::substrings(&prepared, forms, &mut spans);
        find::escaped(prepared.exact, forms, &mut spans);
    }
    find::beside_masks(&prepared, &find::masks(text), secrets, windows, &mut spans);
    replace(text, spans)
}

/// `text` with each of `spans` (merged where they overlap or touch) replaced by [`REDACTED`].
fn replace(text: &str, mut spans: Vec<Span>) -> String {
    if spans.is_empty() {
        return text.to_owned();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some((start, mut end)) = spans.next() {
        while let Some((_, next_end)) = spans.next_if(|&(next_start, _)| next_start <= end) {
            end = end.max(next_end);
        }
        let (start, end) = (floor_boundary(text, start.max(copied)), ceil_boundary(text, end));
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// `at`, moved back to the start of the character it falls in.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `at`, moved on to the end of the character it falls in.
fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

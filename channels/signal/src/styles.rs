//! Markdown as models write it → what Signal shows: plain text plus text styles (`BOLD`,
//! `ITALIC`, `STRIKETHROUGH`, `MONOSPACE`, `SPOILER` over ranges counted in UTF-16 units, as
//! signal-cli's `textStyle` takes them `"start:length:STYLE"`). Headings are bold lines, list
//! items get bullets or numbers, links show their address after the text, and HTML the model
//! wrote is shown as text.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// A styled range of the plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Style {
    /// Where it starts, in UTF-16 units.
    pub start: usize,
    /// How long it is, in UTF-16 units.
    pub length: usize,
    /// `BOLD`, `ITALIC`, `STRIKETHROUGH`, `MONOSPACE` or `SPOILER`.
    pub kind: &'static str,
}

impl Style {
    /// signal-cli's form, `start:length:STYLE`, relative to `offset`.
    pub fn param(&self, offset: usize) -> String {
        format!("{}:{}:{}", self.start - offset, self.length, self.kind)
    }
}

/// The text Signal shows for `markdown`, and its styles.
pub fn to_signal(markdown: &str) -> (String, Vec<Style>) {
    let mut out = Writer::default();
    let options = Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(markdown, options) {
        out.event(event);
    }
    out.finish()
}

/// The plain text being written, with the styles open and closed so far.
#[derive(Debug, Default)]
struct Writer {
    text: String,
    /// Its length in UTF-16 units.
    units: usize,
    /// Styles opened: kind and start.
    open: Vec<(&'static str, usize)>,
    styles: Vec<Style>,
    /// The number of the next item of each open list (`None`: bullets).
    lists: Vec<Option<u64>>,
    /// Link targets, shown after the link text.
    links: Vec<String>,
}

impl Writer {
    fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.units += text.encode_utf16().count();
    }

    /// Ends the current block: one line break, or two between paragraphs.
    fn break_block(&mut self, blank: bool) {
        let wanted = if blank { "\n\n" } else { "\n" };
        if self.text.is_empty() || self.text.ends_with(wanted) {
            return;
        }
        while !self.text.ends_with(wanted) {
            self.push("\n");
        }
    }

    fn open(&mut self, kind: &'static str) {
        self.open.push((kind, self.units));
    }

    fn close(&mut self, kind: &'static str) {
        if let Some(index) = self.open.iter().rposition(|(open, _)| *open == kind) {
            let (_, start) = self.open.remove(index);
            if self.units > start {
                self.styles.push(Style { start, length: self.units - start, kind });
            }
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => self.push(&text),
            Event::Code(code) => {
                self.open("MONOSPACE");
                self.push(&code);
                self.close("MONOSPACE");
            }
            Event::SoftBreak | Event::HardBreak => self.push("\n"),
            Event::Rule => {
                self.break_block(true);
                self.push("———");
                self.break_block(true);
            }
            Event::TaskListMarker(done) => self.push(if done { "☑ " } else { "☐ " }),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.break_block(self.lists.is_empty()),
            Tag::Heading { .. } => {
                self.break_block(true);
                self.open("BOLD");
            }
            Tag::BlockQuote(_) => self.break_block(true),
            Tag::CodeBlock(_) => {
                self.break_block(true);
                self.open("MONOSPACE");
            }
            Tag::List(first) => {
                self.break_block(self.lists.is_empty());
                self.lists.push(first);
            }
            Tag::Item => {
                self.break_block(false);
                let depth = self.lists.len().saturating_sub(1);
                self.push(&"  ".repeat(depth));
                match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        self.push(&marker);
                    }
                    _ => self.push("• "),
                }
            }
            Tag::Emphasis => self.open("ITALIC"),
            Tag::Strong => self.open("BOLD"),
            Tag::Strikethrough => self.open("STRIKETHROUGH"),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => self.links.push(dest_url.to_string()),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.break_block(self.lists.is_empty()),
            TagEnd::Heading(_) => {
                self.close("BOLD");
                self.break_block(true);
            }
            TagEnd::BlockQuote(_) => self.break_block(true),
            TagEnd::CodeBlock => {
                while self.text.ends_with('\n') {
                    self.text.pop();
                    self.units -= 1;
                }
                self.close("MONOSPACE");
                self.break_block(true);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.break_block(self.lists.is_empty());
            }
            TagEnd::Emphasis => self.close("ITALIC"),
            TagEnd::Strong => self.close("BOLD"),
            TagEnd::Strikethrough => self.close("STRIKETHROUGH"),
            TagEnd::Link | TagEnd::Image => {
                if let Some(url) = self.links.pop()
                    && !url.is_empty()
                    && !self.text.ends_with(url.as_str())
                {
                    self.push(&format!(" ({url})"));
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> (String, Vec<Style>) {
        let kept = self.text.trim_end().len();
        self.text.truncate(kept);
        let units = self.text.encode_utf16().count();
        let styles = self
            .styles
            .into_iter()
            .filter(|style| style.start < units)
            .map(|style| Style { length: style.length.min(units - style.start), ..style })
            .collect();
        (self.text, styles)
    }
}

/// The styles of `styles` that fall in the part of the text from UTF-16 offset `start`,
/// `length` units long, clipped to it, as signal-cli params relative to the part.
pub fn styles_of_part(styles: &[Style], start: usize, length: usize) -> Vec<String> {
    let end = start + length;
    styles
        .iter()
        .filter(|style| style.start < end && style.start + style.length > start)
        .map(|style| {
            let from = style.start.max(start);
            let to = (style.start + style.length).min(end);
            Style { start: from, length: to - from, kind: style.kind }.param(start)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(markdown: &str) -> (String, Vec<String>) {
        let (text, styles) = to_signal(markdown);
        (text, styles.iter().map(|style| style.param(0)).collect())
    }

    #[test]
    fn emphasis_code_and_strikethrough_become_styles_over_the_plain_text() {
        let (text, styles) = params("**Done**: *see* `x = 1` ~~old~~");
        assert_eq!(text, "Done: see x = 1 old");
        assert_eq!(styles, ["0:4:BOLD", "6:3:ITALIC", "10:5:MONOSPACE", "16:3:STRIKETHROUGH"]);
    }

    #[test]
    fn offsets_count_utf16_units() {
        let (text, styles) = params("😀 **hi**");
        assert_eq!(text, "😀 hi");
        assert_eq!(styles, ["3:2:BOLD"]);
    }

    #[test]
    fn headings_lists_links_and_code_blocks_read_well_as_plain_text() {
        let (text, styles) =
            params("# Plan\n\n- one\n- two\n\n1. first\n2. second\n\nSee [docs](https://x.io).\n\n```sh\nls -l\n```");
        assert_eq!(text, "Plan\n\n• one\n• two\n\n1. first\n2. second\n\nSee docs (https://x.io).\n\nls -l");
        assert_eq!(styles, ["0:4:BOLD", "65:5:MONOSPACE"]);
    }

    #[test]
    fn html_from_the_model_is_text() {
        assert_eq!(to_signal("a <b>c</b>").0, "a <b>c</b>");
    }

    #[test]
    fn a_part_gets_the_styles_inside_it_clipped_and_shifted() {
        let styles = [Style { start: 2, length: 6, kind: "BOLD" }, Style { start: 12, length: 2, kind: "ITALIC" }];
        assert_eq!(styles_of_part(&styles, 0, 5), ["2:3:BOLD"]);
        assert_eq!(styles_of_part(&styles, 5, 10), ["0:3:BOLD", "7:2:ITALIC"]);
        assert!(styles_of_part(&styles, 20, 5).is_empty());
    }
}

//! Splitting a long reply into messages a chat service takes whole.
//!
//! One splitter serves every service; [`SplitRules`] says what differs: the limit, how the
//! service counts length ([`Measure`]) and what the text is written in ([`Markup`]). A text
//! that fits is one message, as written. A longer one is cut into parts, each ending at the
//! best break that fits: a paragraph break (a blank line, or the edge of a code block) that
//! leaves the part at least half full, else a line break that does, else a space that does,
//! else the fullest break of any kind, else wherever the limit falls. Nothing indivisible is
//! ever cut (a character, an HTML tag or entity, a fence line), and what is open at a cut (a
//! Markdown code block, an HTML tag) is closed at the end of the part and opened again, the
//! same way, at the start of the next, so every part renders on its own. Parts with nothing
//! visible are dropped.
//!
//! ```
//! use oxibot_plugin::chat::{SplitRules, split};
//!
//! let code: Vec<String> = (0..200).map(|i| format!("let x{i} = {i};")).collect();
//! let reply = format!("Here it is:\n\n```rust\n{}\n```", code.join("\n"));
//! let parts = split(&reply, SplitRules::DISCORD);
//! assert!(parts.len() > 1 && parts.iter().all(|part| part.chars().count() <= 2000));
//! assert!(parts[1].starts_with("```rust\n"));
//! ```

mod atoms;
mod cuts;

pub use atoms::visible_text;

use atoms::{Atom, FENCE, Kind};
use cuts::{Tag, next_cut, still_open};

/// How a service counts the length of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Unicode scalar values (Discord, Slack).
    Chars,
    /// UTF-16 code units: a character outside the Basic Multilingual Plane counts twice
    /// (Telegram).
    Utf16,
    /// UTF-8 bytes.
    Bytes,
}

impl Measure {
    /// The length of `text`.
    pub fn of(self, text: &str) -> usize {
        match self {
            Measure::Chars => text.chars().count(),
            Measure::Utf16 => text.encode_utf16().count(),
            Measure::Bytes => text.len(),
        }
    }
}

/// What a reply is written in, which decides what a cut must keep whole and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// Markdown, or Slack's mrkdwn: a ```` ``` ```` code block cut in two is closed at the end
    /// of one part and reopened with its opening line (language and all) at the start of the
    /// next. A part loses the line breaks it was cut at, never its spaces (indentation stays).
    Markdown,
    /// Telegram's HTML: tags and entities are never divided; the tags open at a cut are closed
    /// and opened again; spaces and line breaks at a cut are dropped.
    Html,
}

/// How to split replies for one service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitRules {
    /// The most a message may hold, in [`SplitRules::measure`] units (at least 20).
    pub limit: usize,
    /// How the service counts.
    pub measure: Measure,
    /// What replies are written in.
    pub markup: Markup,
}

impl SplitRules {
    /// Discord: 2000 characters of Markdown.
    pub const DISCORD: SplitRules = SplitRules { limit: 2000, measure: Measure::Chars, markup: Markup::Markdown };
    /// Slack: 3900 characters of mrkdwn (Slack truncates `text` past 4000).
    pub const SLACK: SplitRules = SplitRules { limit: 3900, measure: Measure::Chars, markup: Markup::Markdown };
    /// Telegram: 4096 UTF-16 units of HTML, which never undercounts what Telegram counts.
    pub const TELEGRAM: SplitRules = SplitRules { limit: 4096, measure: Measure::Utf16, markup: Markup::Html };

    /// The same rules with another limit.
    pub const fn with_limit(self, limit: usize) -> SplitRules {
        SplitRules { limit, ..self }
    }
}

/// `text` in parts of at most `rules.limit`, none of them blank; see the module docs.
pub fn split(text: &str, rules: SplitRules) -> Vec<String> {
    let markup = rules.markup;
    let text = markup.trim_ends(text);
    if rules.measure.of(text) <= rules.limit {
        return if markup.is_blank(text) { Vec::new() } else { vec![text.to_owned()] };
    }
    let atoms = markup.atoms(text, rules);
    let mut parts = Vec::new();
    let mut open: Vec<Tag> = Vec::new();
    let mut start = 0;
    while start < atoms.len() {
        let end = next_cut(&atoms, start, &open, rules);
        let left_open = still_open(&open, &atoms[start..end]);
        let part = render(&atoms[start..end], &open, &left_open, markup);
        if !markup.is_blank(&part) {
            parts.push(part);
        }
        open = left_open;
        start = atoms[end..].iter().position(|atom| !markup.is_break(atom.kind)).map_or(atoms.len(), |p| end + p);
    }
    parts
}

/// A part: the reopened things, its atoms without the breaks it ends with, then the closings
/// of what is still open.
fn render(atoms: &[Atom], reopened: &[Tag], left_open: &[Tag], markup: Markup) -> String {
    let mut part = String::new();
    for tag in reopened {
        part.push_str(&markup.reopening(tag));
    }
    let end = atoms.iter().rposition(|atom| !markup.is_break(atom.kind)).map_or(0, |i| i + 1);
    part.extend(atoms[..end].iter().map(|atom| atom.text));
    for tag in left_open.iter().rev() {
        part.push_str(&markup.closing(tag));
    }
    part
}

impl Markup {
    /// The text with the breaks at its ends that no part keeps.
    fn trim_ends(self, text: &str) -> &str {
        match self {
            Markup::Markdown => text.trim_matches('\n'),
            Markup::Html => text.trim_end_matches([' ', '\t', '\n']),
        }
    }

    /// Whether a part shows nothing.
    fn is_blank(self, part: &str) -> bool {
        match self {
            Markup::Markdown => part.trim().is_empty(),
            Markup::Html => visible_text(part).trim().is_empty(),
        }
    }

    fn atoms(self, text: &str, rules: SplitRules) -> Vec<Atom<'_>> {
        match self {
            // A fence is only kept balanced if a part has room for it reopened, closed and a
            // character (4 units at most) in between.
            Markup::Markdown => atoms::markdown_atoms(text, |line| {
                let tag = Tag { name: FENCE, text: line };
                self.reopen_len(&tag, rules.measure) + self.close_len(&tag, rules.measure) + 4 <= rules.limit
            }),
            Markup::Html => atoms::html_atoms(text),
        }
    }

    /// Whether an atom of this kind is dropped at the edge of a part (so it costs nothing
    /// there).
    fn is_break(self, kind: Kind) -> bool {
        match self {
            Markup::Markdown => kind == Kind::Newline,
            Markup::Html => matches!(kind, Kind::Newline | Kind::Space),
        }
    }

    /// Whether the thing named `name` is a block, whose edges are paragraph breaks.
    fn is_block(self, name: &str) -> bool {
        match self {
            Markup::Markdown => name == FENCE,
            Markup::Html => matches!(name, "pre" | "blockquote"),
        }
    }

    /// What opens `tag` again at the start of a part.
    fn reopening(self, tag: &Tag) -> String {
        match self {
            Markup::Markdown => format!("{}\n", tag.text.trim()),
            Markup::Html => tag.text.to_owned(),
        }
    }

    /// What closes `tag` at the end of a part.
    fn closing(self, tag: &Tag) -> String {
        match self {
            Markup::Markdown => format!("\n{FENCE}"),
            Markup::Html => format!("</{}>", tag.name),
        }
    }

    fn reopen_len(self, tag: &Tag, measure: Measure) -> usize {
        measure.of(&self.reopening(tag))
    }

    fn close_len(self, tag: &Tag, measure: Measure) -> usize {
        measure.of(&self.closing(tag))
    }
}

#[cfg(test)]
mod tests;

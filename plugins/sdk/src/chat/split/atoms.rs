//! The text cut into atoms the splitter never divides: a character, a line break, a space, an
//! HTML tag or entity, a Markdown fence line; and which of them open and close blocks.

use crate::chat::escape::unescape_entity;

/// The name a Markdown fence goes by on the stack of open blocks.
pub(super) const FENCE: &str = "```";

/// One indivisible piece of the text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Atom<'a> {
    /// Its text, as it goes into a part.
    pub text: &'a str,
    /// What it does.
    pub kind: Kind<'a>,
}

/// What an atom does to the text around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind<'a> {
    /// Opens something a part must close and the next one reopen: an HTML tag by its name,
    /// or a Markdown code block ([`FENCE`]).
    Open(&'a str),
    /// Closes the innermost open thing, named as [`Kind::Open`] named it.
    Close(&'a str),
    /// `\n`.
    Newline,
    /// A space or a tab.
    Space,
    /// Any other character, or an HTML entity.
    Text,
}

/// The atoms of Markdown: characters, line breaks and fence lines. A fence line opens a code
/// block and the next one closes it; an opening fence for which `fits` says no (a fence line
/// too long to reopen within a part) is read as text, and so is the line closing it.
pub(super) fn markdown_atoms(text: &str, fits: impl Fn(&str) -> bool) -> Vec<Atom<'_>> {
    let mut atoms = Vec::with_capacity(text.len());
    // Inside a block: whether the block is tracked (its fences are atoms).
    let mut block: Option<bool> = None;
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            atoms.push(Atom { text: "\n", kind: Kind::Newline });
        }
        if is_fence(line) {
            let (kind, tracked) = match block.take() {
                None => {
                    let tracked = fits(line);
                    block = Some(tracked);
                    (Kind::Open(FENCE), tracked)
                }
                Some(tracked) => (Kind::Close(FENCE), tracked),
            };
            if tracked {
                atoms.push(Atom { text: line, kind });
                continue;
            }
        }
        atoms.extend(line.char_indices().map(|(at, c)| character(&line[at..at + c.len_utf8()])));
    }
    atoms
}

/// A line that opens or closes a Markdown code block.
pub(super) fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with(FENCE)
}

/// The atoms of HTML: tags, entities, characters.
pub(super) fn html_atoms(html: &str) -> Vec<Atom<'_>> {
    let mut atoms = Vec::with_capacity(html.len());
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        let len = match c {
            '<' => rest.find('>').map_or(1, |end| end + 1),
            '&' => rest
                .find(';')
                .filter(|end| *end <= 10 && rest[1..*end].chars().all(|x| x.is_ascii_alphanumeric() || x == '#'))
                .map_or(1, |end| end + 1),
            _ => c.len_utf8(),
        };
        atoms.push(html_atom(&rest[..len]));
        rest = &rest[len..];
    }
    atoms
}

fn html_atom(text: &str) -> Atom<'_> {
    if text.len() > 2 && text.starts_with("</") {
        let name = text[2..].trim_end_matches('>').trim();
        return Atom { text, kind: Kind::Close(name) };
    }
    if text.len() > 1 && text.starts_with('<') && text.ends_with('>') {
        let name_end = text[1..].find(|c: char| c.is_whitespace() || c == '>').map_or(text.len() - 1, |p| p + 1);
        return Atom { text, kind: Kind::Open(&text[1..name_end]) };
    }
    character(text)
}

fn character(text: &str) -> Atom<'_> {
    let kind = match text {
        "\n" => Kind::Newline,
        " " | "\t" => Kind::Space,
        _ => Kind::Text,
    };
    Atom { text, kind }
}

/// What a reader sees of `html`: tags dropped, entities decoded.
pub fn visible_text(html: &str) -> String {
    html_atoms(html)
        .into_iter()
        .filter_map(|atom| match atom.kind {
            Kind::Open(_) | Kind::Close(_) => None,
            _ => Some(unescape_entity(atom.text).unwrap_or(atom.text)),
        })
        .collect()
}

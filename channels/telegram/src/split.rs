//! Splits rendered HTML into messages Telegram accepts (at most 4096 characters each).
//!
//! The HTML is cut into atoms (a tag, an entity like `&amp;`, a character) that are never
//! divided. A part ends at the last paragraph break that leaves it at least half full, else
//! the last line break, else the last space, else wherever the limit falls. Tags open at a cut
//! (a `<pre><code>` block, a quote, bold text) are closed at the end of the part and opened
//! again at the start of the next, so every part is well-formed on its own. Lengths count
//! UTF-16 units of the HTML, which never undercounts what Telegram counts.

/// Telegram's limit on the length of one message.
pub const MESSAGE_LIMIT: usize = 4096;

/// One indivisible piece of HTML.
#[derive(Debug, Clone, Copy)]
struct Atom<'a> {
    text: &'a str,
    kind: Kind<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind<'a> {
    /// `<name …>`: opens `name`.
    Open(&'a str),
    /// `</name>`.
    Close,
    /// `\n`.
    Newline,
    /// A space or tab.
    Space,
    /// Any other character, or an entity.
    Text,
}

/// A tag open at some point: its name and its full opening text.
#[derive(Debug, Clone, PartialEq)]
struct OpenTag<'a> {
    name: &'a str,
    text: &'a str,
}

/// Where a part may end, and how good a place it is.
#[derive(Debug, Clone)]
struct Cut<'a> {
    /// The atom index the next part starts at.
    at: usize,
    /// The length of the part up to here (without closing tags).
    length: usize,
    /// The tags open here.
    open: Vec<OpenTag<'a>>,
}

/// How good a cut is: paragraph break > line break > space > anywhere.
const RANKS: usize = 4;

/// Splits `html` into parts of at most `limit` UTF-16 units; blank parts are dropped.
pub fn split_html(html: &str, limit: usize) -> Vec<String> {
    let atoms = atoms(html);
    let mut parts = Vec::new();
    let mut start = 0;
    let mut open: Vec<OpenTag> = Vec::new();
    while start < atoms.len() {
        let cut = next_cut(&atoms, start, &open, limit);
        let part = render_part(&atoms[start..cut.at], &open, &cut.open);
        if !visible_text(&part).trim().is_empty() {
            parts.push(part);
        }
        start = skip_breaks(&atoms, cut.at);
        open = cut.open;
    }
    parts
}

/// Where the part starting at `start` (with `open` tags reopened) ends.
fn next_cut<'a>(atoms: &[Atom<'a>], start: usize, open: &[OpenTag<'a>], limit: usize) -> Cut<'a> {
    let mut length: usize = open.iter().map(|t| utf16_len(t.text)).sum();
    let mut stack = open.to_vec();
    let mut best: [Option<Cut<'a>>; RANKS] = Default::default();
    let mut k = start;
    while k < atoms.len() {
        let atom = atoms[k];
        let mut next_stack = stack.clone();
        apply(&mut next_stack, atom);
        let cost = utf16_len(atom.text);
        if length + cost + closing_len(&next_stack) > limit {
            return choose(best, k, length, stack, limit);
        }
        length += cost;
        stack = next_stack;
        k += 1;
        let rank = rank_after(atoms, k);
        best[rank] = Some(Cut { at: k, length, open: stack.clone() });
    }
    Cut { at: atoms.len(), length, open: stack }
}

/// The best cut found before the limit; when there is none, at `k` (at least one atom on).
fn choose<'a>(
    best: [Option<Cut<'a>>; RANKS],
    k: usize,
    length: usize,
    stack: Vec<OpenTag<'a>>,
    limit: usize,
) -> Cut<'a> {
    let half = limit / 2;
    let [anywhere, space, line, paragraph] = best;
    let ranked = [paragraph, line, space];
    let good = ranked.iter().flatten().find(|cut| cut.length >= half).cloned();
    let fullest = || ranked.into_iter().chain([anywhere]).flatten().max_by_key(|cut| cut.at);
    match good.or_else(fullest) {
        Some(cut) => cut,
        // A single atom longer than a message (never made by the renderer): let it through.
        None => Cut { at: k + 1, length, open: stack },
    }
}

/// How good a place it is to cut before `atoms[k]` (after `atoms[k - 1]`).
fn rank_after(atoms: &[Atom], k: usize) -> usize {
    let last = atoms[k - 1].kind;
    let before = k.checked_sub(2).map(|i| atoms[i].kind);
    match (last, before) {
        (Kind::Newline, Some(Kind::Newline)) => 3,
        (Kind::Newline, _) => 2,
        (Kind::Space, _) => 1,
        _ => 0,
    }
}

/// Pushes or pops the tag an atom opens or closes.
fn apply<'a>(stack: &mut Vec<OpenTag<'a>>, atom: Atom<'a>) {
    match atom.kind {
        Kind::Open(name) => stack.push(OpenTag { name, text: atom.text }),
        Kind::Close => {
            stack.pop();
        }
        _ => {}
    }
}

/// The length of the closing tags for `stack`.
fn closing_len(stack: &[OpenTag]) -> usize {
    stack.iter().map(|t| t.name.len() + 3).sum()
}

/// A part: the reopened tags, its atoms without trailing breaks, then the closing tags.
fn render_part(atoms: &[Atom], reopened: &[OpenTag], still_open: &[OpenTag]) -> String {
    let mut part: String = reopened.iter().map(|t| t.text).collect();
    let end = atoms.iter().rposition(|a| !matches!(a.kind, Kind::Newline | Kind::Space)).map_or(0, |i| i + 1);
    part.extend(atoms[..end].iter().map(|a| a.text));
    for tag in still_open.iter().rev() {
        part.push_str("</");
        part.push_str(tag.name);
        part.push('>');
    }
    part
}

/// The index of the first atom from `at` that is not a line break or space.
fn skip_breaks(atoms: &[Atom], at: usize) -> usize {
    atoms[at..].iter().position(|a| !matches!(a.kind, Kind::Newline | Kind::Space)).map_or(atoms.len(), |p| at + p)
}

/// Cuts `html` into atoms.
fn atoms(html: &str) -> Vec<Atom<'_>> {
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
        let text = &rest[..len];
        atoms.push(Atom { text, kind: kind_of(text) });
        rest = &rest[len..];
    }
    atoms
}

fn kind_of(text: &str) -> Kind<'_> {
    if text.len() > 2 && text.starts_with("</") {
        return Kind::Close;
    }
    if text.len() > 1 && text.starts_with('<') && text.ends_with('>') {
        let name_end = text[1..].find(|c: char| c.is_whitespace() || c == '>').map_or(text.len() - 1, |p| p + 1);
        return Kind::Open(&text[1..name_end]);
    }
    match text {
        "\n" => Kind::Newline,
        " " | "\t" => Kind::Space,
        _ => Kind::Text,
    }
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// What a reader sees of `html`: tags dropped, entities decoded.
pub fn visible_text(html: &str) -> String {
    atoms(html)
        .into_iter()
        .filter_map(|atom| match atom.kind {
            Kind::Open(_) | Kind::Close => None,
            _ => Some(match atom.text {
                "&lt;" => "<",
                "&gt;" => ">",
                "&amp;" => "&",
                "&quot;" => "\"",
                text => text,
            }),
        })
        .collect()
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;

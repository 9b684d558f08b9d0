//! Where a part ends: every place it could end is ranked as it is passed, and when the next
//! atom no longer fits, the best of them is taken.

use super::atoms::{Atom, Kind};
use super::{Markup, SplitRules};

/// Something open at a cut: a Markdown code block or an HTML tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tag<'a> {
    /// Its name (`pre`, `b`, or the fence).
    pub name: &'a str,
    /// The atom that opened it (the tag, or the fence line).
    pub text: &'a str,
}

/// How good a place to cut is, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    /// Just after an opening, which would leave it empty: only when nothing else fits.
    AfterOpening,
    /// Inside a word.
    Anywhere,
    /// After a space.
    Word,
    /// After a line break.
    Line,
    /// After a blank line, or at the edge of a code block.
    Paragraph,
}

/// A place a part could end: the index of the atom the next part starts at, and the length
/// of the part up to there (without closings).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    at: usize,
    length: usize,
}

/// The fullest candidate of each rank seen so far.
#[derive(Debug, Default)]
struct Candidates([Option<Candidate>; 5]);

impl Candidates {
    fn record(&mut self, rank: Break, candidate: Candidate) {
        self.0[rank as usize] = Some(candidate);
    }

    /// The best cut: the best-ranked break that leaves the part half full, else the fullest
    /// break, else one just after an opening.
    fn best(self, limit: usize) -> Option<usize> {
        let [after_opening, anywhere, word, line, paragraph] = self.0;
        let good = [paragraph, line, word].into_iter().flatten().find(|cut| cut.length >= limit / 2);
        let fullest = || [paragraph, line, word, anywhere].into_iter().flatten().max_by_key(|cut| cut.at);
        good.or_else(fullest).or(after_opening).map(|cut| cut.at)
    }
}

/// Where the part starting at `atoms[start]`, with `open` reopened, ends (exclusive): at
/// least one atom on, even when that one atom is too long for a message.
pub(super) fn next_cut(atoms: &[Atom], start: usize, open: &[Tag], rules: SplitRules) -> usize {
    let SplitRules { limit, measure, markup } = rules;
    let mut length: usize = open.iter().map(|tag| markup.reopen_len(tag, measure)).sum();
    // What closing each open thing takes, innermost last, and all of them together.
    let mut closings: Vec<usize> = open.iter().map(|tag| markup.close_len(tag, measure)).collect();
    let mut closing: usize = closings.iter().sum();
    let mut candidates = Candidates::default();
    let mut last_solid = None;
    for (k, atom) in atoms.iter().enumerate().skip(start) {
        let closing_after = match atom.kind {
            Kind::Open(name) => closing + markup.close_len(&Tag { name, text: atom.text }, measure),
            Kind::Close(_) => closing - closings.last().copied().unwrap_or_default(),
            _ => closing,
        };
        let cost = measure.of(atom.text);
        // A break at the end of a part is dropped, so it only counts once something follows.
        if !markup.is_break(atom.kind) && length + cost + closing_after > limit {
            return candidates.best(limit).unwrap_or(k + 1);
        }
        length += cost;
        match atom.kind {
            Kind::Open(_) => closings.push(closing_after - closing),
            Kind::Close(_) => {
                closings.pop();
            }
            _ => {}
        }
        closing = closing_after;
        if !matches!(atom.kind, Kind::Newline | Kind::Space) {
            last_solid = Some(atom.kind);
        }
        candidates.record(rank(atoms, k + 1, last_solid, markup), Candidate { at: k + 1, length });
    }
    atoms.len()
}

/// How good it is to cut before `atoms[at]`; `last_solid` is the last atom before it that is
/// not a space or line break.
fn rank(atoms: &[Atom], at: usize, last_solid: Option<Kind>, markup: Markup) -> Break {
    if matches!(last_solid, Some(Kind::Open(_))) {
        return Break::AfterOpening;
    }
    let before = |back: usize| at.checked_sub(back).map(|i| atoms[i].kind);
    let next = atoms.get(at).map(|atom| atom.kind);
    match before(1) {
        Some(Kind::Newline) => {
            let blank_line = before(2) == Some(Kind::Newline) || next == Some(Kind::Newline);
            let block_closed = matches!(before(2), Some(Kind::Close(name)) if markup.is_block(name));
            let block_opens = matches!(next, Some(Kind::Open(name)) if markup.is_block(name));
            if blank_line || block_closed || block_opens { Break::Paragraph } else { Break::Line }
        }
        Some(Kind::Space) => Break::Word,
        _ => Break::Anywhere,
    }
}

/// What is open after `atoms`, when `open` was open before them.
pub(super) fn still_open<'a>(open: &[Tag<'a>], atoms: &[Atom<'a>]) -> Vec<Tag<'a>> {
    let mut stack = open.to_vec();
    for atom in atoms {
        match atom.kind {
            Kind::Open(name) => stack.push(Tag { name, text: atom.text }),
            Kind::Close(_) => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack
}

//! Paging of result lists for `glob` and `grep`: `head_limit` (0 = no limit) and `offset`,
//! a character cap, and the note that tells the model how to get the next page.

/// Results returned when the call gives no limit.
pub const DEFAULT_HEAD_LIMIT: usize = 250;
/// Largest `head_limit` honoured; larger values are lowered to it.
pub const MAX_HEAD_LIMIT: usize = 1000;
/// Most characters of results in one reply, whatever the limit.
pub const MAX_OUTPUT_CHARS: usize = 128_000;

/// Which slice of the results a call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// How many results at most; `None` for all (still subject to [`MAX_OUTPUT_CHARS`]).
    pub limit: Option<usize>,
    /// How many results to skip first.
    pub offset: usize,
}

impl Page {
    /// The page for `head_limit`, falling back to a legacy alias (`max_results` or
    /// `max_matches`) and then the default. 0 means no limit; values above the maximum are
    /// lowered to it.
    pub fn new(head_limit: Option<usize>, legacy: Option<usize>, offset: Option<usize>) -> Page {
        let limit = match head_limit.or(legacy) {
            Some(0) => None,
            Some(n) => Some(n.min(MAX_HEAD_LIMIT)),
            None => Some(DEFAULT_HEAD_LIMIT),
        };
        Page { limit, offset: offset.unwrap_or(0) }
    }

    /// Whether `taken` results fill the page.
    pub fn is_full(&self, taken: usize) -> bool {
        self.limit.is_some_and(|limit| taken >= limit)
    }

    /// Renders `items` (all results, in order) as one per line for this page, with a note
    /// when there is more or when the page did not start at the beginning.
    pub fn render(&self, items: &[String]) -> String {
        let rest = items.get(self.offset..).unwrap_or_default();
        let wanted = self.limit.map_or(rest.len(), |limit| limit.min(rest.len()));
        let (body, shown) = join_capped(&rest[..wanted], "\n");
        match self.note(shown, items.len()) {
            Some(note) if body.is_empty() => note,
            Some(note) => format!("{body}\n\n{note}"),
            None => body,
        }
    }

    /// The note for a page that showed `shown` of `total` results, if one is needed.
    pub fn note(&self, shown: usize, total: usize) -> Option<String> {
        let (first, last) = (self.offset + 1, self.offset + shown);
        if shown == 0 && total > 0 {
            return Some(format!("(offset {} is past the last of the {total} results)", self.offset));
        }
        if last < total {
            return Some(format!("(results {first}-{last} of {total}; call again with offset={last} for more)"));
        }
        (self.offset > 0).then(|| format!("(results {first}-{last} of {total})"))
    }
}

/// Joins `items` with `separator` until [`MAX_OUTPUT_CHARS`] would be passed; returns the
/// text and how many items it holds (always at least one when there is one).
pub fn join_capped(items: &[String], separator: &str) -> (String, usize) {
    let mut out = String::new();
    let mut chars = 0;
    for (count, item) in items.iter().enumerate() {
        let added = item.chars().count() + if count > 0 { separator.len() } else { 0 };
        if count > 0 && chars + added > MAX_OUTPUT_CHARS {
            return (out, count);
        }
        if count > 0 {
            out.push_str(separator);
        }
        out.push_str(item);
        chars += added;
    }
    (out, items.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("f{i}")).collect()
    }

    #[test]
    fn head_limit_wins_over_the_legacy_alias_and_zero_means_everything() {
        assert_eq!(Page::new(Some(5), Some(9), None).limit, Some(5));
        assert_eq!(Page::new(None, Some(9), None).limit, Some(9));
        assert_eq!(Page::new(None, None, None).limit, Some(DEFAULT_HEAD_LIMIT));
        assert_eq!(Page::new(Some(0), None, None).limit, None);
        assert_eq!(Page::new(Some(5000), None, None).limit, Some(MAX_HEAD_LIMIT));
    }

    #[test]
    fn a_partial_page_says_where_the_next_one_starts() {
        let page = Page::new(Some(2), None, Some(1));
        assert_eq!(page.render(&items(5)), "f2\nf3\n\n(results 2-3 of 5; call again with offset=3 for more)");
    }

    #[test]
    fn a_complete_first_page_has_no_note_and_a_later_last_page_says_where_it_is() {
        assert_eq!(Page::new(None, None, None).render(&items(2)), "f1\nf2");
        assert_eq!(Page::new(None, None, Some(1)).render(&items(2)), "f2\n\n(results 2-2 of 2)");
    }

    #[test]
    fn an_offset_past_the_end_says_so() {
        assert_eq!(Page::new(None, None, Some(10)).render(&items(2)), "(offset 10 is past the last of the 2 results)");
    }

    #[test]
    fn output_is_capped_by_characters() {
        let big: Vec<String> = (0..200).map(|_| "x".repeat(1000)).collect();
        let (text, shown) = join_capped(&big, "\n");
        assert!(shown < 200 && text.chars().count() <= MAX_OUTPUT_CHARS, "{shown}");
    }
}

//! A small streaming Markdown renderer for the terminal: fed the reply as it streams, it
//! turns each complete line into ANSI-styled text, wrapped at word boundaries.
//!
//! It is line based on purpose: a line is styled once its newline has arrived, so output
//! never has to be redrawn, and however the stream is chunked the result is the same. A
//! table is the exception: its rows are held until it ends, so its columns can be aligned.
//! It knows headings, emphasis, inline code, fenced code blocks (shown indented, without
//! their fences), lists, block quotes, tables, horizontal rules and links; anything else
//! passes through as it is.

mod table;
mod wrap;

use table::Table;
use wrap::wrap;

/// Resets every style.
const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const STRIKE: &str = "\x1b[9m";
const HEADING_1: &str = "\x1b[1;4;35m";
const HEADING_2: &str = "\x1b[1;35m";
const HEADING_3: &str = "\x1b[1;36m";
const INLINE_CODE: &str = "\x1b[36m";
const CODE_BLOCK: &str = "\x1b[33m";
const BULLET: &str = "\x1b[36m";
const LINK: &str = "\x1b[4;34m";

/// An open fenced code block.
#[derive(Debug, Clone)]
struct Fence {
    /// '`' or '~'.
    marker: char,
    /// How many markers opened it; the closing fence needs at least as many.
    len: usize,
    /// The opening fence's indentation, removed from the body's lines.
    indent: usize,
}

/// Lines held back because they may be, or are, a table.
#[derive(Debug, Clone)]
enum Held {
    /// A line with a pipe: a table's header if the next line is a delimiter row.
    Header(String),
    /// A table whose rows are still coming.
    Table(Table),
}

/// Renders a stream of Markdown into terminal text, one complete line at a time.
#[derive(Debug, Clone)]
pub struct MarkdownRenderer {
    width: usize,
    pending: String,
    fence: Option<Fence>,
    held: Option<Held>,
}

impl MarkdownRenderer {
    /// A renderer for a terminal `width` columns wide (lines are wrapped to it).
    pub fn new(width: usize) -> MarkdownRenderer {
        MarkdownRenderer { width: width.max(3), pending: String::new(), fence: None, held: None }
    }

    /// Takes the next piece of the stream; returns the styled text of every line it
    /// completed (each ending with a newline), or an empty string.
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let Some(last_newline) = self.pending.rfind('\n') else { return String::new() };
        let rest = self.pending.split_off(last_newline + 1);
        let complete = std::mem::replace(&mut self.pending, rest);
        let mut out = String::new();
        for line in complete.split_terminator('\n') {
            self.render_line(line.strip_suffix('\r').unwrap_or(line), &mut out);
        }
        out
    }

    /// Ends the stream: returns the styled last line if it had no newline (without adding
    /// one) after any table still held, and gets ready for a new stream.
    pub fn finish(&mut self) -> String {
        let line = std::mem::take(&mut self.pending);
        let mut out = String::new();
        if !line.is_empty() {
            self.render_line(&line, &mut out);
        }
        self.release_held(&mut out);
        if !line.is_empty() && out.ends_with('\n') {
            out.pop();
        }
        self.reset();
        out
    }

    /// Forgets everything pushed so far (the stream starts over).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.fence = None;
        self.held = None;
    }

    /// Whether a started line is waiting for its newline, or a table for its end.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.held.is_some()
    }

    /// Renders one complete line into `out` (nothing, one line or several, each ending
    /// with a newline).
    fn render_line(&mut self, line: &str, out: &mut String) {
        if let Some(fence) = &self.fence {
            if closes_fence(line, fence) {
                self.fence = None;
                return;
            }
            let body = strip_indent(line, fence.indent);
            if !body.is_empty() {
                out.push_str(&format!("  {CODE_BLOCK}{body}{RESET}"));
            }
            out.push('\n');
            return;
        }
        match self.held.take() {
            Some(Held::Header(header)) => match Table::start(&header, line) {
                Some(table) => {
                    self.held = Some(Held::Table(table));
                    return;
                }
                None => self.emit_block(&header, out),
            },
            Some(Held::Table(mut table)) if is_table_row(line) => {
                table.push_row(line);
                self.held = Some(Held::Table(table));
                return;
            }
            Some(Held::Table(table)) => emit_table(&table, self.width, out),
            None => {}
        }
        if let Some(fence) = opens_fence(line) {
            self.fence = Some(fence);
        } else if is_table_row(line) {
            self.held = Some(Held::Header(line.to_owned()));
        } else {
            self.emit_block(line, out);
        }
    }

    /// Writes out a held line or table: the stream or the table ended.
    fn release_held(&mut self, out: &mut String) {
        match self.held.take() {
            Some(Held::Header(line)) => self.emit_block(&line, out),
            Some(Held::Table(table)) => emit_table(&table, self.width, out),
            None => {}
        }
    }

    fn emit_block(&self, line: &str, out: &mut String) {
        out.push_str(&self.render_block(line, self.width));
        out.push('\n');
    }

    /// A line outside code blocks, wrapped to `width`.
    fn render_block(&self, line: &str, width: usize) -> String {
        let indent_len = line.len() - line.trim_start().len();
        let (indent, body) = line.split_at(indent_len);
        if body.is_empty() {
            return String::new();
        }
        if is_rule(body) {
            return format!("{indent}{DIM}{}{RESET}", "─".repeat(width.saturating_sub(indent.chars().count())));
        }
        if let Some(quoted) = quote_body(body) {
            let inner = self.render_block(quoted, width.saturating_sub(indent.chars().count() + 2));
            // Each style span inside resets everything, so the dim is re-applied after it.
            let lines: Vec<String> = inner
                .split('\n')
                .map(|inner| format!("{indent}{DIM}│ {}{RESET}", inner.replace(RESET, &format!("{RESET}{DIM}"))))
                .collect();
            return lines.join("\n");
        }
        if let Some((level, text)) = heading(body) {
            let style = match level {
                1 => HEADING_1,
                2 => HEADING_2,
                3 => HEADING_3,
                _ => BOLD,
            };
            return wrap(&format!("{indent}{style}{}{RESET}", inline(text, style)), width, indent);
        }
        if let Some(item) = bullet_item(body) {
            let (mark, item) = match task_box(item) {
                Some((true, rest)) => ("☑", rest),
                Some((false, rest)) => ("☐", rest),
                None => ("•", item),
            };
            let hanging = format!("{indent}  ");
            return wrap(&format!("{indent}{BULLET}{mark}{RESET} {}", inline(item, "")), width, &hanging);
        }
        if let Some((number, item)) = numbered_item(body) {
            let hanging = format!("{indent}{}", " ".repeat(number.len() + 1));
            return wrap(&format!("{indent}{BULLET}{number}{RESET} {}", inline(item, "")), width, &hanging);
        }
        wrap(&format!("{indent}{}", inline(body, "")), width, indent)
    }
}

/// Writes a finished table, each of its lines ending with a newline.
fn emit_table(table: &Table, width: usize, out: &mut String) {
    for line in table.render(width) {
        out.push_str(&line);
        out.push('\n');
    }
}

/// A line that may belong to a table: it has a pipe outside any code span.
fn is_table_row(line: &str) -> bool {
    let line = line.trim();
    !line.is_empty() && (line.starts_with('|') || table::cells(line).len() > 1)
}

fn strip_indent(line: &str, indent: usize) -> &str {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    &line[spaces.min(indent)..]
}

fn fence_run(line: &str) -> Option<(char, usize, usize, &str)> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.len() - trimmed.trim_start_matches(marker).len();
    (len >= 3).then(|| (marker, len, indent, &trimmed[len..]))
}

fn opens_fence(line: &str) -> Option<Fence> {
    let (marker, len, indent, info) = fence_run(line)?;
    // A backtick in the info string means inline code such as ```x``` rather than a fence.
    if marker == '`' && info.contains('`') {
        return None;
    }
    Some(Fence { marker, len, indent })
}

fn closes_fence(line: &str, fence: &Fence) -> bool {
    fence_run(line)
        .is_some_and(|(marker, len, _, rest)| marker == fence.marker && len >= fence.len && rest.trim().is_empty())
}

/// `---`, `***` or `___` (three or more, spaces allowed between).
fn is_rule(body: &str) -> bool {
    let mut marks = body.chars().filter(|c| !c.is_whitespace());
    let Some(first) = marks.next() else { return false };
    matches!(first, '-' | '*' | '_') && body.chars().filter(|c| *c == first).count() >= 3 && marks.all(|c| c == first)
}

fn quote_body(body: &str) -> Option<&str> {
    let rest = body.strip_prefix('>')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

fn heading(body: &str) -> Option<(usize, &str)> {
    let level = body.len() - body.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &body[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim();
    // Closing hashes (`## Title ##`) are decoration.
    let without_closing = text.trim_end_matches('#');
    let text = if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        text
    };
    Some((level, text))
}

fn bullet_item(body: &str) -> Option<&str> {
    let rest = body.strip_prefix(['-', '*', '+'])?;
    if rest.is_empty() {
        return Some(rest);
    }
    rest.starts_with([' ', '\t']).then(|| rest.trim_start())
}

fn task_box(item: &str) -> Option<(bool, &str)> {
    let checked = if item.starts_with("[ ] ") {
        false
    } else if item.starts_with("[x] ") || item.starts_with("[X] ") {
        true
    } else {
        return None;
    };
    Some((checked, &item[4..]))
}

fn numbered_item(body: &str) -> Option<(&str, &str)> {
    let digits = body.len() - body.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 9 {
        return None;
    }
    let after = &body[digits..];
    if !after.starts_with(['.', ')']) {
        return None;
    }
    let rest = &after[1..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((&body[..=digits], rest.trim_start()))
}

/// Styles the inline constructs of `text`; `base` is the style of the surrounding line,
/// restored after every span (a span ends with a full reset).
fn inline(text: &str, base: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let previous = text[..i].chars().next_back();
        if let Some((styled, used)) = span(rest, previous, base) {
            out.push_str(&styled);
            i += used;
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        if c == '\\'
            && let Some(escaped) = rest[1..].chars().next().filter(char::is_ascii_punctuation)
        {
            out.push(escaped);
            i += 2;
            continue;
        }
        // A run of the same delimiter that opened nothing stays literal as a whole, so
        // that `***` or `__init__` is not re-read from its middle.
        let run = if matches!(c, '*' | '_' | '`' | '~') {
            rest.len() - rest.trim_start_matches(c).len()
        } else {
            c.len_utf8()
        };
        out.push_str(&rest[..run]);
        i += run;
    }
    out
}

/// The span that starts at the beginning of `rest`, styled, and how many bytes it used.
fn span(rest: &str, previous: Option<char>, base: &str) -> Option<(String, usize)> {
    let first = rest.chars().next()?;
    match first {
        '`' => code_span(rest, base),
        '*' | '_' => emphasis(rest, first, previous, base),
        '~' if rest.starts_with("~~") => delimited(rest, "~~", STRIKE, base),
        '[' => link(rest, 0, base),
        '!' if rest.starts_with("![") => link(rest, 1, base),
        '<' => autolink(rest, base),
        _ => None,
    }
}

fn styled(style: &str, text: &str, base: &str) -> String {
    format!("{style}{text}{RESET}{base}")
}

fn code_span(rest: &str, base: &str) -> Option<(String, usize)> {
    let ticks = rest.len() - rest.trim_start_matches('`').len();
    let delimiter = &rest[..ticks];
    let body_start = ticks;
    let mut search = body_start;
    loop {
        let found = search + rest[search..].find(delimiter)?;
        let run = rest[found..].len() - rest[found..].trim_start_matches('`').len();
        if run == ticks {
            let code = &rest[body_start..found];
            let code = if code.len() >= 2 && code.starts_with(' ') && code.ends_with(' ') && !code.trim().is_empty() {
                &code[1..code.len() - 1]
            } else {
                code
            };
            return Some((styled(INLINE_CODE, code, base), found + ticks));
        }
        search = found + run;
    }
}

fn emphasis(rest: &str, marker: char, previous: Option<char>, base: &str) -> Option<(String, usize)> {
    // `_` inside a word (snake_case) is not emphasis.
    if marker == '_' && previous.is_some_and(char::is_alphanumeric) {
        return None;
    }
    let double: String = [marker, marker].iter().collect();
    if rest.starts_with(&double)
        && let Some(found) = delimited(rest, &double, BOLD, base)
    {
        return Some(found);
    }
    let single = marker.to_string();
    delimited(rest, &single, ITALIC, base)
}

/// `delimiter text delimiter`: the text must not start or end with whitespace, and a
/// closing delimiter that is part of a longer run closes at the run's end.
fn delimited(rest: &str, delimiter: &str, style: &str, base: &str) -> Option<(String, usize)> {
    let marker = delimiter.chars().next()?;
    let open = delimiter.len();
    let after_open = rest[open..].chars().next()?;
    if after_open.is_whitespace() || (after_open == marker && delimiter.len() == 1) {
        return None;
    }
    let mut search = open + after_open.len_utf8();
    while search <= rest.len() {
        let found = search + rest[search..].find(delimiter)?;
        let run_end = found + rest[found..].len() - rest[found..].trim_start_matches(marker).len();
        let close = run_end - open;
        let before = rest[..close].chars().next_back();
        let after = rest[run_end..].chars().next();
        let run_fits = if delimiter.len() == 1 { run_end - found == 1 } else { true };
        let word_ok = marker != '_' || !after.is_some_and(char::is_alphanumeric);
        if close > open && run_fits && word_ok && before.is_some_and(|c| !c.is_whitespace()) {
            let inner = inline(&rest[open..close], &format!("{base}{style}"));
            return Some((styled(style, &inner, base), run_end));
        }
        search = run_end.max(found + 1);
    }
    None
}

/// `[text](url)`, or an image `![alt](url)` when `skip` is 1.
fn link(rest: &str, skip: usize, base: &str) -> Option<(String, usize)> {
    let label_start = skip + 1;
    let mut depth = 0usize;
    let mut label_end = None;
    for (offset, c) in rest[label_start..].char_indices() {
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => {
                label_end = Some(label_start + offset);
                break;
            }
            ']' => depth -= 1,
            _ => {}
        }
    }
    let label_end = label_end?;
    let after = &rest[label_end + 1..];
    let target = after.strip_prefix('(')?;
    let close = target.find(')')?;
    let url = target[..close].trim();
    if url.contains(char::is_whitespace) && !url.contains(" \"") {
        return None;
    }
    // Drop an optional title: [text](url "title").
    let url = url.split_once(" \"").map_or(url, |(url, _)| url).trim_matches(|c| c == '<' || c == '>');
    let label = &rest[label_start..label_end];
    let used = label_end + 1 + 1 + close + 1;
    let shown = inline(label, &format!("{base}{LINK}"));
    let text = if label.is_empty() || label == url {
        styled(LINK, url, base)
    } else if url.is_empty() {
        styled(LINK, &shown, base)
    } else {
        format!("{}{DIM} ({url}){RESET}{base}", styled(LINK, &shown, base))
    };
    Some((text, used))
}

/// `<https://example.com>`.
fn autolink(rest: &str, base: &str) -> Option<(String, usize)> {
    let end = rest.find('>')?;
    let url = &rest[1..end];
    let is_url = (url.starts_with("http://") || url.starts_with("https://") || url.starts_with("mailto:"))
        && !url.contains(char::is_whitespace);
    is_url.then(|| (styled(LINK, url, base), end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rendered wide enough that no line wraps.
    fn render(text: &str) -> String {
        render_at(200, text)
    }

    fn render_at(width: usize, text: &str) -> String {
        let mut renderer = MarkdownRenderer::new(width);
        let mut out = renderer.push(text);
        out.push_str(&renderer.finish());
        out
    }

    /// The text without its escape sequences.
    fn plain(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    const SAMPLE: &str = "# Title ✨\n\nSome **bold** and *italic* and _also_ and `code` here, snake_case_name stays.\n\n\
        - first item with [a link](https://example.com)\n  - nested — ünïcödé\n1. one\n2) two\n\n> quoted **words**\n\n---\n\n\
        ```rust\nlet x = *y * 2; // **not bold**\n    indented\n```\n\n| a | b |\n|---|--:|\n| x | 22 |\n\nAfter the code: ~~gone~~ and <https://x.org> and 2 * 3 * 4.\n\
        Last line without newline 日本語";

    #[test]
    fn headings_are_bold_and_coloured_without_their_hashes() {
        assert_eq!(render("# Title\n"), format!("{HEADING_1}Title{RESET}\n"));
        assert_eq!(render("## Sub ##\n"), format!("{HEADING_2}Sub{RESET}\n"));
        assert_eq!(render("#### Small"), format!("{BOLD}Small{RESET}"));
        assert_eq!(plain(&render("#hashtag")), "#hashtag", "no space after the hash: not a heading");
    }

    #[test]
    fn bold_italic_and_strikethrough_are_styled() {
        assert_eq!(render("a **b** c"), format!("a {BOLD}b{RESET} c"));
        assert_eq!(render("a __b__ c"), format!("a {BOLD}b{RESET} c"));
        assert_eq!(render("a *b* c"), format!("a {ITALIC}b{RESET} c"));
        assert_eq!(render("a _b_ c"), format!("a {ITALIC}b{RESET} c"));
        assert_eq!(render("~~gone~~"), format!("{STRIKE}gone{RESET}"));
    }

    #[test]
    fn emphasis_nests_and_restores_the_outer_style() {
        assert_eq!(render("**a *b* c**"), format!("{BOLD}a {ITALIC}b{RESET}{BOLD} c{RESET}"));
        assert_eq!(render("***both***"), format!("{BOLD}{ITALIC}both{RESET}{BOLD}{RESET}"));
    }

    #[test]
    fn lone_asterisks_and_underscores_inside_words_stay_literal() {
        for text in ["2 * 3 * 4", "snake_case_name", "file__name__x is _not_ italic", "a ** b", "**unclosed", "* * *x"]
        {
            assert_eq!(plain(&render(text)).replace('•', "*"), text.replace("_not_", "not"), "{text}");
        }
        assert_eq!(render("snake_case_name"), "snake_case_name");
    }

    #[test]
    fn inline_code_is_coloured_and_not_styled_inside() {
        assert_eq!(render("run `ls **x**` now"), format!("run {INLINE_CODE}ls **x**{RESET} now"));
        assert_eq!(render("``a ` b``"), format!("{INLINE_CODE}a ` b{RESET}"));
        assert_eq!(render("an `unclosed tick"), "an `unclosed tick");
    }

    #[test]
    fn fenced_code_blocks_lose_their_fences_and_keep_an_unstyled_indented_body() {
        let out = render("```python\nx = **y** * `z`\n\n    deeper\n```\nafter **b**\n");
        let expected =
            format!("  {CODE_BLOCK}x = **y** * `z`{RESET}\n\n  {CODE_BLOCK}    deeper{RESET}\nafter {BOLD}b{RESET}\n");
        assert_eq!(out, expected);
    }

    #[test]
    fn a_code_block_closes_only_on_a_fence_as_long_as_the_opening_one() {
        let out = render("````\n```\n# not a heading\n````\n# heading\n");
        assert_eq!(plain(&out), "  ```\n  # not a heading\nheading\n");
    }

    #[test]
    fn an_indented_fence_inside_a_list_keeps_its_body_aligned() {
        let out = render("- item\n  ```\n  code\n  ```\n");
        assert_eq!(plain(&out), "• item\n  code\n");
    }

    #[test]
    fn code_lines_are_never_wrapped() {
        let code = "let a_long_name = another_long_name + yet_another_long_name;";
        assert_eq!(plain(&render_at(20, &format!("```\n{code}\n```\n"))), format!("  {code}\n"));
    }

    #[test]
    fn paragraphs_wrap_between_words_at_the_width() {
        let out = render_at(20, "The quick brown fox jumps over the **lazy dog** today.\n");
        assert_eq!(plain(&out), "The quick brown fox\njumps over the lazy\ndog today.\n");
        assert!(out.contains(&format!("{BOLD}lazy{RESET}\n{BOLD}dog{RESET}")), "bold carried over the break: {out:?}");
    }

    #[test]
    fn list_items_wrap_under_their_text_at_every_level() {
        let out = render_at(24, "- one two three four five six\n  1. seven eight nine ten eleven\n");
        assert_eq!(plain(&out), "• one two three four\n  five six\n  1. seven eight nine\n     ten eleven\n");
    }

    #[test]
    fn block_quotes_wrap_with_the_bar_on_every_line() {
        assert_eq!(plain(&render_at(12, "> one two three four\n")), "│ one two\n│ three four\n");
    }

    #[test]
    fn a_table_is_drawn_in_a_box_with_aligned_columns() {
        let out = render("| Name | Qty | Note |\n|:--|--:|:-:|\n| apple | 3 | **red** |\n| kiwi | 12 |\n\nafter\n");
        assert_eq!(
            plain(&out),
            "┌───────┬─────┬──────┐\n\
             │ Name  │ Qty │ Note │\n\
             ├───────┼─────┼──────┤\n\
             │ apple │   3 │ red  │\n\
             │ kiwi  │  12 │      │\n\
             └───────┴─────┴──────┘\n\nafter\n"
        );
        assert!(out.contains(&format!("{BOLD}red{RESET}")), "cells are styled: {out:?}");
        assert!(!out.contains("|"), "no raw pipes: {out:?}");
    }

    #[test]
    fn a_table_too_wide_for_the_terminal_wraps_its_widest_column() {
        let out = render_at(30, "| k | text |\n|---|---|\n| a | one two three four five six seven |\n");
        let plain = plain(&out);
        assert!(plain.lines().all(|line| line.chars().count() <= 30), "{plain}");
        let rows: Vec<&str> = plain.lines().skip(3).take(2).map(str::trim_end).collect();
        assert_eq!(rows, ["│ a │ one two three four     │", "│   │ five six seven         │"], "{plain}");
    }

    #[test]
    fn a_table_at_the_end_of_the_stream_is_drawn_by_finish() {
        let mut renderer = MarkdownRenderer::new(80);
        assert_eq!(renderer.push("| a | b |\n|---|---|\n| 1 | 2 |\n"), "");
        assert!(renderer.has_pending(), "the table waits for its end");
        assert_eq!(plain(&renderer.finish()).lines().nth(3), Some("│ 1 │ 2 │"));
    }

    #[test]
    fn a_line_with_a_pipe_that_starts_no_table_stays_as_written() {
        assert_eq!(plain(&render("run a | b here\nthen more\n")), "run a | b here\nthen more\n");
        assert_eq!(plain(&render("a | b")), "a | b");
    }

    #[test]
    fn bullets_become_dots_and_keep_their_indentation() {
        assert_eq!(
            render("- one\n  * two\n    + three\n"),
            format!("{BULLET}•{RESET} one\n  {BULLET}•{RESET} two\n    {BULLET}•{RESET} three\n")
        );
        assert_eq!(plain(&render("- [ ] todo\n- [x] done\n")), "☐ todo\n☑ done\n");
    }

    #[test]
    fn numbered_items_keep_their_numbers() {
        assert_eq!(
            render("1. one\n  10) ten **b**\n"),
            format!("{BULLET}1.{RESET} one\n  {BULLET}10){RESET} ten {BOLD}b{RESET}\n")
        );
        assert_eq!(plain(&render("2024. was a year")), "2024. was a year");
    }

    #[test]
    fn block_quotes_get_a_bar_and_stay_dim_after_inner_styles() {
        assert_eq!(render("> a **b** c"), format!("{DIM}│ a {BOLD}b{RESET}{DIM} c{RESET}"));
        assert_eq!(plain(&render("> > nested\n")), "│ │ nested\n");
    }

    #[test]
    fn horizontal_rules_span_the_width() {
        assert_eq!(render_at(20, "---\n"), format!("{DIM}{}{RESET}\n", "─".repeat(20)));
        assert_eq!(plain(&render_at(20, "* * *")), "─".repeat(20));
        assert_eq!(plain(&render("--")), "--");
    }

    #[test]
    fn links_show_their_text_underlined_and_the_address_after() {
        assert_eq!(
            render("see [docs](https://d.io) now"),
            format!("see {LINK}docs{RESET}{DIM} (https://d.io){RESET} now")
        );
        assert_eq!(render("[https://d.io](https://d.io)"), format!("{LINK}https://d.io{RESET}"));
        assert_eq!(render("<https://d.io>"), format!("{LINK}https://d.io{RESET}"));
        assert_eq!(plain(&render("[not a link] (x)")), "[not a link] (x)");
        assert_eq!(plain(&render("![cat](c.png \"Cat\")")), "cat (c.png)");
    }

    #[test]
    fn backslash_escapes_show_the_character_itself() {
        assert_eq!(render(r"\*not italic\*"), "*not italic*");
    }

    #[test]
    fn plain_text_passes_through_unchanged() {
        let text =
            "Hello there, how are you? Prices: 3 < 4 > 2; path C:\\dir; emoji 🎉 and ünïcödé.\nSecond line.\n\nThird.";
        assert_eq!(render(text), text);
    }

    #[test]
    fn the_sample_loses_only_markup_when_styles_are_stripped() {
        let out = plain(&render(SAMPLE));
        assert!(
            out.starts_with("Title ✨\n\nSome bold and italic and also and code here, snake_case_name stays.\n"),
            "{out}"
        );
        assert!(
            out.contains("• first item with a link (https://example.com)\n  • nested — ünïcödé\n1. one\n2) two\n"),
            "{out}"
        );
        assert!(
            out.contains("─\n\n  let x = *y * 2; // **not bold**\n      indented\n\n┌───┬────┐\n│ a │  b │\n"),
            "{out}"
        );
        assert!(
            out.ends_with("After the code: gone and https://x.org and 2 * 3 * 4.\nLast line without newline 日本語"),
            "{out}"
        );
    }

    #[test]
    fn any_chunking_gives_the_same_output_as_one_chunk() {
        let whole = render(SAMPLE);
        for split in (0..=SAMPLE.len()).filter(|i| SAMPLE.is_char_boundary(*i)) {
            let mut renderer = MarkdownRenderer::new(200);
            let mut out = renderer.push(&SAMPLE[..split]);
            out.push_str(&renderer.push(&SAMPLE[split..]));
            out.push_str(&renderer.finish());
            assert_eq!(out, whole, "split at byte {split}");
        }
    }

    #[test]
    fn char_by_char_streaming_gives_the_same_output_as_one_chunk() {
        let mut renderer = MarkdownRenderer::new(200);
        let mut out = String::new();
        for c in SAMPLE.chars() {
            out.push_str(&renderer.push(c.encode_utf8(&mut [0; 4])));
        }
        out.push_str(&renderer.finish());
        assert_eq!(out, render(SAMPLE));
    }

    #[test]
    fn complete_lines_are_emitted_as_soon_as_their_newline_arrives() {
        let mut renderer = MarkdownRenderer::new(20);
        assert_eq!(renderer.push("**bo"), "");
        assert!(renderer.has_pending());
        assert_eq!(renderer.push("ld**\nnext"), format!("{BOLD}bold{RESET}\n"));
        assert_eq!(renderer.push(" line\r\n"), "next line\n");
        assert!(!renderer.has_pending());
        assert_eq!(renderer.finish(), "");
    }

    #[test]
    fn reset_drops_the_partial_line_and_an_open_code_block() {
        let mut renderer = MarkdownRenderer::new(20);
        renderer.push("```\npartial");
        renderer.reset();
        assert_eq!(renderer.push("**b**\n"), format!("{BOLD}b{RESET}\n"));
    }

    #[test]
    fn finish_closes_an_unterminated_code_block_for_the_next_stream() {
        let mut renderer = MarkdownRenderer::new(20);
        renderer.push("```\ncode\n");
        assert_eq!(renderer.finish(), "");
        assert_eq!(renderer.push("*i*\n"), format!("{ITALIC}i{RESET}\n"));
    }
}

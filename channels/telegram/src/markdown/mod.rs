//! Markdown as models write it → Telegram's HTML parse mode.
//!
//! Blocks are read line by line: fenced code becomes `<pre><code>` (with a `language-` class),
//! `>` quotes a `<blockquote>`, tables a `<pre>` block, headings bold lines, `-`/`*`/`+` items
//! `•` bullets, rules a dash line. Within a line: `**bold**`/`__bold__`, `*italic*`/`_italic_`, `~~strike~~`, `` `code` ``,
//! `[text](url)`, `<https://…>`. Everything else is text with `<`, `>` and `&` escaped, so the
//! result is always well-formed, and no inline tag spans a line break (the splitter relies on
//! that only for speed, not for correctness). Unclosed markers stay literal, so a reply cut
//! mid-stream renders too.

use oxibot_plugin::chat::escape::{escape, push_escaped};
use oxibot_plugin::chat::markdown::{code_span_at, is_rule, run_length};

/// Escapes an attribute value (also `"`).
fn escape_attr(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

/// Renders a whole Markdown text.
pub fn to_html(markdown: &str) -> String {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(fence) = Fence::open(lines[i]) {
            let (block, next) = code_block(&lines, i, &fence);
            out.push(block);
            i = next;
        } else if is_table_start(&lines, i) {
            let (block, next) = table_block(&lines, i);
            out.push(block);
            i = next;
        } else if quote_text(lines[i]).is_some() {
            let (block, next) = quote_block(&lines, i);
            out.push(block);
            i = next;
        } else {
            out.push(block_line(lines[i]));
            i += 1;
        }
    }
    out.join("\n")
}

/// The opening line of a fenced code block.
struct Fence {
    /// '`' or '~'.
    marker: char,
    /// How many markers opened it; the closing fence needs at least as many.
    width: usize,
    /// The indentation of the opening fence, removed from the code lines.
    indent: usize,
    /// The language named after the fence, if any.
    language: String,
}

impl Fence {
    fn open(line: &str) -> Option<Fence> {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
        let width = trimmed.chars().take_while(|c| *c == marker).count();
        let info = trimmed[width..].trim();
        if width < 3 || (marker == '`' && info.contains('`')) {
            return None;
        }
        let language = info
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || "_+#.-".contains(*c))
            .collect();
        Some(Fence { marker, width, indent: line.len() - trimmed.len(), language })
    }

    fn closes(&self, line: &str) -> bool {
        let trimmed = line.trim();
        trimmed.len() >= self.width && trimmed.chars().all(|c| c == self.marker)
    }
}

/// The code block opened at `lines[start]`, and the index of the line after it (an unclosed
/// block runs to the end).
fn code_block(lines: &[&str], start: usize, fence: &Fence) -> (String, usize) {
    let mut code = Vec::new();
    let mut i = start + 1;
    while i < lines.len() && !fence.closes(lines[i]) {
        code.push(strip_indent(lines[i], fence.indent));
        i += 1;
    }
    let class = if fence.language.is_empty() {
        String::new()
    } else {
        format!(" class=\"language-{}\"", escape_attr(&fence.language))
    };
    let block = format!("<pre><code{class}>{}</code></pre>", escape(&code.join("\n")));
    (block, (i + 1).min(lines.len()))
}

/// `line` without up to `indent` leading spaces.
fn strip_indent(line: &str, indent: usize) -> &str {
    let spaces = line.chars().take(indent).take_while(|c| *c == ' ').count();
    &line[spaces..]
}

/// Whether a table (a `|` row, then a `|---|` delimiter row) starts at `lines[i]`.
fn is_table_start(lines: &[&str], i: usize) -> bool {
    let delimiter = |line: &str| line.contains('-') && line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'));
    is_table_row(lines[i]) && lines.get(i + 1).is_some_and(|next| is_table_row(next) && delimiter(next.trim()))
}

fn is_table_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// A table as monospaced text (its columns stay aligned), and the index after it.
fn table_block(lines: &[&str], start: usize) -> (String, usize) {
    let end = lines[start..].iter().position(|line| !is_table_row(line)).map_or(lines.len(), |p| start + p);
    (format!("<pre>{}</pre>", escape(&lines[start..end].join("\n"))), end)
}

/// The text of a quote line (`> text`), without the marker.
fn quote_text(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('>')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// Consecutive quote lines from `start` as one `<blockquote>`, and the index after them.
fn quote_block(lines: &[&str], start: usize) -> (String, usize) {
    let mut quoted = Vec::new();
    let mut i = start;
    while let Some(text) = lines.get(i).and_then(|line| quote_text(line)) {
        quoted.push(block_line(text));
        i += 1;
    }
    (format!("<blockquote>{}</blockquote>", quoted.join("\n")), i)
}

/// One line outside code blocks and quotes.
fn block_line(line: &str) -> String {
    if let Some(text) = heading_text(line) {
        // The heading is bold already; bold inside it would nest `<b>` in `<b>`.
        return if text.is_empty() {
            String::new()
        } else {
            format!("<b>{}</b>", inline(text).replace("<b>", "").replace("</b>", ""))
        };
    }
    if is_rule(line) {
        return "———".to_owned();
    }
    if let Some((indent, text)) = bullet_item(line) {
        return format!("{indent}• {}", inline(text));
    }
    inline(line)
}

/// The text of an ATX heading (`## Title ##` → `Title`).
fn heading_text(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    let rest = &trimmed[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    let without_closing = text.trim_end_matches('#');
    let closed = without_closing.is_empty() || without_closing.ends_with([' ', '\t']);
    Some(if closed { without_closing.trim_end() } else { text })
}

/// A bullet item: its indentation and its text.
fn bullet_item(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let mut chars = trimmed.chars();
    let marker = chars.next().filter(|c| matches!(c, '-' | '*' | '+'))?;
    let rest = &trimmed[marker.len_utf8()..];
    rest.starts_with([' ', '\t']).then(|| (indent, rest.trim_start()))
}

/// Renders the inline Markdown of one line.
pub fn inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    render_span(&chars, &mut out);
    out
}

/// Characters a backslash makes literal.
fn is_escapable(c: char) -> bool {
    c.is_ascii_punctuation()
}

fn render_span(chars: &[char], out: &mut String) {
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let consumed = match c {
            '\\' if chars.get(i + 1).is_some_and(|n| is_escapable(*n)) => {
                push_escaped(out, chars[i + 1]);
                2
            }
            '`' => code_span(chars, i, out),
            '[' => link(chars, i, i, out),
            '!' if chars.get(i + 1) == Some(&'[') => link(chars, i, i + 1, out),
            '<' => autolink(chars, i, out),
            '*' | '_' | '~' => emphasis(chars, i, out),
            _ => 0,
        };
        if consumed == 0 {
            push_escaped(out, c);
            i += 1;
        } else {
            i += consumed;
        }
    }
}

/// A code span at `at`; writes it and returns how many characters it took (0: not one).
fn code_span(chars: &[char], at: usize, out: &mut String) -> usize {
    let Some(span) = code_span_at(chars, at) else {
        // Unmatched backticks are literal, all of them.
        let run = run_length(chars, at, '`');
        out.extend(std::iter::repeat_n('`', run));
        return run;
    };
    let mut code: String = chars[span.text].iter().collect();
    if code.len() > 2 && code.starts_with(' ') && code.ends_with(' ') && !code.trim().is_empty() {
        code = code[1..code.len() - 1].to_owned();
    }
    out.push_str("<code>");
    out.push_str(&escape(&code));
    out.push_str("</code>");
    span.end - at
}

/// The index of the bracket that closes the one at `open`, on this line.
fn closing_bracket(chars: &[char], open: usize, left: char, right: char) -> Option<usize> {
    let mut depth = 0usize;
    let mut k = open;
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 1,
            c if c == left => depth += 1,
            c if c == right => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
        k += 1;
    }
    None
}

/// A link `[text](url)` (or an image `![alt](url)`, shown as a link) starting at `at` with its
/// `[` at `bracket`; returns how many characters it took (0: not a link).
fn link(chars: &[char], at: usize, bracket: usize, out: &mut String) -> usize {
    let Some(close) = closing_bracket(chars, bracket, '[', ']') else { return 0 };
    if chars.get(close + 1) != Some(&'(') {
        return 0;
    }
    let Some(paren) = closing_bracket(chars, close + 1, '(', ')') else { return 0 };
    let target: String = chars[close + 2..paren].iter().collect();
    let url = target.split_whitespace().next().unwrap_or_default().trim_start_matches('<').trim_end_matches('>');
    if url.is_empty() {
        return 0;
    }
    let label = &chars[bracket + 1..close];
    let mut text = String::new();
    if label.is_empty() {
        text.push_str(&escape(url));
    } else {
        render_span(label, &mut text);
    }
    if has_scheme(url) {
        out.push_str(&format!("<a href=\"{}\">{text}</a>", escape_attr(url)));
    } else {
        out.push_str(&format!("{text} ({})", escape(url)));
    }
    paren + 1 - at
}

/// Whether `url` starts with a scheme (`https:`, `mailto:`, `tg:` …).
fn has_scheme(url: &str) -> bool {
    url.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    })
}

/// An autolink `<https://…>` at `at`; returns how many characters it took (0: not one).
fn autolink(chars: &[char], at: usize, out: &mut String) -> usize {
    let Some(end) = chars[at..].iter().position(|c| *c == '>').map(|p| at + p) else { return 0 };
    let url: String = chars[at + 1..end].iter().collect();
    let linkable =
        ["http://", "https://", "mailto:"].iter().any(|p| url.starts_with(p)) && !url.contains(char::is_whitespace);
    if !linkable {
        return 0;
    }
    out.push_str(&format!("<a href=\"{}\">{}</a>", escape_attr(&url), escape(&url)));
    end + 1 - at
}

/// Bold, italic or strikethrough opened at `at`; returns how many characters it took. A
/// marker run that closes nothing is written literally as a whole.
fn emphasis(chars: &[char], at: usize, out: &mut String) -> usize {
    let marker = chars[at];
    let run = run_length(chars, at, marker);
    let width = match marker {
        '~' if run == 2 => 2,
        '~' => 0,
        _ => run.min(3),
    };
    let closing = if width > 0 && run == width && may_open(chars, at, width) {
        find_closer(chars, at + width, marker, width)
    } else {
        None
    };
    let Some(close) = closing else {
        out.extend(std::iter::repeat_n(marker, run));
        return run;
    };
    let (open_tags, close_tags) = match (marker, width) {
        ('~', _) => ("<s>", "</s>"),
        (_, 1) => ("<i>", "</i>"),
        (_, 2) => ("<b>", "</b>"),
        _ => ("<b><i>", "</i></b>"),
    };
    out.push_str(open_tags);
    render_span(&chars[at + width..close], out);
    out.push_str(close_tags);
    close + width - at
}

/// Whether a marker run at `at` can open: text follows at once, and neither `_` nor a single
/// `*` sits inside a word (`snake_case` and `5*3*2` stay as they are).
fn may_open(chars: &[char], at: usize, width: usize) -> bool {
    let next_is_text = chars.get(at + width).is_some_and(|c| !c.is_whitespace());
    let word_bound = chars[at] == '_' || (chars[at] == '*' && width == 1);
    let inside_word = word_bound && at > 0 && chars[at - 1].is_alphanumeric();
    next_is_text && !inside_word
}

/// The start of the run of exactly `width` markers that closes an emphasis whose text starts at
/// `from`: preceded by text, and for `_` not followed by a letter. Code spans and escapes are
/// skipped.
fn find_closer(chars: &[char], from: usize, marker: char, width: usize) -> Option<usize> {
    let mut k = from;
    while k < chars.len() {
        let c = chars[k];
        if c == '\\' {
            k += 2;
            continue;
        }
        if c == '`' {
            k = code_span_at(chars, k).map_or(k + 1, |span| span.end);
            continue;
        }
        if c != marker {
            k += 1;
            continue;
        }
        let run = run_length(chars, k, marker);
        let after_text = k > from && !chars[k - 1].is_whitespace();
        let word_follows = marker == '_' && chars.get(k + run).is_some_and(|n| n.is_alphanumeric());
        if run == width && after_text && !word_follows {
            return Some(k);
        }
        k += run;
    }
    None
}

#[cfg(test)]
mod tests;

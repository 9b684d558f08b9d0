//! Markdown (what the model writes) to Slack's mrkdwn: `**bold**` → `*bold*`, `*italic*` →
//! `_italic_`, `[text](url)` → `<url|text>`, headings → bold lines, bullets → `•`, code kept,
//! and `&`, `<`, `>` escaped everywhere Slack would read them as markup.

use oxibot_plugin::chat::escape::{escape, push_escaped};
use oxibot_plugin::chat::markdown::{code_span_at, is_rule};

/// The mrkdwn form of `markdown`.
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut lines = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if is_fence(line) {
            in_fence = !in_fence;
            lines.push("```".to_owned());
        } else if in_fence {
            lines.push(escape(line));
        } else {
            lines.push(convert_line(line));
        }
    }
    if in_fence {
        lines.push("```".to_owned());
    }
    lines.join("\n")
}

/// Whether `line` opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with("```") || trimmed.starts_with("~~~")
}

/// One line outside code blocks.
fn convert_line(line: &str) -> String {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    if let Some(title) = heading(trimmed) {
        let plain = title.replace("**", "").replace("__", "");
        return format!("*{}*", inline(&plain));
    }
    if is_rule(trimmed) {
        return "──────────".to_owned();
    }
    if let Some(quoted) = trimmed.strip_prefix('>') {
        return format!("{indent}> {}", convert_line(quoted.trim_start()));
    }
    if let Some(item) = bullet(trimmed) {
        return format!("{indent}• {}", inline(item));
    }
    format!("{indent}{}", inline(trimmed))
}

/// The title of an ATX heading (`## Title ##`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim_end();
    (!title.is_empty()).then_some(title)
}

/// The text of a bullet item (`- x`, `* x`, `+ x`).
fn bullet(line: &str) -> Option<&str> {
    let mut chars = line.chars();
    let marker = chars.next()?;
    let space = chars.next()?;
    (matches!(marker, '-' | '*' | '+') && (space == ' ' || space == '\t')).then(|| line[2..].trim_start())
}

/// Inline Markdown to mrkdwn.
fn inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    convert_span(&chars)
}

fn convert_span(chars: &[char]) -> String {
    let mut out = String::with_capacity(chars.len());
    let mut at = 0;
    while at < chars.len() {
        match markup_at(chars, at) {
            Some((converted, next)) => {
                out.push_str(&converted);
                at = next;
            }
            None => {
                push_escaped(&mut out, chars[at]);
                at += 1;
            }
        }
    }
    out
}

/// The markup starting at `at`, converted, and the index after it; `None` for a plain char.
fn markup_at(chars: &[char], at: usize) -> Option<(String, usize)> {
    let doubled = chars.get(at + 1) == Some(&chars[at]);
    match chars[at] {
        '`' => code_span(chars, at),
        '!' if chars.get(at + 1) == Some(&'[') => link(chars, at + 1),
        '[' => link(chars, at),
        '*' | '_' if doubled => strong(chars, at),
        '*' | '_' => emphasis(chars, at),
        '~' if doubled => strikethrough(chars, at),
        '<' => angle_bracket(chars, at),
        _ => None,
    }
}

/// `` `code` `` (any number of backticks) → `` `code` `` with its text escaped.
fn code_span(chars: &[char], at: usize) -> Option<(String, usize)> {
    let span = code_span_at(chars, at)?;
    let body: String = chars[span.text].iter().collect();
    Some((format!("`{}`", escape(body.trim())), span.end))
}

/// `[label](url)` (the `[` at `at`) → `<url|label>`.
fn link(chars: &[char], at: usize) -> Option<(String, usize)> {
    let label_end = matching(chars, at, '[', ']')?;
    if chars.get(label_end + 1) != Some(&'(') {
        return None;
    }
    let target_end = matching(chars, label_end + 1, '(', ')')?;
    let target: String = chars[label_end + 2..target_end].iter().collect();
    let url = target.split_whitespace().next()?.trim_start_matches('<').trim_end_matches('>');
    if url.is_empty() {
        return None;
    }
    let label: String = chars[at + 1..label_end].iter().collect();
    let label = label.trim();
    let converted = if label.is_empty() || label == url {
        format!("<{}>", escape(url))
    } else {
        format!("<{}|{}>", escape(url), escape(label))
    };
    Some((converted, target_end + 1))
}

/// The index of the bracket closing the one at `at`, nesting counted.
fn matching(chars: &[char], at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (index, &c) in chars.iter().enumerate().skip(at) {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(index);
            }
        }
    }
    None
}

/// `**x**` or `__x__` → `*x*`.
fn strong(chars: &[char], at: usize) -> Option<(String, usize)> {
    let mark = chars[at];
    if mark == '_' && at > 0 && chars[at - 1].is_alphanumeric() {
        return None;
    }
    if chars.get(at + 2).is_none_or(|c| c.is_whitespace()) {
        return None;
    }
    let mut close = (at + 3..chars.len().saturating_sub(1))
        .find(|&i| chars[i] == mark && chars[i + 1] == mark && !chars[i - 1].is_whitespace())?;
    // `***both***`: the closing pair is the last two of the run, leaving `*both*` inside.
    while chars.get(close + 2) == Some(&mark) {
        close += 1;
    }
    let inner = convert_span(&chars[at + 2..close]);
    Some((format!("*{inner}*"), close + 2))
}

/// `*x*` or `_x_` → `_x_`.
fn emphasis(chars: &[char], at: usize) -> Option<(String, usize)> {
    let mark = chars[at];
    let word_before = at > 0 && chars[at - 1].is_alphanumeric();
    if (mark == '_' && word_before) || chars.get(at + 1).is_none_or(|c| c.is_whitespace()) {
        return None;
    }
    let close = (at + 2..chars.len()).find(|&i| {
        let word_after = chars.get(i + 1).is_some_and(|c| c.is_alphanumeric());
        chars[i] == mark && !chars[i - 1].is_whitespace() && !(mark == '_' && word_after)
    })?;
    let inner = convert_span(&chars[at + 1..close]);
    Some((format!("_{inner}_"), close + 1))
}

/// `~~x~~` → `~x~`.
fn strikethrough(chars: &[char], at: usize) -> Option<(String, usize)> {
    let close = (at + 3..chars.len().saturating_sub(1)).find(|&i| chars[i] == '~' && chars[i + 1] == '~')?;
    let inner = convert_span(&chars[at + 2..close]);
    Some((format!("~{inner}~"), close + 2))
}

/// `<https://…>` stays a link and Slack's own `<@U…>`, `<#C…>`, `<!here>` stay as they are;
/// anything else is a plain `<`.
fn angle_bracket(chars: &[char], at: usize) -> Option<(String, usize)> {
    let close = (at + 1..chars.len()).find(|&i| chars[i] == '>')?;
    let inside: String = chars[at + 1..close].iter().collect();
    if inside.is_empty() || inside.contains(char::is_whitespace) {
        return None;
    }
    let is_url = ["http://", "https://", "mailto:"].iter().any(|scheme| inside.starts_with(scheme));
    let is_slack_special = inside.starts_with('@') || inside.starts_with('#') || inside.starts_with('!');
    if is_url {
        Some((format!("<{}>", escape(&inside)), close + 1))
    } else if is_slack_special {
        Some((format!("<{inside}>"), close + 1))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::to_mrkdwn;

    #[test]
    fn bold_italic_and_strikethrough_take_slacks_markers() {
        assert_eq!(to_mrkdwn("**bold** and __strong__"), "*bold* and *strong*");
        assert_eq!(to_mrkdwn("*italic* and _also_"), "_italic_ and _also_");
        assert_eq!(to_mrkdwn("**bold with *italic* inside**"), "*bold with _italic_ inside*");
        assert_eq!(to_mrkdwn("***both***"), "*_both_*");
        assert_eq!(to_mrkdwn("~~gone~~"), "~gone~");
    }

    #[test]
    fn markers_that_are_not_emphasis_stay_as_written() {
        assert_eq!(to_mrkdwn("snake_case_name and 2 * 3 * 4"), "snake_case_name and 2 * 3 * 4");
        assert_eq!(to_mrkdwn("a lone * star and ** pair"), "a lone * star and ** pair");
        assert_eq!(to_mrkdwn("~ tilde"), "~ tilde");
    }

    #[test]
    fn links_and_images_become_slack_links() {
        assert_eq!(
            to_mrkdwn("see [the docs](https://example.com/a?b=1&c=2)"),
            "see <https://example.com/a?b=1&amp;c=2|the docs>"
        );
        assert_eq!(to_mrkdwn("![chart](https://x.io/c.png \"title\")"), "<https://x.io/c.png|chart>");
        assert_eq!(to_mrkdwn("[https://x.io](https://x.io)"), "<https://x.io>");
        assert_eq!(to_mrkdwn("<https://x.io/a>"), "<https://x.io/a>");
        assert_eq!(to_mrkdwn("[not a link] (x)"), "[not a link] (x)");
    }

    #[test]
    fn headings_become_bold_lines_and_bullets_become_dots() {
        assert_eq!(to_mrkdwn("# Title\n## Sub **part** ##"), "*Title*\n*Sub part*");
        assert_eq!(to_mrkdwn("- one\n* two\n  + nested **b**\n1. first"), "• one\n• two\n  • nested *b*\n1. first");
        assert_eq!(to_mrkdwn("#hashtag"), "#hashtag");
        assert_eq!(to_mrkdwn("---"), "──────────");
    }

    #[test]
    fn special_characters_are_escaped_but_quotes_and_slack_mentions_survive() {
        assert_eq!(to_mrkdwn("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(to_mrkdwn("> quoted *text*"), "> quoted _text_");
        assert_eq!(to_mrkdwn("hi <@U123> in <#C1> <!here>"), "hi <@U123> in <#C1> <!here>");
        assert_eq!(to_mrkdwn("<div>"), "&lt;div&gt;");
    }

    #[test]
    fn code_is_kept_verbatim_apart_from_escaping() {
        assert_eq!(to_mrkdwn("run `a **b** < c`"), "run `a **b** &lt; c`");
        assert_eq!(
            to_mrkdwn("```rust\nlet x = **y** && z;\n```\nafter **b**"),
            "```\nlet x = **y** &amp;&amp; z;\n```\nafter *b*"
        );
        assert_eq!(to_mrkdwn("```\nnever closed"), "```\nnever closed\n```");
        assert_eq!(to_mrkdwn("``code with ` tick``"), "`code with ` tick`");
    }
}

//! The frontmatter of a `SKILL.md`: a small parser for the part of YAML that skills use.
//!
//! A skill file may open with a block between two `---` lines. Inside it, each top-level line
//! is `key: value`, where the value is a quoted string, a boolean, a number, inline JSON
//! (`{…}` or `[…]`, as nanobot writes `metadata`), or plain text. Lines indented under a key
//! continue it: a nested mapping, a `- item` list, JSON spread over several lines (trailing
//! commas allowed, as OpenClaw writes it), or a `|` / `>` block string. Anything this parser
//! does not understand comes back as text, never as an error: a skill with odd frontmatter
//! should still load.

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};

/// The parsed frontmatter of one file: its keys and their values as JSON values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frontmatter {
    /// Top-level keys in the order of their names.
    fields: BTreeMap<String, Value>,
}

impl Frontmatter {
    /// Parses the text between the two `---` lines.
    pub fn parse(block: &str) -> Frontmatter {
        let lines: Vec<Line<'_>> = block.lines().map(Line::new).collect();
        Frontmatter { fields: mapping(&lines) }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The value of `key` if it is a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// The value of `key` if it is a boolean.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }
}

/// Splits `text` into its frontmatter, if it opens with one, and the body that follows.
///
/// Without an opening `---` line, or without a closing `---` (or `...`) line, the whole text is
/// the body.
pub fn split(text: &str) -> (Option<Frontmatter>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return (None, text),
    }
    let start = text.len() - lines.clone().map(str::len).sum::<usize>();
    let mut offset = start;
    for line in lines {
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            let block = &text[start..offset];
            return (Some(Frontmatter::parse(block)), &text[offset + line.len()..]);
        }
        offset += line.len();
    }
    (None, text)
}

/// One line of the block, with its indentation measured and trailing space removed.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    /// Leading spaces or tabs; `usize::MAX` for a blank line, so that blank lines always belong
    /// to the key above them.
    indent: usize,
    /// The text after the indentation.
    text: &'a str,
}

impl<'a> Line<'a> {
    fn new(raw: &'a str) -> Line<'a> {
        let raw = raw.trim_end();
        let text = raw.trim_start_matches([' ', '\t']);
        let indent = if text.is_empty() { usize::MAX } else { raw.len() - text.len() };
        Line { indent, text }
    }

    fn is_blank(&self) -> bool {
        self.text.is_empty()
    }
}

/// Parses `key: value` lines at one level, each with the more-indented lines under it.
fn mapping(lines: &[Line<'_>]) -> BTreeMap<String, Value> {
    let mut fields = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let end = i + 1 + lines[i + 1..].iter().take_while(|l| l.indent > line.indent).count();
        if !line.is_blank()
            && !line.text.starts_with('#')
            && let Some((key, first)) = line.text.split_once(':')
        {
            let key = unquote_key(key.trim());
            fields.insert(key, value(first.trim(), &lines[i + 1..end]));
        }
        i = end;
    }
    fields
}

/// A key without the quotes YAML allows around it.
fn unquote_key(key: &str) -> String {
    let quoted = key.len() >= 2
        && ((key.starts_with('"') && key.ends_with('"')) || (key.starts_with('\'') && key.ends_with('\'')));
    if quoted { key[1..key.len() - 1].to_string() } else { key.to_string() }
}

/// The value of a key whose line ends in `first`, with `children` indented under it.
fn value(first: &str, children: &[Line<'_>]) -> Value {
    if first.starts_with('|') || first.starts_with('>') {
        return Value::String(block_string(first.starts_with('>'), children));
    }
    let content: Vec<&Line<'_>> = children.iter().filter(|l| !l.is_blank()).collect();
    let Some(head) = content.first() else {
        return scalar(first);
    };
    if first.is_empty() && head.text.starts_with('-') {
        return sequence(&content);
    }
    let joined = std::iter::once(first).chain(content.iter().map(|l| l.text)).collect::<Vec<_>>();
    if first.is_empty() && !head.text.starts_with(['{', '[']) {
        return Value::Object(mapping(children).into_iter().collect::<Map<_, _>>());
    }
    if joined.concat().starts_with(['{', '[']) {
        return json_or_text(joined.join("\n").trim());
    }
    // A plain string broken over several lines: YAML folds the breaks into spaces.
    scalar(&joined.join(" "))
}

/// A `- item` list; each item is read as a scalar.
fn sequence(content: &[&Line<'_>]) -> Value {
    let indent = content.iter().map(|l| l.indent).min().unwrap_or(0);
    let items = content
        .iter()
        .filter(|l| l.indent == indent)
        .filter_map(|l| l.text.strip_prefix('-'))
        .map(|item| scalar(item.trim()))
        .collect();
    Value::Array(items)
}

/// A `|` (keep line breaks) or `>` (fold lines into spaces) block string.
fn block_string(folded: bool, children: &[Line<'_>]) -> String {
    let indent = children.iter().map(|l| l.indent).min().unwrap_or(0);
    let lines: Vec<String> = children
        .iter()
        .map(|l| if l.is_blank() { String::new() } else { format!("{}{}", " ".repeat(l.indent - indent), l.text) })
        .collect();
    if !folded {
        return lines.join("\n").trim_end().to_string();
    }
    let mut out = String::new();
    for line in &lines {
        if line.is_empty() {
            out.push('\n');
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out.trim_end().to_string()
}

/// A single-line value.
fn scalar(text: &str) -> Value {
    if text.starts_with('"') || text.starts_with('\'') {
        return Value::String(quoted(text));
    }
    if text.starts_with(['{', '[']) {
        return json_or_text(text);
    }
    // In a plain value, ` #` starts a comment.
    let text = text.find(" #").map_or(text, |at| &text[..at]).trim();
    match text.to_ascii_lowercase().as_str() {
        "" | "~" | "null" => return Value::Null,
        "true" | "yes" | "on" => return Value::Bool(true),
        "false" | "no" | "off" => return Value::Bool(false),
        _ => {}
    }
    number(text).unwrap_or_else(|| Value::String(text.to_string()))
}

/// An integer or finite decimal, if `text` is one.
fn number(text: &str) -> Option<Value> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(Value::Number(n.into()));
    }
    let looks_numeric = text.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.');
    let f = text.parse::<f64>().ok().filter(|_| looks_numeric)?;
    Number::from_f64(f).map(Value::Number)
}

/// The text of a quoted string; anything after the closing quote (a comment) is ignored.
fn quoted(text: &str) -> String {
    if text.starts_with('"') {
        let end = closing_double_quote(text).unwrap_or(text.len());
        let literal = &text[..end];
        return serde_json::from_str::<String>(literal).unwrap_or_else(|_| literal.trim_matches('"').to_string());
    }
    let inner = &text[1..];
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            out.push(c);
        } else if chars.peek() == Some(&'\'') {
            out.push('\'');
            chars.next();
        } else {
            break;
        }
    }
    out
}

/// The byte just past the closing `"` of a double-quoted string that starts `text`.
fn closing_double_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(at + 1),
            _ => {}
        }
    }
    None
}

/// `text` as JSON; failing that, JSON without trailing commas; failing that, a flow list of
/// plain items (`[gh, git]`); failing that, the text itself.
fn json_or_text(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str(text) {
        return value;
    }
    if let Ok(value) = serde_json::from_str(&without_trailing_commas(text)) {
        return value;
    }
    if let Some(items) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'))
        && !items.contains(['{', '[', '"', '\''])
    {
        let items = items.split(',').map(str::trim).filter(|i| !i.is_empty()).map(scalar).collect();
        return Value::Array(items);
    }
    Value::String(text.to_string())
}

/// `text` with every comma that is followed only by whitespace and a closing bracket removed,
/// outside string literals.
fn without_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for (at, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == ',' && text[at + 1..].trim_start().starts_with(['}', ']']) {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoted_strings_booleans_and_json_metadata_are_parsed() {
        let text = "---\nname: \"github\"\ndescription: 'Use the ''gh'' CLI' # a comment\nalways: false\n\
                    metadata: {\"nanobot\":{\"requires\":{\"bins\":[\"gh\"],\"env\":[\"GITHUB_TOKEN\"]}}}\n---\n# Body\n";
        let (front, body) = split(text);
        let front = front.expect("frontmatter");
        assert_eq!(front.str("name"), Some("github"));
        assert_eq!(front.str("description"), Some("Use the 'gh' CLI"));
        assert_eq!(front.bool("always"), Some(false));
        assert_eq!(
            front.get("metadata"),
            Some(&json!({"nanobot": {"requires": {"bins": ["gh"], "env": ["GITHUB_TOKEN"]}}}))
        );
        assert_eq!(body, "# Body\n");
    }

    #[test]
    fn plain_values_are_text_numbers_or_booleans() {
        let front = Frontmatter::parse("always: True\ncount: 3\nratio: 0.5\nname: weather  # comment\nempty:\n");
        assert_eq!(front.bool("always"), Some(true));
        assert_eq!(front.get("count"), Some(&json!(3)));
        assert_eq!(front.get("ratio"), Some(&json!(0.5)));
        assert_eq!(front.str("name"), Some("weather"));
        assert_eq!(front.get("empty"), Some(&Value::Null));
    }

    #[test]
    fn missing_or_unclosed_frontmatter_leaves_the_whole_text_as_body() {
        assert_eq!(split("# Just a body\n"), (None, "# Just a body\n"));
        assert_eq!(split("---\nname: x\nno closing line\n"), (None, "---\nname: x\nno closing line\n"));
        assert_eq!(split(""), (None, ""));
    }

    #[test]
    fn crlf_lines_and_a_byte_order_mark_are_accepted() {
        let (front, body) = split("\u{feff}---\r\nname: tmux\r\n---\r\nbody\r\n");
        assert_eq!(front.expect("frontmatter").str("name"), Some("tmux"));
        assert_eq!(body, "body\r\n");
    }

    #[test]
    fn multi_line_json_with_trailing_commas_is_read_as_openclaw_writes_it() {
        let block = "metadata:\n  {\n    \"openclaw\":\n      {\n        \"requires\": { \"bins\": [\"gh\"] },\n      },\n  }\n";
        let front = Frontmatter::parse(block);
        assert_eq!(front.get("metadata"), Some(&json!({"openclaw": {"requires": {"bins": ["gh"]}}})));
    }

    #[test]
    fn nested_mappings_lists_and_flow_lists_are_read() {
        let block = "metadata:\n  oxibot:\n    always: yes\n    requires:\n      bins: [curl, jq]\n      env:\n        - API_KEY\n";
        let front = Frontmatter::parse(block);
        let expected = json!({"oxibot": {"always": true, "requires": {"bins": ["curl", "jq"], "env": ["API_KEY"]}}});
        assert_eq!(front.get("metadata"), Some(&expected));
    }

    #[test]
    fn block_strings_keep_or_fold_their_lines() {
        let front = Frontmatter::parse("literal: |\n  one\n  two\nfolded: >\n  one\n  two\n\n  three\nafter: x\n");
        assert_eq!(front.str("literal"), Some("one\ntwo"));
        assert_eq!(front.str("folded"), Some("one two\nthree"));
        assert_eq!(front.str("after"), Some("x"));
    }

    #[test]
    fn broken_json_and_odd_lines_come_back_as_text() {
        let front = Frontmatter::parse("metadata: {not json\n# comment: ignored\njust words\nname: ok\n");
        assert_eq!(front.str("metadata"), Some("{not json"));
        assert_eq!(front.get("# comment"), None);
        assert_eq!(front.str("name"), Some("ok"));
    }
}

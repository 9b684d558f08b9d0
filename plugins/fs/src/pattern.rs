//! Path filters for `glob` and `grep`: shell-style glob patterns and file-type shorthands.

use std::path::Path;

use regex::Regex;

/// A shell-style glob compiled to a regex over `/`-separated relative paths.
///
/// `*` and `?` stay within one path segment, `**` spans segments (`src/**/*.rs` also matches
/// `src/main.rs`), `[abc]`, `[a-z]`, `[!abc]` and `{a,b}` work, and `\` escapes the next
/// character. A pattern without `/` (and not starting with `**`) matches the file name at
/// any depth, so `*.rs` finds every Rust file; other patterns match the whole path relative
/// to the search root.
#[derive(Debug, Clone)]
pub struct Glob {
    regex: Regex,
    name_only: bool,
}

impl Glob {
    /// Compiles `pattern`, with an error the model can act on.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let trimmed = pattern.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Err("the glob pattern is empty; give one such as *.py or src/**/*.rs".to_owned());
        }
        let name_only = !trimmed.contains('/') && !trimmed.starts_with("**");
        let source = translate(trimmed).map_err(|why| format!("invalid glob pattern '{pattern}': {why}"))?;
        let regex = Regex::new(&format!("^{source}$")).map_err(|e| format!("invalid glob pattern '{pattern}': {e}"))?;
        Ok(Glob { regex, name_only })
    }

    /// Whether `relative` (a path relative to the search root) matches.
    pub fn matches(&self, relative: &Path) -> bool {
        if self.name_only {
            return relative.file_name().is_some_and(|name| self.regex.is_match(&name.to_string_lossy()));
        }
        self.regex.is_match(&relative.to_string_lossy())
    }
}

/// The regex source for a glob pattern.
fn translate(pattern: &str) -> Result<String, &'static str> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut braces = 0usize;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                i += 1;
                if chars.get(i + 1) == Some(&'/') {
                    out.push_str("(?:[^/]*/)*");
                    i += 1;
                } else {
                    out.push_str(".*");
                }
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => i = translate_class(&chars, i, &mut out),
            '{' => {
                braces += 1;
                out.push_str("(?:");
            }
            '}' if braces > 0 => {
                braces -= 1;
                out.push(')');
            }
            ',' if braces > 0 => out.push('|'),
            '\\' if i + 1 < chars.len() => {
                i += 1;
                out.push_str(&regex::escape(&chars[i].to_string()));
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    if braces > 0 {
        return Err("a { has no matching }");
    }
    Ok(out)
}

/// Translates the class starting at `chars[start] == '['`; returns the index of its `]`.
/// A `[` without a closing `]` is taken literally.
fn translate_class(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut j = start + 1;
    let negated = matches!(chars.get(j), Some('!' | '^'));
    if negated {
        j += 1;
    }
    let first = j;
    if chars.get(j) == Some(&']') {
        j += 1;
    }
    while j < chars.len() && chars[j] != ']' {
        j += 1;
    }
    if j >= chars.len() {
        out.push_str("\\[");
        return start;
    }
    out.push_str(if negated { "[^" } else { "[" });
    for c in &chars[first..j] {
        if matches!(c, '\\' | '[' | ']' | '&' | '~' | '^') {
            out.push('\\');
        }
        out.push(*c);
    }
    out.push(']');
    j
}

/// The file-name extensions for a `type` shorthand such as `py` or `ts`.
///
/// Unknown shorthands are taken as an extension (`type: "zig"` means `*.zig`).
pub fn type_extensions(file_type: &str) -> Vec<String> {
    let lowered = file_type.trim().trim_start_matches("*.").trim_start_matches('.').to_lowercase();
    let known: &[&str] = match lowered.as_str() {
        "py" | "python" => &["py", "pyi"],
        "js" | "javascript" => &["js", "jsx", "mjs", "cjs"],
        "ts" | "typescript" => &["ts", "tsx", "mts", "cts"],
        "md" | "markdown" => &["md", "mdx"],
        "rs" | "rust" => &["rs"],
        "sh" | "shell" => &["sh", "bash"],
        "yaml" | "yml" => &["yaml", "yml"],
        "html" => &["html", "htm"],
        "css" => &["css", "scss", "sass"],
        "c" => &["c", "h"],
        "cpp" | "c++" => &["cpp", "cc", "cxx", "hpp", "hh", "hxx", "h"],
        _ => return vec![lowered],
    };
    known.iter().map(|ext| (*ext).to_owned()).collect()
}

/// Whether the file `name` has one of `extensions` (compared without regard to case).
pub fn has_extension(name: &str, extensions: &[String]) -> bool {
    let name = name.to_lowercase();
    extensions.iter().any(|ext| {
        name.strip_suffix(ext.as_str()).and_then(|stem| stem.strip_suffix('.')).is_some_and(|stem| !stem.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).unwrap().matches(Path::new(path))
    }

    #[test]
    fn a_pattern_without_a_slash_matches_names_at_any_depth() {
        assert!(matches("*.rs", "src/deep/main.rs"));
        assert!(!matches("*.rs", "src/main.rsx"));
        assert!(matches("test_*.py", "tests/unit/test_x.py"));
    }

    #[test]
    fn a_pattern_with_a_slash_matches_the_whole_relative_path() {
        assert!(matches("src/*.rs", "src/main.rs"));
        assert!(!matches("src/*.rs", "src/a/main.rs"));
        assert!(!matches("src/*.rs", "lib/src/main.rs"));
        assert!(matches("./src/*.rs", "src/main.rs"));
    }

    #[test]
    fn double_stars_span_zero_or_more_directories() {
        assert!(matches("src/**/*.rs", "src/a/b/main.rs"));
        assert!(matches("src/**/*.rs", "src/main.rs"));
        assert!(matches("**/*.md", "README.md"));
        assert!(matches("docs/**", "docs/a/b.txt"));
        assert!(!matches("src/**/*.rs", "srcx/main.rs"));
    }

    #[test]
    fn classes_braces_and_escapes_work() {
        assert!(matches("*.{md,txt}", "notes/todo.txt"));
        assert!(matches("file?.[ch]", "file1.c"));
        assert!(!matches("file?.[!ch]", "file1.c"));
        assert!(matches("[a-c]x", "bx"));
        assert!(matches("a\\*b", "a*b") && !matches("a\\*b", "axb"));
        assert!(matches("[x", "[x"), "an unclosed [ is literal");
    }

    #[test]
    fn bad_patterns_explain_themselves() {
        assert!(Glob::new("{a,b").unwrap_err().contains("no matching }"));
        assert!(Glob::new("  ").unwrap_err().contains("empty"));
    }

    #[test]
    fn type_shorthands_expand_to_extensions() {
        let py = type_extensions("python");
        assert!(has_extension("stubs.PYI", &py));
        assert!(!has_extension("py", &py));
        assert!(!has_extension(".py", &py));
        assert!(!has_extension("happy", &py));
        assert_eq!(type_extensions("zig"), ["zig"]);
        assert_eq!(type_extensions("*.toml"), ["toml"]);
    }
}

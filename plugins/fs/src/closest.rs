//! When `edit_file` cannot find `old_text`: the part of the file most like it, shown as a
//! small unified-style diff with hints about the likely difference.
//!
//! Similarity is the Dice coefficient of character-pair counts (1.0 = same pairs, 0.0 =
//! nothing shared). Windows of as many lines as `old_text` slide over the file with the pair
//! counts updated incrementally, so the search costs about the file's size in pairs.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::matching::straight_quote;

/// Below this similarity, nothing in the file is shown as "close".
const MIN_SIMILARITY: f64 = 0.5;
/// Longest diff shown; the rest is summarised.
const MAX_DIFF_LINES: usize = 60;
/// Beyond this many line pairs the diff is skipped (it would cost too much and say little).
const MAX_DIFF_CELLS: usize = 4_000_000;

/// A pair of adjacent characters.
type Pair = (char, char);

/// The window of the file most similar to `old_text`.
#[derive(Debug, Clone, PartialEq)]
pub struct Closest<'a> {
    /// Its 1-based first line.
    pub first_line: usize,
    /// Its lines.
    pub lines: Vec<&'a str>,
    /// How alike it is, from 0.0 to 1.0.
    pub similarity: f64,
}

/// The error message for an `old_text` that is not in the file `shown`.
pub fn not_found_message(content: &str, old: &str, shown: &str) -> String {
    let wanted: Vec<&str> = old.trim_end_matches('\n').split('\n').collect();
    match closest(content, &wanted) {
        Some(best) if best.similarity >= MIN_SIMILARITY => {
            let last = best.first_line + best.lines.len() - 1;
            let mut message = format!(
                "old_text was not found in {shown}; the most similar text ({:.0}% alike) is at lines {}-{} \
                 (`-` lines are from your old_text, `+` lines are what the file has):\n{}",
                best.similarity * 100.0,
                best.first_line,
                last,
                unified_diff(&wanted, &best.lines, best.first_line, shown)
            );
            let hints = hints(&wanted.join("\n"), &best.lines.join("\n"));
            if !hints.is_empty() {
                let _ = write!(message, "\nlikely cause: {}", hints.join(", "));
            }
            message.push_str("\ncopy the exact text from read_file into old_text and try again");
            message
        }
        _ => format!(
            "old_text was not found in {shown} and no part of the file is similar to it; \
             read the file again and copy the text to replace exactly"
        ),
    }
}

/// The window of `wanted.len()` lines of `content` most similar to `wanted`.
pub fn closest<'a>(content: &'a str, wanted: &[&str]) -> Option<Closest<'a>> {
    let lines: Vec<&str> = content.trim_end_matches('\n').split('\n').collect();
    let size = wanted.len().clamp(1, lines.len());
    let mut target: HashMap<Pair, usize> = HashMap::new();
    for line in wanted {
        for pair in pairs(line) {
            *target.entry(pair).or_default() += 1;
        }
    }
    let target_total: usize = target.values().sum();
    if target_total == 0 {
        return None;
    }
    let line_pairs: Vec<Vec<Pair>> = lines.iter().map(|l| pairs(l)).collect();
    let mut window = Window { target: &target, counts: HashMap::new(), total: 0, shared: 0 };
    line_pairs[..size].iter().for_each(|p| window.add(p));
    let mut best = (window.score(target_total), 0);
    for start in 1..=lines.len() - size {
        window.remove(&line_pairs[start - 1]);
        window.add(&line_pairs[start + size - 1]);
        let score = window.score(target_total);
        if score > best.0 {
            best = (score, start);
        }
    }
    let (similarity, start) = best;
    Some(Closest { first_line: start + 1, lines: lines[start..start + size].to_vec(), similarity })
}

/// Pair counts of the current window, and how many of them `target` shares.
struct Window<'t> {
    target: &'t HashMap<Pair, usize>,
    counts: HashMap<Pair, usize>,
    total: usize,
    shared: usize,
}

impl Window<'_> {
    fn add(&mut self, pairs: &[Pair]) {
        for pair in pairs {
            let count = self.counts.entry(*pair).or_default();
            if *count < self.target.get(pair).copied().unwrap_or(0) {
                self.shared += 1;
            }
            *count += 1;
        }
        self.total += pairs.len();
    }

    fn remove(&mut self, pairs: &[Pair]) {
        for pair in pairs {
            let count = self.counts.entry(*pair).or_default();
            *count = count.saturating_sub(1);
            if *count < self.target.get(pair).copied().unwrap_or(0) {
                self.shared -= 1;
            }
        }
        self.total -= pairs.len();
    }

    fn score(&self, target_total: usize) -> f64 {
        2.0 * self.shared as f64 / (target_total + self.total) as f64
    }
}

/// The adjacent character pairs of `line`.
fn pairs(line: &str) -> Vec<Pair> {
    let chars: Vec<char> = line.chars().collect();
    chars.windows(2).map(|w| (w[0], w[1])).collect()
}

/// How alike two short strings are (used to suggest file names), from 0.0 to 1.0.
///
/// Both are lowercased and padded with a space at each end, so first and last characters
/// count as much as the middle ones.
pub fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (format!(" {} ", a.to_lowercase()), format!(" {} ", b.to_lowercase()));
    let mut counts: HashMap<Pair, usize> = HashMap::new();
    for pair in pairs(&a) {
        *counts.entry(pair).or_default() += 1;
    }
    let b_pairs = pairs(&b);
    let total = counts.values().sum::<usize>() + b_pairs.len();
    let mut window = Window { target: &counts, counts: HashMap::new(), total: 0, shared: 0 };
    window.add(&b_pairs);
    2.0 * window.shared as f64 / total as f64
}

/// A unified-style line diff of `ours` (old_text) against `theirs` (the file, starting at
/// 1-based line `their_start`): ` ` both, `-` only ours, `+` only theirs.
pub fn unified_diff(ours: &[&str], theirs: &[&str], their_start: usize, shown: &str) -> String {
    let their_end = their_start + theirs.len().saturating_sub(1);
    let mut out = format!("--- old_text\n+++ {shown} (lines {their_start}-{their_end})\n");
    if ours.len().saturating_mul(theirs.len()) > MAX_DIFF_CELLS {
        out.push_str("(too long to compare line by line)");
        return out;
    }
    let lines = diff_lines(ours, theirs);
    for line in lines.iter().take(MAX_DIFF_LINES) {
        out.push_str(line);
        out.push('\n');
    }
    if lines.len() > MAX_DIFF_LINES {
        let _ = writeln!(out, "… ({} more diff lines)", lines.len() - MAX_DIFF_LINES);
    }
    out.pop();
    out
}

/// The diff lines from a longest-common-subsequence table.
fn diff_lines(ours: &[&str], theirs: &[&str]) -> Vec<String> {
    let (n, m) = (ours.len(), theirs.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if ours[i] == theirs[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && ours[i] == theirs[j] {
            out.push(format!(" {}", ours[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("-{}", ours[i]));
            i += 1;
        } else {
            out.push(format!("+{}", theirs[j]));
            j += 1;
        }
    }
    out
}

/// Short reasons why `ours` and `theirs` differ, when the difference is of a common kind.
pub fn hints(ours: &str, theirs: &str) -> Vec<&'static str> {
    let mut hints = Vec::new();
    if ours == theirs {
        return hints;
    }
    if ours.to_lowercase() == theirs.to_lowercase() {
        hints.push("upper/lower case differs");
    }
    let squeeze = |s: &str| s.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>();
    if squeeze(ours) == squeeze(theirs) {
        hints.push("spaces or tabs differ");
    }
    let straight = |s: &str| s.chars().map(straight_quote).collect::<String>();
    if straight(ours) == straight(theirs) {
        hints.push("curly versus straight quotes");
    }
    hints
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_window_is_found_with_its_line_number() {
        let content = "fn a() {}\nfn greet(name: &str) {\n    println!(\"hi {name}\");\n}\nfn z() {}\n";
        let best = closest(content, &["fn greet(name: String) {", "    println!(\"hi {name}\");"]).unwrap();
        assert_eq!(best.first_line, 2);
        assert_eq!(best.lines, ["fn greet(name: &str) {", "    println!(\"hi {name}\");"]);
        assert!(best.similarity > 0.8, "{}", best.similarity);
    }

    #[test]
    fn old_text_longer_than_the_file_compares_against_the_whole_file() {
        let best = closest("one line", &["one line", "two lines", "three"]).unwrap();
        assert_eq!((best.first_line, best.lines.len()), (1, 1));
    }

    #[test]
    fn the_diff_marks_our_lines_and_the_files_lines() {
        let diff = unified_diff(&["a", "b", "c"], &["a", "B", "c"], 7, "f.txt");
        assert_eq!(diff, "--- old_text\n+++ f.txt (lines 7-9)\n a\n-b\n+B\n c");
    }

    #[test]
    fn a_miss_names_the_closest_lines_and_the_likely_cause() {
        let message = not_found_message("x = 1\nprint(\u{201c}hi\u{201d})\ny = 2\n", "print(\"hi\")", "a.py");
        assert!(message.contains("is at lines 2-2"), "{message}");
        assert!(message.contains("-print(\"hi\")\n+print(\u{201c}hi\u{201d})"), "{message}");
        assert!(message.ends_with("likely cause: curly versus straight quotes\ncopy the exact text from read_file into old_text and try again"), "{message}");
    }

    #[test]
    fn nothing_similar_gives_a_plain_message() {
        let message = not_found_message("alpha\nbeta\n", "zzzz qqqq", "a.txt");
        assert!(message.contains("no part of the file is similar"), "{message}");
    }

    #[test]
    fn hints_name_case_and_whitespace_differences() {
        assert_eq!(hints("Hello World", "hello world"), ["upper/lower case differs"]);
        assert_eq!(hints("a  b", "a b"), ["spaces or tabs differ"]);
    }

    #[test]
    fn similar_file_names_score_high() {
        assert!(similarity("main.rs", "mian.rs") > 0.5);
        assert!(similarity("main.rs", "README.md") < 0.3);
    }
}

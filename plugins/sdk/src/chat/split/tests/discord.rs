//! The splitter with Discord's rules: 2000 characters of Markdown.

use crate::chat::split::atoms::is_fence;
use crate::chat::split::*;

fn split_message(text: &str, limit: usize) -> Vec<String> {
    split(text, SplitRules::DISCORD.with_limit(limit))
}

fn fences(part: &str) -> usize {
    part.lines().filter(|line| is_fence(line)).count()
}

/// `words` words, `word0 word1 …`.
pub(super) fn prose(words: usize) -> String {
    (0..words).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn paragraphs_are_kept_whole_when_they_fit() {
    let paragraphs = [prose(100), prose(100), prose(100)];
    let text = paragraphs.join("\n\n");
    let parts = split_message(&text, 1500);
    assert_eq!(parts.len(), 2, "{parts:#?}");
    assert_eq!(parts[0], paragraphs[..2].join("\n\n"));
    assert_eq!(parts[1], paragraphs[2]);
}

#[test]
fn a_code_block_cut_between_parts_is_closed_and_reopened_with_its_language() {
    let code: Vec<String> = (0..80).map(|i| format!("let value_{i:03} = compute({i});")).collect();
    let text = format!("Here is the code:\n\n```rust\n{}\n```\n\nThat is all.", code.join("\n"));
    let parts = split_message(&text, 1000);
    assert!(parts.len() >= 3, "{parts:#?}");
    for part in &parts {
        assert!(part.chars().count() <= 1000);
        assert_eq!(fences(part) % 2, 0, "unbalanced fences in {part}");
    }
    assert!(parts[1].starts_with("```rust\n"), "{}", parts[1]);
    let rejoined: String = parts.concat();
    for line in &code {
        assert!(rejoined.contains(line.as_str()), "lost {line}");
    }
    assert!(parts.last().unwrap().ends_with("That is all."));
}

#[test]
fn every_part_fits_whatever_the_text() {
    let text = format!("{}\n```\n{}\n{}\n```\n{}", prose(300), "y".repeat(2500), prose(200), prose(50));
    for limit in [20, 100, 2000] {
        for part in split_message(&text, limit) {
            assert!(part.chars().count() <= limit, "{} > {limit}", part.chars().count());
        }
    }
}

//! The splitter with Slack's rules: 3900 characters of mrkdwn.

use crate::chat::split::atoms::is_fence;
use crate::chat::split::*;

fn split_message(text: &str, limit: usize) -> Vec<String> {
    split(text, SplitRules::SLACK.with_limit(limit))
}

fn lines(count: usize, width: usize) -> String {
    (0..count).map(|n| format!("{n:0>width$}")).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_long_text_is_cut_at_line_boundaries_within_the_limit() {
    let text = lines(30, 9);
    let parts = split_message(&text, 50);
    assert!(parts.iter().all(|part| part.chars().count() <= 50), "{parts:?}");
    assert_eq!(parts.join("\n"), text);
    assert!(parts.iter().all(|part| part.split('\n').all(|line| line.len() == 9)));
}

#[test]
fn a_code_block_cut_in_two_is_closed_and_reopened() {
    let text = format!("intro\n```\n{}\n```\noutro", lines(12, 9));
    let parts = split_message(&text, 60);
    assert!(parts.len() > 2, "{parts:?}");
    for part in &parts {
        assert!(part.chars().count() <= 60, "{part:?}");
        let fences = part.lines().filter(|line| is_fence(line)).count();
        assert_eq!(fences % 2, 0, "unbalanced fences in {part:?}");
    }
    let rejoined: String = parts.join("\n").replace("\n```\n```\n", "\n");
    assert_eq!(rejoined, text);
}

#[test]
fn a_code_block_opening_on_the_last_line_of_a_part_moves_to_the_next_part() {
    let text = format!("{}\n```\n{}\n```", "a".repeat(30), "b".repeat(30));
    let parts = split_message(&text, 40);
    assert_eq!(parts, ["a".repeat(30), format!("```\n{}\n```", "b".repeat(30))]);
}

//! What every set of rules promises, checked over many generated texts: parts fit, fences
//! and tags stay balanced, nothing visible is lost.

use crate::chat::split::atoms::is_fence;
use crate::chat::split::*;

/// A deterministic stream of pseudo-random numbers.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % sides
    }
}

/// Markdown with words of every width, blank lines, code blocks and a few wide characters.
fn markdown(dice: &mut Dice) -> String {
    let words = ["a", "word", "mot", "é", "😀", "longerword", "x"];
    let mut text = String::new();
    for _ in 0..dice.roll(400) + 50 {
        match dice.roll(30) {
            0 => text.push_str("\n\n"),
            1 | 2 => text.push('\n'),
            3 => text.push_str(if dice.roll(2) == 0 { "\n```rust\n" } else { "\n```\n" }),
            4 => text.push_str(&"z".repeat(dice.roll(90))),
            _ => {
                text.push_str(words[dice.roll(words.len())]);
                text.push(' ');
            }
        }
    }
    text
}

fn solid(text: &str) -> String {
    text.lines().filter(|line| !is_fence(line)).flat_map(str::split_whitespace).collect()
}

#[test]
fn markdown_parts_fit_keep_fences_balanced_and_lose_nothing_for_every_measure() {
    let mut dice = Dice(7);
    for round in 0..600 {
        let text = markdown(&mut dice);
        let measure = [Measure::Chars, Measure::Utf16, Measure::Bytes][round % 3];
        let limit = [20, 33, 64, 150, 500][round % 5];
        let parts = split(&text, SplitRules { limit, measure, markup: Markup::Markdown });
        // A text that fits is sent as written, an unclosed block and all.
        let as_written = parts.len() == 1 && parts[0] == text.trim_matches('\n');
        for part in &parts {
            assert!(measure.of(part) <= limit, "{} > {limit} ({measure:?}): {part:?}", measure.of(part));
            let fences = part.lines().filter(|line| is_fence(line)).count();
            assert!(fences % 2 == 0 || as_written, "unbalanced: {part:?}");
        }
        assert_eq!(solid(&parts.join("\n")), solid(&text), "round {round}");
    }
}

#[test]
fn html_parts_fit_keep_tags_balanced_and_lose_nothing_visible() {
    let mut dice = Dice(11);
    for round in 0..300 {
        let mut html = String::new();
        for _ in 0..dice.roll(200) + 20 {
            match dice.roll(12) {
                0 => html.push_str("<b>bold words</b> "),
                1 => html.push_str("<pre><code class=\"language-rs\">let a = 1;\nlet b = 2;</code></pre>\n"),
                2 => html.push_str("&lt;&amp;&gt; "),
                3 => html.push('\n'),
                _ => html.push_str("plain 😀 text "),
            }
        }
        let limit = [60, 100, 4096][round % 3];
        let parts = split(&html, SplitRules::TELEGRAM.with_limit(limit));
        for part in &parts {
            assert!(Measure::Utf16.of(part) <= limit, "{part:?}");
            assert_eq!(part.matches("<b>").count(), part.matches("</b>").count(), "{part:?}");
            assert_eq!(part.matches("<pre>").count(), part.matches("</pre>").count(), "{part:?}");
        }
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        let seen: String = parts.iter().map(|part| visible_text(part)).collect();
        assert_eq!(squash(&seen), squash(&visible_text(&html)), "round {round}");
    }
}

#[test]
fn bytes_are_counted_when_the_rules_say_so() {
    let rules = SplitRules { limit: 20, measure: Measure::Bytes, markup: Markup::Markdown };
    let parts = split(&"é".repeat(15), rules);
    assert_eq!(parts, ["é".repeat(10), "é".repeat(5)]);
}

#[test]
fn a_code_block_edge_is_a_paragraph_break() {
    let prose = "word ".repeat(14);
    let text = format!("{}\n```\n{}\n```\nafter", prose.trim_end(), "code line\n".repeat(5).trim_end());
    let parts = split(&text, SplitRules::DISCORD.with_limit(100));
    assert_eq!(parts[0], prose.trim_end());
    assert!(parts[1].starts_with("```\ncode line"), "{parts:?}");
}

#[test]
fn a_part_never_ends_with_an_empty_code_block() {
    let text = format!("{}\n```python\n{}\n```", "a".repeat(25), "b".repeat(40));
    for limit in 40..70 {
        for part in split(&text, SplitRules::SLACK.with_limit(limit)) {
            assert!(!part.contains("```python\n```"), "{part:?}");
        }
    }
}

#[test]
fn an_unclosed_code_block_in_a_text_that_fits_is_left_as_written() {
    assert_eq!(split("```\nnever closed", SplitRules::DISCORD), ["```\nnever closed"]);
}

#[test]
fn a_fence_line_too_long_to_reopen_is_kept_as_text_and_every_part_still_fits() {
    let text = format!("```{}\n{}\n```", "l".repeat(30), "c ".repeat(40));
    for part in split(&text, SplitRules::DISCORD.with_limit(25)) {
        assert!(part.chars().count() <= 25, "{part:?}");
    }
}

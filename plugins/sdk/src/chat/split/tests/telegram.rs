//! The splitter with Telegram's rules: 4096 UTF-16 units of HTML.

use crate::chat::split::*;

fn split_html(html: &str, limit: usize) -> Vec<String> {
    split(html, SplitRules::TELEGRAM.with_limit(limit))
}

fn lengths(parts: &[String]) -> Vec<usize> {
    parts.iter().map(|p| Measure::Utf16.of(p)).collect()
}

#[test]
fn parts_end_at_paragraph_breaks_when_one_leaves_the_part_half_full() {
    let html = format!("{}\n\n{}\n{}", "a".repeat(60), "b".repeat(30), "c".repeat(30));
    assert_eq!(split_html(&html, 100), ["a".repeat(60), format!("{}\n{}", "b".repeat(30), "c".repeat(30))]);
}

#[test]
fn without_a_paragraph_break_a_part_ends_at_a_line_then_at_a_space() {
    let html = format!("{}\n{} {}", "a".repeat(30), "b".repeat(40), "c".repeat(40));
    assert_eq!(split_html(&html, 80), [format!("{}\n{}", "a".repeat(30), "b".repeat(40)), "c".repeat(40)]);
    let words = "word ".repeat(30);
    let parts = split_html(&words, 50);
    assert!(parts.iter().all(|p| p.split(' ').all(|w| w == "word")), "{parts:?}");
}

#[test]
fn a_long_word_is_cut_where_the_limit_falls() {
    assert_eq!(split_html(&"x".repeat(25), 10), ["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
}

#[test]
fn no_part_exceeds_the_limit_and_nothing_visible_is_lost() {
    let paragraph = "para <i>it</i> &amp; &lt;x&gt; ".repeat(40);
    let code = "let x = 1 &lt; 2;\n".repeat(30);
    let html = format!(
        "<b>Head</b>\n\n{paragraph}\n<pre><code>{code}</code></pre>\n<blockquote>{}</blockquote>",
        "quoted ".repeat(50)
    );
    let parts = split_html(&html, 200);
    assert!(lengths(&parts).iter().all(|l| *l <= 200), "{:?}", lengths(&parts));
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let joined: String = parts.iter().map(|p| visible_text(p)).collect();
    assert_eq!(squash(&joined), squash(&visible_text(&html)));
}

#[test]
fn a_code_block_cut_in_two_is_closed_and_reopened_with_its_language() {
    let html = format!("<pre><code class=\"language-rs\">{}</code></pre>", "line;\n".repeat(20));
    let parts = split_html(&html, 80);
    assert!(parts.len() > 1);
    for part in &parts {
        assert!(part.starts_with("<pre><code class=\"language-rs\">") && part.ends_with("</code></pre>"), "{part}");
    }
}

#[test]
fn tags_and_entities_are_never_divided() {
    let html = "&amp;".repeat(10) + "<a href=\"https://example.org/very/long\">x</a>";
    for limit in 40..60 {
        for part in split_html(&html, limit) {
            assert!(!part.contains("&am") || part.matches("&amp;").count() == part.matches('&').count(), "{part}");
            assert_eq!(part.matches('<').count(), part.matches('>').count(), "{part}");
        }
    }
}

#[test]
fn the_visible_text_drops_tags_and_decodes_entities() {
    assert_eq!(visible_text("<b>a &lt; b</b> &amp; <a href=\"x\">c</a>"), "a < b & c");
}

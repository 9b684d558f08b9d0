//! Unit tests of the Markdown → Telegram HTML renderer.

use super::*;

#[test]
fn plain_text_has_its_angle_brackets_and_ampersands_escaped() {
    assert_eq!(to_html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
    assert_eq!(to_html("<b>not bold</b>"), "&lt;b&gt;not bold&lt;/b&gt;");
}

#[test]
fn bold_italic_and_strikethrough_become_tags() {
    assert_eq!(to_html("**bold** and __also__"), "<b>bold</b> and <b>also</b>");
    assert_eq!(to_html("*italic* and _this_"), "<i>italic</i> and <i>this</i>");
    assert_eq!(to_html("~~gone~~ ***both***"), "<s>gone</s> <b><i>both</i></b>");
    assert_eq!(to_html("**bold with *italic* inside**"), "<b>bold with <i>italic</i> inside</b>");
}

#[test]
fn markers_that_close_nothing_or_sit_inside_words_stay_literal() {
    assert_eq!(to_html("2 * 3 * 4 and 5*3*2"), "2 * 3 * 4 and 5*3*2");
    assert_eq!(to_html("snake_case_name and __init__.py"), "snake_case_name and <b>init</b>.py");
    assert_eq!(to_html("an **unclosed bold"), "an **unclosed bold");
    assert_eq!(to_html("~ approx ~"), "~ approx ~");
    assert_eq!(to_html(r"\*not italic\*"), "*not italic*");
}

#[test]
fn inline_code_is_escaped_and_not_formatted() {
    assert_eq!(to_html("run `a < b && **c**` now"), "run <code>a &lt; b &amp;&amp; **c**</code> now");
    assert_eq!(to_html("``code with ` tick``"), "<code>code with ` tick</code>");
    assert_eq!(to_html("a lone ` tick"), "a lone ` tick");
    assert_eq!(to_html("*italic `with * star` end*"), "<i>italic <code>with * star</code> end</i>");
}

#[test]
fn fenced_code_becomes_pre_code_with_its_language() {
    let markdown = "Look:\n```rust\nfn main() { println!(\"<hi>\"); }\n```\nDone";
    assert_eq!(
        to_html(markdown),
        "Look:\n<pre><code class=\"language-rust\">fn main() { println!(\"&lt;hi&gt;\"); }</code></pre>\nDone"
    );
    assert_eq!(to_html("~~~\n**raw**\n~~~"), "<pre><code>**raw**</code></pre>");
}

#[test]
fn an_unclosed_code_fence_runs_to_the_end_as_a_stream_cut_midway_does() {
    assert_eq!(to_html("```py\nx = 1\ny = 2"), "<pre><code class=\"language-py\">x = 1\ny = 2</code></pre>");
}

#[test]
fn an_indented_fence_in_a_list_loses_that_indentation_in_its_code() {
    assert_eq!(to_html("- step\n  ```\n  ls -l\n  ```"), "• step\n<pre><code>ls -l</code></pre>");
}

#[test]
fn links_become_anchors_and_relative_ones_show_their_target() {
    assert_eq!(
        to_html("see [the docs](https://x.org/a?b=1&c=\"2\") now"),
        "see <a href=\"https://x.org/a?b=1&amp;c=&quot;2&quot;\">the docs</a> now"
    );
    assert_eq!(
        to_html("[**bold** link](https://x.org/wiki/A_(b))"),
        "<a href=\"https://x.org/wiki/A_(b)\"><b>bold</b> link</a>"
    );
    assert_eq!(to_html("[readme](docs/README.md)"), "readme (docs/README.md)");
    assert_eq!(to_html("![chart](https://x.org/c.png)"), "<a href=\"https://x.org/c.png\">chart</a>");
    assert_eq!(
        to_html("<https://x.org> and [not a link]"),
        "<a href=\"https://x.org\">https://x.org</a> and [not a link]"
    );
}

#[test]
fn headings_become_bold_lines() {
    assert_eq!(to_html("# Title\n## Sub *part* ##\n#hashtag"), "<b>Title</b>\n<b>Sub <i>part</i></b>\n#hashtag");
    assert_eq!(to_html("### Plan for **today**"), "<b>Plan for today</b>");
}

#[test]
fn lists_are_kept_as_text_bullets() {
    assert_eq!(to_html("- one\n* two\n  + nested **b**\n1. first"), "• one\n• two\n  • nested <b>b</b>\n1. first");
}

#[test]
fn quotes_become_one_blockquote_and_rules_a_dash_line() {
    assert_eq!(to_html("> said\n> **this**\nafter\n\n---"), "<blockquote>said\n<b>this</b></blockquote>\nafter\n\n———");
}

#[test]
fn blank_lines_between_paragraphs_are_kept() {
    assert_eq!(to_html("one\n\ntwo\r\nthree"), "one\n\ntwo\nthree");
}

#[test]
fn a_table_becomes_a_monospaced_block_and_a_lone_bar_line_does_not() {
    assert_eq!(
        to_html("| a | b<c |\n|---|:-:|\n| 1 | 2 |\nafter"),
        "<pre>| a | b&lt;c |\n|---|:-:|\n| 1 | 2 |</pre>\nafter"
    );
    assert_eq!(to_html("| just a bar"), "| just a bar");
}

#[test]
fn rendered_html_split_with_telegrams_rules_never_exceeds_the_limit_and_loses_nothing_visible() {
    use oxibot_plugin::chat::{Measure, SplitRules, split, visible_text};
    let html = to_html(&format!(
        "# Head\n\n{}\n```\n{}\n```\n> {}",
        "para *it* & <x> ".repeat(40),
        "let x = 1 < 2;\n".repeat(30),
        "quoted ".repeat(50)
    ));
    let parts = split(&html, SplitRules::TELEGRAM.with_limit(200));
    let lengths: Vec<usize> = parts.iter().map(|part| Measure::Utf16.of(part)).collect();
    assert!(lengths.iter().all(|l| *l <= 200), "{lengths:?}");
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let joined: String = parts.iter().map(|p| visible_text(p)).collect();
    assert_eq!(squash(&joined), squash(&visible_text(&html)));
}

//! What the three services' rules share, checked for each: their limits and ways of counting,
//! a short reply going out whole, and a line too long for a message cut at its spaces.

use super::discord::prose;
use crate::chat::split::*;

/// Discord, Slack and Telegram: the rules, a short reply and what it is sent as.
const SERVICES: [(&str, SplitRules); 3] =
    [("discord", SplitRules::DISCORD), ("slack", SplitRules::SLACK), ("telegram", SplitRules::TELEGRAM)];

#[test]
fn each_service_has_its_limit_and_way_of_counting() {
    let expected = [
        (2000, Measure::Chars, Markup::Markdown),
        (3900, Measure::Chars, Markup::Markdown),
        (4096, Measure::Utf16, Markup::Html),
    ];
    for ((service, rules), (limit, measure, markup)) in SERVICES.into_iter().zip(expected) {
        assert_eq!((rules.limit, rules.measure, rules.markup), (limit, measure, markup), "{service}");
    }
}

#[test]
fn a_short_reply_is_one_part_and_an_empty_one_is_none() {
    let replies = [("hello", 2000), ("hello\nworld", 100), ("<b>hi</b> there", 4096)];
    for ((service, rules), (reply, limit)) in SERVICES.into_iter().zip(replies) {
        assert_eq!(split(reply, rules.with_limit(limit)), [reply], "{service}");
        assert!(split("\n \n", rules.with_limit(limit)).is_empty(), "{service}");
    }
}

#[test]
fn each_service_counts_its_own_way() {
    // Discord and Slack count characters, not bytes: "é" is one.
    let text = "é".repeat(1999);
    assert_eq!(split(&text, SplitRules::DISCORD), [text]);
    let text = "é".repeat(30);
    assert_eq!(split(&text, SplitRules::SLACK.with_limit(30)), vec![text]);
    // Telegram counts UTF-16 units: a character outside the Basic Multilingual Plane is two.
    let parts = split(&"😀".repeat(6), SplitRules::TELEGRAM.with_limit(4));
    assert_eq!(parts, ["😀😀", "😀😀", "😀😀"]);
}

#[test]
fn a_line_longer_than_a_message_is_cut_at_spaces_or_anywhere_when_it_has_none() {
    // Discord: a 7000-character line at 2000; Slack: forty words at 40.
    let words = "word ".repeat(40);
    let cases = [
        (SplitRules::DISCORD, prose(1000), 4100),
        (SplitRules::SLACK.with_limit(40), words.trim_end().to_owned(), 100),
    ];
    for (rules, spaced, solid_length) in cases {
        let parts = split(&spaced, rules);
        assert!(parts.iter().all(|part| part.chars().count() <= rules.limit && !part.starts_with(' ')), "{parts:?}");
        assert_eq!(parts.concat(), spaced);
        let solid = "x".repeat(solid_length);
        let parts = split(&solid, rules);
        assert!(parts.iter().all(|part| part.chars().count() <= rules.limit));
        assert_eq!(parts.concat(), solid);
    }
}

//! The per-turn runtime block — current time, channel, chat id — that goes into the user's
//! message rather than the system prompt, so the system prompt stays byte-identical between
//! turns and providers' prompt caches keep hitting.
//!
//! The block is fenced by the same marker lines nanobot uses, so sessions written by either can
//! be cleaned by either:
//!
//! ```text
//! [Runtime Context — metadata only, not instructions]
//! Current Time: 2026-04-16 12:00 (Thursday) (Asia/Shanghai, UTC+08:00)
//! Channel: telegram
//! Chat ID: 12345
//! [/Runtime Context]
//! ```

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// First line of the runtime block.
pub const RUNTIME_OPEN: &str = "[Runtime Context — metadata only, not instructions]";
/// Last line of the runtime block.
pub const RUNTIME_CLOSE: &str = "[/Runtime Context]";
/// What separates the block from the user's text.
const SEPARATOR: &str = "\n\n";

/// The runtime block for a turn at `now`, shown in `timezone` (an IANA name; UTC when absent or
/// unknown). Channel and chat id lines are left out when empty.
pub fn runtime_context(channel: &str, chat_id: &str, timezone: Option<&str>, now: DateTime<Utc>) -> String {
    let mut lines = vec![RUNTIME_OPEN.to_string(), format!("Current Time: {}", local_time(timezone, now))];
    if !channel.is_empty() {
        lines.push(format!("Channel: {channel}"));
    }
    if !chat_id.is_empty() {
        lines.push(format!("Chat ID: {chat_id}"));
    }
    lines.push(RUNTIME_CLOSE.to_string());
    lines.join("\n")
}

/// `runtime` with `recalled` (lines of recalled memory) added inside the block, before its
/// closing line, so stripping the block strips them too.
pub fn with_recalled(runtime: &str, recalled: &str) -> String {
    match runtime.strip_suffix(RUNTIME_CLOSE) {
        Some(head) if !recalled.trim().is_empty() => format!("{head}{}\n{RUNTIME_CLOSE}", recalled.trim_end()),
        _ => runtime.to_string(),
    }
}

/// `now` in `timezone` as `YYYY-MM-DD HH:MM (Weekday) (Zone, UTC±HH:MM)`.
fn local_time(timezone: Option<&str>, now: DateTime<Utc>) -> String {
    let tz = timezone.and_then(|name| name.trim().parse::<Tz>().ok()).unwrap_or(Tz::UTC);
    let local = now.with_timezone(&tz);
    format!("{} ({}, UTC{})", local.format("%Y-%m-%d %H:%M (%A)"), tz.name(), local.format("%:z"))
}

/// The user's text with the runtime block in front of it.
pub fn merge_runtime(user_text: &str, runtime: &str) -> String {
    if runtime.is_empty() {
        return user_text.to_string();
    }
    format!("{runtime}{SEPARATOR}{user_text}")
}

/// `text` without a runtime block at its start (as [`merge_runtime`] puts it) or at its end (as
/// newer nanobot versions put it). Text without a block comes back unchanged.
pub fn strip_runtime(text: &str) -> String {
    if let Some(rest) = text.strip_prefix(RUNTIME_OPEN) {
        return strip_leading_block(rest);
    }
    strip_trailing_block(text).unwrap_or_else(|| text.to_string())
}

/// The text after a block whose opening line has been removed. Without a closing line (older
/// nanobot sessions), the block ends at the first blank line.
fn strip_leading_block(rest: &str) -> String {
    let after = match rest.find(RUNTIME_CLOSE) {
        Some(at) => &rest[at + RUNTIME_CLOSE.len()..],
        None => rest.find(SEPARATOR).map_or("", |at| &rest[at..]),
    };
    after.strip_prefix(SEPARATOR).or_else(|| after.strip_prefix('\n')).unwrap_or(after).to_string()
}

/// The text before a block that ends `text`, if one does.
fn strip_trailing_block(text: &str) -> Option<String> {
    let body = text.trim_end().strip_suffix(RUNTIME_CLOSE)?;
    let open = body.rfind(RUNTIME_OPEN)?;
    if open > 0 && !body[..open].ends_with('\n') {
        return None;
    }
    let before = &text[..open];
    Some(before.strip_suffix(SEPARATOR).or_else(|| before.strip_suffix('\n')).unwrap_or(before).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn noon_utc() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 4, 16, 4, 0, 0).single().expect("valid time")
    }

    #[test]
    fn runtime_context_has_the_local_time_and_the_channel_and_chat() {
        let block = runtime_context("telegram", "12345", Some("Asia/Shanghai"), noon_utc());
        let expected = format!(
            "{RUNTIME_OPEN}\nCurrent Time: 2026-04-16 12:00 (Thursday) (Asia/Shanghai, UTC+08:00)\n\
             Channel: telegram\nChat ID: 12345\n{RUNTIME_CLOSE}"
        );
        assert_eq!(block, expected);
    }

    #[test]
    fn no_or_unknown_timezone_means_utc() {
        for tz in [None, Some("Mars/Olympus_Mons")] {
            let block = runtime_context("cli", "direct", tz, noon_utc());
            assert!(block.contains("Current Time: 2026-04-16 04:00 (Thursday) (UTC, UTC+00:00)"), "{block}");
        }
    }

    #[test]
    fn empty_channel_and_chat_are_left_out() {
        let block = runtime_context("", "", None, noon_utc());
        assert!(!block.contains("Channel:") && !block.contains("Chat ID:"));
        assert!(block.ends_with(RUNTIME_CLOSE));
    }

    #[test]
    fn merge_then_strip_gives_back_the_user_text() {
        let block = runtime_context("cli", "direct", Some("Europe/Berlin"), noon_utc());
        for text in
            ["hello", "", "\n\nleading blank lines", "multi\n\nparagraph\n", "mentions [/Runtime Context] inside"]
        {
            let merged = merge_runtime(text, &block);
            assert!(merged.starts_with(RUNTIME_OPEN));
            assert_eq!(strip_runtime(&merged), text);
        }
    }

    #[test]
    fn recalled_memory_sits_inside_the_block_and_is_stripped_with_it() {
        let block = with_recalled(
            &runtime_context("cli", "direct", None, noon_utc()),
            "Recalled Memory:\n- [memory/MEMORY.md:3] tea",
        );
        assert!(
            block.ends_with(&format!("Chat ID: direct\nRecalled Memory:\n- [memory/MEMORY.md:3] tea\n{RUNTIME_CLOSE}"))
        );
        assert_eq!(strip_runtime(&merge_runtime("what do I drink?", &block)), "what do I drink?");
        assert_eq!(with_recalled("no block", "x"), "no block");
    }

    #[test]
    fn text_without_a_block_is_unchanged() {
        for text in ["plain", "", "quoting [Runtime Context — metadata only, not instructions] mid-text"] {
            assert_eq!(strip_runtime(text), text);
        }
    }

    #[test]
    fn legacy_blocks_without_a_closing_line_are_stripped() {
        let legacy = format!("{RUNTIME_OPEN}\nCurrent Time: 2026-01-01 00:00\nChannel: cli\n\nwhat time is it?");
        assert_eq!(strip_runtime(&legacy), "what time is it?");
    }

    #[test]
    fn blocks_appended_after_the_text_are_stripped() {
        let block = runtime_context("cli", "direct", None, noon_utc());
        assert_eq!(strip_runtime(&format!("question?\n\n{block}")), "question?");
        assert_eq!(strip_runtime(&format!("question?\n\n{block}\n")), "question?");
    }
}

//! Where to cut a session for archiving: at the start of a user turn, so a slice never ends
//! between an assistant's tool call and its result, and never inside the latest turn.

use crate::message::{ChatMessage, Role};

/// Most messages archived in one round (one summarising call).
pub const MAX_SLICE_MESSAGES: usize = 60;

/// Picks the end (exclusive) of the next slice to archive from `messages[start..]`.
///
/// Candidate cuts are the indices of user messages after `start`, up to and including the
/// last user message (the latest turn always stays). The first candidate whose slice holds at
/// least `tokens_to_remove` tokens (per `tokens_of`) is taken; a slice is at most
/// [`MAX_SLICE_MESSAGES`] long, so when that many messages are not enough the furthest
/// candidate within the cap is taken. `None` when there is no candidate: the unarchived part
/// is a single turn.
pub fn pick_cut(
    messages: &[ChatMessage],
    start: usize,
    tokens_to_remove: u64,
    mut tokens_of: impl FnMut(usize) -> u64,
) -> Option<usize> {
    let last_user = messages.iter().rposition(|m| m.role == Role::User)?;
    let limit = last_user.min(start.saturating_add(MAX_SLICE_MESSAGES));
    let mut removed = 0u64;
    let mut best = None;
    for (index, message) in messages.iter().enumerate().take(limit + 1).skip(start) {
        if index > start && message.role == Role::User {
            best = Some(index);
            if removed >= tokens_to_remove {
                break;
            }
        }
        if index < limit {
            removed += tokens_of(index);
        }
    }
    best
}

/// Picks the end of a slice that archives everything before the latest turn, in slices of at
/// most [`MAX_SLICE_MESSAGES`]; `include_last` also archives the latest turn (for `/new`).
pub fn cut_for_everything(messages: &[ChatMessage], start: usize, include_last: bool) -> Option<usize> {
    if include_last && messages.len() > start && messages.len() - start <= MAX_SLICE_MESSAGES {
        return Some(messages.len());
    }
    let cut = pick_cut(messages, start, u64::MAX, |_| 1);
    match cut {
        Some(end) => Some(end),
        // One turn longer than a slice: archive it whole rather than split a tool pair.
        None if include_last && messages.len() > start => Some(messages.len()),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    /// A session from a pattern: `u` user, `a` plain assistant, `c` assistant with a tool call,
    /// `t` tool result.
    fn session(pattern: &str) -> Vec<ChatMessage> {
        let call = ToolCall::new("c1", "read_file", "{}");
        pattern
            .chars()
            .map(|c| match c {
                'u' => ChatMessage::text(Role::User, "question"),
                'a' => ChatMessage::text(Role::Assistant, "answer"),
                'c' => {
                    let mut m = ChatMessage::text(Role::Assistant, "");
                    m.tool_calls = vec![call.clone()];
                    m
                }
                't' => ChatMessage::tool_result(&call, "output"),
                other => panic!("unknown pattern char {other}"),
            })
            .collect()
    }

    #[test]
    fn the_cut_is_the_first_user_turn_that_removes_enough_tokens() {
        let messages = session("uaucta");
        // Each message counts 10: removing 15 needs two messages, so the cut is at index 2.
        assert_eq!(pick_cut(&messages, 0, 15, |_| 10), Some(2));
        // Removing 25 would need three: the next user message is the last one (index 2)...
        assert_eq!(pick_cut(&messages, 0, 25, |_| 10), Some(2), "the latest turn is never archived");
    }

    #[test]
    fn a_cut_never_separates_a_tool_call_from_its_result() {
        let messages = session("uctctauaua");
        for need in [1, 20, 45, 70, 1000] {
            let cut = pick_cut(&messages, 0, need, |_| 10).unwrap();
            assert_eq!(messages[cut].role, Role::User, "cut {cut} for {need}");
        }
    }

    #[test]
    fn the_latest_turn_alone_cannot_be_cut() {
        assert_eq!(pick_cut(&session("uctcta"), 0, 1, |_| 10), None);
        assert_eq!(pick_cut(&session("uaua"), 2, 1, |_| 10), None, "starting at the last turn");
    }

    #[test]
    fn a_slice_is_at_most_sixty_messages() {
        let pattern: String = "ua".repeat(100);
        let messages = session(&pattern);
        let cut = pick_cut(&messages, 0, u64::MAX, |_| 1).unwrap();
        assert!((MAX_SLICE_MESSAGES - 2..=MAX_SLICE_MESSAGES).contains(&cut), "cut {cut}");
        let next = pick_cut(&messages, cut, u64::MAX, |_| 1).unwrap();
        assert!(next - cut <= MAX_SLICE_MESSAGES);
    }

    #[test]
    fn archiving_everything_takes_the_latest_turn_only_when_asked() {
        let messages = session("uauaucta");
        assert_eq!(cut_for_everything(&messages, 0, false), Some(4));
        assert_eq!(cut_for_everything(&messages, 0, true), Some(8));
        assert_eq!(cut_for_everything(&messages, 8, true), None, "nothing left");
    }
}

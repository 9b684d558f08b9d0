//! Keeping a request inside the context window: shrink old tool results, then drop the
//! oldest turns from the request (the session file keeps everything).

use std::borrow::Borrow;
use std::sync::Arc;

use serde_json::Value;

use crate::message::{ChatMessage, Role};

/// Tokens kept free besides the reply, for estimation error.
pub const SAFETY_TOKENS: u32 = 1024;

/// Old tool results are cut to this many characters when the request is too big.
const SHRUNK_TOOL_RESULT_CHARS: usize = 2000;

/// A cheap upper-bound token estimate: about 3 bytes per token plus framing per message.
pub fn estimate_tokens(messages: &[impl Borrow<ChatMessage>]) -> u64 {
    messages.iter().map(|message| message_tokens(message.borrow())).sum()
}

/// [`estimate_tokens`] of one message.
pub fn message_tokens(message: &ChatMessage) -> u64 {
    let mut bytes = match &message.content {
        Value::String(text) => text.len(),
        Value::Null => 0,
        other => other.to_string().len(),
    };
    bytes += message.tool_calls.iter().map(|c| c.function.name.len() + c.function.arguments.len() + 16).sum::<usize>();
    bytes += message.reasoning_content.as_ref().map_or(0, String::len);
    (bytes as u64).div_ceil(3) + 4
}

/// Tool results longer than this are cut when the provider reports a context overflow.
pub const OVERFLOW_TOOL_RESULT_CHARS: usize = 2000;

/// After the provider reported a context overflow: cuts every tool result of the request
/// (the current turn's included) to [`OVERFLOW_TOOL_RESULT_CHARS`], saying where the whole
/// result is. Returns whether anything was cut (the session file keeps the full results).
pub fn shorten_tool_results(messages: &mut [Arc<ChatMessage>]) -> bool {
    const NOTE: &str = "\n[… cut to fit the context window; the whole result is kept in the session]";
    let mut cut = false;
    for message in messages.iter_mut().filter(|m| m.role == Role::Tool) {
        if let Some(kept) = cut_text(message, OVERFLOW_TOOL_RESULT_CHARS, NOTE) {
            Arc::make_mut(message).content = Value::String(format!("{kept}{NOTE}"));
            cut = true;
        }
    }
    cut
}

/// The first `chars` characters of `message`'s text when it is longer than that and not cut
/// already (it does not end with `note`).
fn cut_text(message: &ChatMessage, chars: usize, note: &str) -> Option<String> {
    let Value::String(text) = &message.content else { return None };
    (text.chars().nth(chars).is_some() && !text.ends_with(note)).then(|| text.chars().take(chars).collect())
}

/// The most tokens [`estimate_tokens`] may give for a request that [`fit`] leaves alone.
pub fn limit(context_window: u32, max_tokens: u32) -> u64 {
    u64::from(context_window.saturating_sub(max_tokens).saturating_sub(SAFETY_TOKENS).max(1024))
}

/// Makes `messages` (system prompt first) fit `context_window - max_tokens - safety`.
///
/// First, tool results before the last user message are shrunk; if that is not enough, the
/// oldest whole turns after the system prompt are dropped, never the current one.
pub fn fit(messages: &mut Vec<Arc<ChatMessage>>, context_window: u32, max_tokens: u32) {
    if !shrink_to_fit(messages, context_window, max_tokens) {
        drop_oldest_turns(messages, limit(context_window, max_tokens));
    }
}

/// The first stage of [`fit`]: shrinks tool results before the last user message when the
/// request is over its budget. Returns whether the request fits afterwards, or else has no
/// older turn that dropping (or archiving) could take away.
pub fn shrink_to_fit(messages: &mut [Arc<ChatMessage>], context_window: u32, max_tokens: u32) -> bool {
    const NOTE: &str = "\n[… shortened to fit the context window]";
    let budget = limit(context_window, max_tokens);
    if estimate_tokens(messages) <= budget {
        return true;
    }
    let current_turn = messages.iter().rposition(|m| m.role == Role::User).unwrap_or(0);
    for message in messages[..current_turn].iter_mut().filter(|m| m.role == Role::Tool) {
        if let Some(kept) = cut_text(message, SHRUNK_TOOL_RESULT_CHARS, NOTE) {
            Arc::make_mut(message).content = Value::String(format!("{kept}{NOTE}"));
        }
    }
    let oldest = messages.iter().skip(1).position(|m| m.role == Role::User).map(|i| i + 1);
    estimate_tokens(messages) <= budget || oldest.is_none_or(|oldest| oldest >= current_turn)
}

/// The second stage of [`fit`]: drops the oldest whole turns until the request fits.
fn drop_oldest_turns(messages: &mut Vec<Arc<ChatMessage>>, budget: u64) {
    while estimate_tokens(messages) > budget {
        let current_turn = messages.iter().rposition(|m| m.role == Role::User).unwrap_or(0);
        // The first user message after the system prompt starts the oldest turn; the next
        // user message starts the one after it. Drop everything in between.
        let Some(oldest) = messages.iter().skip(1).position(|m| m.role == Role::User).map(|i| i + 1) else { break };
        if oldest >= current_turn {
            break;
        }
        let next =
            messages[oldest + 1..].iter().position(|m| m.role == Role::User).map_or(current_turn, |i| oldest + 1 + i);
        messages.drain(oldest..next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system() -> Vec<Arc<ChatMessage>> {
        vec![Arc::new(ChatMessage::text(Role::System, "sys"))]
    }

    fn user(text: &str) -> Arc<ChatMessage> {
        Arc::new(ChatMessage::text(Role::User, text))
    }

    fn turn(user: &str, tool_output: &str) -> Vec<Arc<ChatMessage>> {
        let call = crate::message::ToolCall::new("c", "read_file", "{}");
        let mut assistant = ChatMessage::text(Role::Assistant, "");
        assistant.tool_calls = vec![call.clone()];
        [
            ChatMessage::text(Role::User, user),
            assistant,
            ChatMessage::tool_result(&call, tool_output),
            ChatMessage::text(Role::Assistant, "done"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect()
    }

    #[test]
    fn a_small_request_is_left_alone() {
        let mut messages = system();
        messages.extend(turn("hi", "out"));
        let before = messages.clone();
        fit(&mut messages, 65_536, 8192);
        assert_eq!(messages, before);
    }

    #[test]
    fn old_tool_results_shrink_before_any_turn_is_dropped() {
        let mut messages = system();
        messages.extend(turn("first", &"x".repeat(30_000)));
        messages.push(user("now"));
        fit(&mut messages, 12_000, 2_000);
        assert_eq!(messages.len(), 6, "no turn dropped");
        assert!(messages[3].text_content().len() < 3000);
    }

    #[test]
    fn shortening_a_shared_tool_result_leaves_the_sessions_copy_whole() {
        let mut messages = system();
        messages.extend(turn("first", &"x".repeat(30_000)));
        messages.push(user("now"));
        let session: Vec<Arc<ChatMessage>> = messages.clone();
        fit(&mut messages, 12_000, 2_000);
        assert!(messages[3].text_content().len() < 3000, "the request's copy is shortened");
        assert_eq!(session[3].text_content().len(), 30_000, "the session's message is as it was");
        assert!(Arc::ptr_eq(&messages[1], &session[1]), "messages left alone are not copied");
    }

    #[test]
    fn after_an_overflow_every_long_tool_result_is_cut_the_current_turns_too() {
        let mut messages = system();
        messages.extend(turn("first", &"x".repeat(5_000)));
        messages.extend(turn("now", &"z".repeat(5_000)));
        assert!(shorten_tool_results(&mut messages));
        let tools: Vec<usize> =
            messages.iter().filter(|m| m.role == Role::Tool).map(|m| m.text_content().len()).collect();
        assert!(tools.iter().all(|&n| n < OVERFLOW_TOOL_RESULT_CHARS + 100), "{tools:?}");
        assert!(!shorten_tool_results(&mut messages), "nothing left to cut");
    }

    #[test]
    fn oldest_turns_are_dropped_but_never_the_current_one() {
        let mut messages = system();
        for i in 0..20 {
            messages.extend(turn(&format!("turn {i} {}", "y".repeat(3000)), "ok"));
        }
        messages.push(user("the question"));
        fit(&mut messages, 8_000, 2_000);
        assert_eq!(messages[0].role, Role::System);
        assert_eq!(messages.last().unwrap().text_content(), "the question");
        assert!(messages[1].role == Role::User, "history still starts at a user turn");
        assert!(estimate_tokens(&messages) <= 8_000);
    }
}

//! Prompt-size estimates that cost time proportional to what changed, not to the session.
//!
//! Loading a tokenizer vocabulary takes 40–110 ms and tens of MB, so a session is first
//! measured with a cheap upper bound — a BPE token is at least one byte, so a text's byte
//! length never under-counts its tokens — and only a session whose bound reaches its budget
//! is counted exactly (tiktoken's `cl100k_base`, as nanobot does). Both counts are cached
//! per message in a [`TokenLedger`] kept beside the session, with prefix sums of the bounds,
//! so the estimate after a turn costs the new messages plus a constant.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::message::ChatMessage;

/// Tokens a message costs besides its text (role, separators).
pub const MESSAGE_OVERHEAD: u64 = 4;

static TOKENIZER_LOADED: AtomicBool = AtomicBool::new(false);

/// The exact token count of `text` (loads the tokenizer on first use). Should the tokenizer
/// fail on some pathological input, the byte bound stands in: it never under-counts.
pub fn exact_tokens(text: &str) -> usize {
    TOKENIZER_LOADED.store(true, Ordering::Relaxed);
    let count = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tiktoken_rs::cl100k_base_singleton().encode_with_special_tokens(text).len()
    }));
    count.unwrap_or_else(|_| upper_bound(text))
}

/// Whether this process has loaded the tokenizer.
pub fn tokenizer_loaded() -> bool {
    TOKENIZER_LOADED.load(Ordering::Relaxed)
}

/// An upper bound of the tokens of `text`: its length in bytes.
pub fn upper_bound(text: &str) -> usize {
    text.len()
}

/// The text of a message that reaches the model: content, tool-call names and arguments,
/// reasoning.
fn message_text(message: &ChatMessage) -> String {
    let mut text = match &message.content {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    for call in &message.tool_calls {
        text.push_str(&call.function.name);
        text.push_str(&call.function.arguments);
    }
    if let Some(reasoning) = &message.reasoning_content {
        text.push_str(reasoning);
    }
    text
}

/// The byte length of [`message_text`], without building it.
fn message_bytes(message: &ChatMessage) -> usize {
    let content = match &message.content {
        Value::String(s) => s.len(),
        Value::Null => 0,
        other => other.to_string().len(),
    };
    let calls: usize = message.tool_calls.iter().map(|c| c.function.name.len() + c.function.arguments.len()).sum();
    content + calls + message.reasoning_content.as_ref().map_or(0, String::len)
}

/// A prompt estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Tokens: an upper bound, or exact.
    pub tokens: u64,
    /// Whether the tokenizer counted them.
    pub exact: bool,
}

/// Cached token counts of one session's messages (index-aligned with them).
#[derive(Debug, Default)]
pub struct TokenLedger {
    /// `bound_prefix[i]` = sum of the bounds of messages `0..i`; one longer than the messages.
    bound_prefix: Vec<u64>,
    /// Exact count per message, once computed.
    exact: Vec<Option<u64>>,
    /// The fixed part (system prompt, tools) last counted exactly: its text hash and count.
    fixed_exact: Option<(u64, u64)>,
    /// How many texts this ledger has counted exactly (for tests and benchmarks).
    exact_counts: u64,
}

impl TokenLedger {
    /// Accounts for messages appended since the last call; a shorter list (a reset session)
    /// starts the ledger over. Costs time proportional to the new messages.
    pub fn sync(&mut self, messages: &[ChatMessage]) {
        if self.bound_prefix.is_empty() {
            self.bound_prefix.push(0);
        }
        let known = self.exact.len();
        if messages.len() < known {
            self.bound_prefix.truncate(messages.len() + 1);
            self.exact.truncate(messages.len());
            return;
        }
        for message in &messages[known..] {
            let bound = message_bytes(message) as u64 + MESSAGE_OVERHEAD;
            let total = self.bound_prefix.last().copied().unwrap_or(0) + bound;
            self.bound_prefix.push(total);
            self.exact.push(None);
        }
    }

    /// The prompt estimate of `fixed` plus `messages[from..]`: the cheap bound while it is
    /// below `limit`, else the exact count (cached per message). Call [`TokenLedger::sync`]
    /// first.
    pub fn estimate(&mut self, messages: &[ChatMessage], from: usize, fixed: &str, limit: u64) -> Estimate {
        let from = from.min(self.exact.len());
        let bound = upper_bound(fixed) as u64 + self.bound_of(from, self.exact.len());
        if bound < limit {
            return Estimate { tokens: bound, exact: false };
        }
        let mut tokens = self.fixed_tokens(fixed);
        for index in from..self.exact.len().min(messages.len()) {
            tokens += self.message_tokens(messages, index);
        }
        Estimate { tokens, exact: true }
    }

    /// Whether the prompt of `fixed` plus `messages[from..]` may have reached `limit`: its
    /// estimate with exact counts where they are cached and byte bounds elsewhere, an upper
    /// bound of the exact count that never loads the tokenizer. When it is below `limit`,
    /// [`TokenLedger::estimate`] is too. Call [`TokenLedger::sync`] first.
    pub fn may_reach(&self, fixed: &str, from: usize, limit: u64) -> bool {
        let from = from.min(self.exact.len());
        let fixed_bound = upper_bound(fixed) as u64;
        if fixed_bound + self.bound_of(from, self.exact.len()) < limit {
            return false;
        }
        let fixed_tokens = match self.fixed_exact {
            Some((hash, count)) if hash == fingerprint(fixed) => count,
            _ => fixed_bound,
        };
        let messages: u64 = (from..self.exact.len())
            .map(|index| self.exact[index].unwrap_or_else(|| self.bound_of(index, index + 1)))
            .sum();
        fixed_tokens + messages >= limit
    }

    /// The exact tokens of message `index` (cached).
    pub fn message_tokens(&mut self, messages: &[ChatMessage], index: usize) -> u64 {
        if let Some(Some(count)) = self.exact.get(index) {
            return *count;
        }
        let Some(message) = messages.get(index) else { return 0 };
        self.exact_counts += 1;
        let count = exact_tokens(&message_text(message)) as u64 + MESSAGE_OVERHEAD;
        if let Some(slot) = self.exact.get_mut(index) {
            *slot = Some(count);
        }
        count
    }

    /// How many texts were counted exactly so far.
    pub fn exact_counts(&self) -> u64 {
        self.exact_counts
    }

    fn bound_of(&self, from: usize, to: usize) -> u64 {
        let at = |i: usize| self.bound_prefix.get(i).copied().unwrap_or(0);
        at(to).saturating_sub(at(from))
    }

    fn fixed_tokens(&mut self, fixed: &str) -> u64 {
        let hash = fingerprint(fixed);
        if let Some((_, count)) = self.fixed_exact.filter(|(known, _)| *known == hash) {
            return count;
        }
        self.exact_counts += 1;
        let count = exact_tokens(fixed) as u64;
        self.fixed_exact = Some((hash, count));
        count
    }
}

/// A 64-bit FNV-1a hash, enough to notice that the system prompt changed.
fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Role, ToolCall};

    fn texts() -> Vec<String> {
        vec![
            "Hello, how are you today?".into(),
            "東京の天気はどうですか？明日は雨が降りますか".into(),
            "🎉🚀 emoji everywhere 🐈‍⬛👩‍👩‍👧".into(),
            "fn main() { let x: Vec<u8> = vec![1, 2, 3]; println!(\"{x:?}\"); }".into(),
            r#"{"path": "memory/MEMORY.md", "old_text": "- a", "new_text": "- b"}"#.into(),
            "word ".repeat(500),
        ]
    }

    #[test]
    fn the_byte_bound_is_never_below_the_exact_count() {
        for text in texts() {
            assert!(upper_bound(&text) >= exact_tokens(&text), "{text}");
        }
    }

    fn conversation(n: usize) -> Vec<ChatMessage> {
        (0..n)
            .map(|i| {
                ChatMessage::text(
                    if i % 2 == 0 { Role::User } else { Role::Assistant },
                    format!("message {i} about the garden"),
                )
            })
            .collect()
    }

    #[test]
    fn may_reach_agrees_with_the_exact_estimate_without_counting() {
        let mut messages = conversation(40);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages);
        let exact = ledger.estimate(&messages, 0, "system", 1).tokens;
        let counted = ledger.exact_counts();
        assert!(!ledger.may_reach("system", 0, exact + 1), "exact counts are used where cached");
        assert!(ledger.may_reach("system", 0, exact));
        messages.extend(conversation(2));
        ledger.sync(&messages);
        let bytes: u64 = messages[40..].iter().map(|m| m.text_content().len() as u64 + MESSAGE_OVERHEAD).sum();
        assert!(!ledger.may_reach("system", 0, exact + bytes + 1), "new messages count by their bound");
        assert!(ledger.may_reach("system", 0, exact + bytes));
        assert_eq!(ledger.exact_counts(), counted, "nothing was counted");
    }

    #[test]
    fn far_below_the_limit_nothing_is_counted_exactly() {
        let messages = conversation(100);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages);
        let estimate = ledger.estimate(&messages, 0, "system prompt", 1_000_000);
        assert!(!estimate.exact);
        assert_eq!(ledger.exact_counts(), 0, "the tokenizer is never needed for a short session");
        let bytes: u64 = messages.iter().map(|m| m.text_content().len() as u64 + MESSAGE_OVERHEAD).sum();
        assert_eq!(estimate.tokens, bytes + "system prompt".len() as u64);
    }

    #[test]
    fn near_the_limit_counts_are_exact_and_cached() {
        let messages = conversation(20);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages);
        let first = ledger.estimate(&messages, 0, "system", 1);
        assert!(first.exact);
        assert_eq!(ledger.exact_counts(), 21, "each message and the fixed part once");
        let again = ledger.estimate(&messages, 0, "system", 1);
        assert_eq!(again, first);
        assert_eq!(ledger.exact_counts(), 21, "nothing counted twice");
        let expected: u64 =
            messages.iter().map(|m| exact_tokens(&m.text_content()) as u64 + MESSAGE_OVERHEAD).sum::<u64>()
                + exact_tokens("system") as u64;
        assert_eq!(first.tokens, expected);
    }

    #[test]
    fn appending_only_processes_the_new_messages() {
        let mut messages = conversation(1000);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages);
        ledger.estimate(&messages, 990, "s", 1);
        let counted = ledger.exact_counts();
        messages.extend(conversation(2));
        ledger.sync(&messages);
        ledger.estimate(&messages, 990, "s", 1);
        assert_eq!(ledger.exact_counts(), counted + 2);
    }

    #[test]
    fn the_estimate_covers_only_messages_from_the_given_index() {
        let messages = conversation(10);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages);
        let all = ledger.estimate(&messages, 0, "", u64::MAX).tokens;
        let tail = ledger.estimate(&messages, 8, "", u64::MAX).tokens;
        let last_two: u64 = messages[8..].iter().map(|m| m.text_content().len() as u64 + MESSAGE_OVERHEAD).sum();
        assert_eq!(tail, last_two);
        assert!(all > tail);
    }

    #[test]
    fn a_shorter_message_list_restarts_the_ledger() {
        let messages = conversation(10);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages);
        ledger.sync(&messages[..0]);
        assert_eq!(ledger.estimate(&messages[..0], 0, "", u64::MAX).tokens, 0);
        ledger.sync(&messages[..3]);
        let bytes: u64 = messages[..3].iter().map(|m| m.text_content().len() as u64 + MESSAGE_OVERHEAD).sum();
        assert_eq!(ledger.estimate(&messages[..3], 0, "", u64::MAX).tokens, bytes);
    }

    #[test]
    fn tool_calls_and_reasoning_count_toward_a_message() {
        let mut message = ChatMessage::text(Role::Assistant, "");
        message.tool_calls = vec![ToolCall::new("1", "read_file", r#"{"path": "a.md"}"#)];
        message.reasoning_content = Some("thinking it over".into());
        let mut ledger = TokenLedger::default();
        ledger.sync(std::slice::from_ref(&message));
        let estimate = ledger.estimate(std::slice::from_ref(&message), 0, "", u64::MAX);
        assert_eq!(
            estimate.tokens,
            ("read_file".len() + r#"{"path": "a.md"}"#.len() + "thinking it over".len()) as u64 + MESSAGE_OVERHEAD
        );
    }
}

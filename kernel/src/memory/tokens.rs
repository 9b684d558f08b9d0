//! Prompt-size estimates that cost time proportional to what changed, not to the session.
//!
//! A session is first measured with a cheap upper bound — a BPE token is at least one byte,
//! so a text's byte length never under-counts its tokens — and only a session whose bound
//! reaches its budget is counted exactly (`cl100k_base`, as nanobot does). Both counts are
//! cached per message in a [`TokenLedger`] kept beside the session, with running totals
//! updated as messages are appended, archived or dropped, so the budget check after a turn
//! costs the new messages plus a constant, never a sum over the session.
//!
//! Exact counts use the compact vocabulary of [`super::bpe`]: compiled into the binary, set up
//! once per process in a few milliseconds, and 1 MiB of heap from then on (tiktoken's maps
//! took ~24 MiB in ~200,000 small blocks, which the process could not give back).

use std::collections::VecDeque;
use std::sync::OnceLock;

use serde_json::Value;

use super::bpe::CompactBpe;
use crate::message::ChatMessage;

/// Tokens a message costs besides its text (role, separators).
pub const MESSAGE_OVERHEAD: u64 = 4;

/// The process's vocabulary, set up by the first exact count (`None`: it could not be).
static VOCABULARY: OnceLock<Option<CompactBpe>> = OnceLock::new();

/// The vocabulary, set up on first use.
fn vocabulary() -> Option<&'static CompactBpe> {
    VOCABULARY
        .get_or_init(|| match CompactBpe::cl100k() {
            Ok(bpe) => {
                tracing::debug!("tokenizer vocabulary set up for exact counts");
                Some(bpe)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot set up the tokenizer vocabulary; counting bytes instead");
                None
            }
        })
        .as_ref()
}

/// Whether this process has set up its vocabulary (an estimate the bytes settle never does).
pub fn vocabulary_resident() -> bool {
    VOCABULARY.get().is_some()
}

/// The exact token count of `text`. Should the vocabulary be missing, or the tokenizer give up
/// on some pathological input, the byte bound stands in: it never under-counts.
pub fn exact_tokens(text: &str) -> usize {
    vocabulary().and_then(|bpe| bpe.count(text)).unwrap_or_else(|| upper_bound(text))
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

/// The cached counts of one message.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Its byte bound, overhead included.
    bound: u64,
    /// Its exact count, overhead included, once computed.
    exact: Option<u64>,
}

impl Entry {
    /// The best upper bound known: the exact count, else the byte bound.
    fn best(self) -> u64 {
        self.exact.unwrap_or(self.bound)
    }
}

/// Cached token counts of the messages of one session that a prompt can still hold (those
/// from the consolidation cursor on), with their running totals.
///
/// Messages are named by their index from the session's start, however many of them the
/// session still keeps in memory (see `Session::offset`).
#[derive(Debug, Default)]
pub struct TokenLedger {
    /// Index (from the session's start) of the message of `entries[0]`.
    start: usize,
    /// One entry per message from `start` on.
    entries: VecDeque<Entry>,
    /// Sum of the entries' byte bounds.
    bound_total: u64,
    /// Sum of the entries' best bounds (exact where counted).
    best_total: u64,
    /// Entries without an exact count.
    uncounted: usize,
    /// The fixed part (system prompt, tools) last counted exactly, and its count.
    fixed_exact: Option<(Box<str>, u64)>,
    /// How many texts this ledger has counted exactly (for tests and benchmarks).
    exact_counts: u64,
    /// How many entries were added, dropped or read (for tests: what a check costs).
    entries_touched: u64,
}

impl TokenLedger {
    /// Brings the ledger to cover `messages[from..]` of a session whose first message in
    /// memory (`messages[0]`) has index `offset` from its start; `from` is an index from the
    /// start too. Costs time proportional to the messages appended or archived since the
    /// last call; a session that went back (a reset, a cursor moved back) starts over.
    pub fn sync(&mut self, messages: &[ChatMessage], offset: usize, from: usize) {
        let end = offset + messages.len();
        let from = from.clamp(offset, end);
        if from < self.start || end < self.end() {
            self.clear(from);
        }
        while self.start < from && !self.entries.is_empty() {
            self.drop_first();
        }
        if self.entries.is_empty() {
            self.start = from;
        }
        for message in &messages[self.end() - offset..] {
            let bound = message_bytes(message) as u64 + MESSAGE_OVERHEAD;
            self.entries.push_back(Entry { bound, exact: None });
            self.bound_total += bound;
            self.best_total += bound;
            self.uncounted += 1;
            self.entries_touched += 1;
        }
    }

    /// The prompt estimate of `fixed` plus the messages the ledger covers: the cheap bound
    /// while it is below `limit`, else the exact count (cached per message; the messages not
    /// counted yet are counted now). Call [`TokenLedger::sync`] first.
    pub fn estimate(&mut self, messages: &[ChatMessage], offset: usize, fixed: &str, limit: u64) -> Estimate {
        let bound = upper_bound(fixed) as u64 + self.bound_total;
        if bound < limit {
            return Estimate { tokens: bound, exact: false };
        }
        let fixed_tokens = self.count_uncounted(messages, offset, Some(fixed));
        Estimate { tokens: fixed_tokens + self.best_total, exact: true }
    }

    /// Whether the prompt of `fixed` plus the covered messages may have reached `limit`: its
    /// estimate with exact counts where they are cached and byte bounds elsewhere, an upper
    /// bound of the exact count that never loads the tokenizer and costs a constant. When it
    /// is below `limit`, [`TokenLedger::estimate`] is too. Call [`TokenLedger::sync`] first.
    pub fn may_reach(&self, fixed: &str, limit: u64) -> bool {
        let fixed_bound = upper_bound(fixed) as u64;
        if fixed_bound + self.bound_total < limit {
            return false;
        }
        let fixed_tokens = match &self.fixed_exact {
            Some((text, count)) if **text == *fixed => *count,
            _ => fixed_bound,
        };
        fixed_tokens + self.best_total >= limit
    }

    /// The exact tokens of message `index` (from the session's start; cached), 0 for one the
    /// ledger does not cover. An uncounted message is counted with every other one not
    /// counted yet.
    pub fn message_tokens(&mut self, messages: &[ChatMessage], offset: usize, index: usize) -> u64 {
        let Some(position) = index.checked_sub(self.start) else { return 0 };
        let Some(entry) = self.entries.get(position).copied() else { return 0 };
        if entry.exact.is_none() {
            self.count_uncounted(messages, offset, None);
        }
        self.entries.get(position).map_or(entry.bound, |entry| entry.best())
    }

    /// How many texts were counted exactly so far.
    pub fn exact_counts(&self) -> u64 {
        self.exact_counts
    }

    /// How many cached entries were added, dropped or read so far: what the ledger's work
    /// cost, independent of the clock.
    pub fn entries_touched(&self) -> u64 {
        self.entries_touched
    }

    /// One past the index of the last message covered.
    fn end(&self) -> usize {
        self.start + self.entries.len()
    }

    fn clear(&mut self, start: usize) {
        self.entries_touched += self.entries.len() as u64;
        self.entries.clear();
        self.start = start;
        self.bound_total = 0;
        self.best_total = 0;
        self.uncounted = 0;
    }

    fn drop_first(&mut self) {
        if let Some(entry) = self.entries.pop_front() {
            self.bound_total -= entry.bound;
            self.best_total -= entry.best();
            self.uncounted -= usize::from(entry.exact.is_none());
            self.entries_touched += 1;
        }
        self.start += 1;
    }

    fn set_exact(&mut self, position: usize, count: u64) {
        let Some(entry) = self.entries.get_mut(position) else { return };
        if entry.exact.is_none() {
            self.best_total = self.best_total - entry.bound + count;
            self.uncounted -= 1;
            entry.exact = Some(count);
        }
    }

    /// Counts the entries not counted yet, and `fixed` unless its count is cached; returns
    /// the fixed part's count (0 without `fixed`). The uncounted entries are mostly the newest,
    /// so they are looked for from the end, until none is left.
    fn count_uncounted(&mut self, messages: &[ChatMessage], offset: usize, fixed: Option<&str>) -> u64 {
        let mut position = self.entries.len();
        while self.uncounted > 0 && position > 0 {
            position -= 1;
            self.entries_touched += 1;
            let message = (self.start + position).checked_sub(offset).and_then(|i| messages.get(i));
            if let (None, Some(message)) = (self.entries[position].exact, message) {
                self.exact_counts += 1;
                let count = exact_tokens(&message_text(message)) as u64;
                self.set_exact(position, count + MESSAGE_OVERHEAD);
            }
        }
        self.fixed_count(fixed)
    }

    /// The exact count of the fixed part, counted only when it changed.
    fn fixed_count(&mut self, fixed: Option<&str>) -> u64 {
        let Some(fixed) = fixed else { return 0 };
        if let Some((text, count)) = &self.fixed_exact
            && **text == *fixed
        {
            return *count;
        }
        self.exact_counts += 1;
        let count = exact_tokens(fixed) as u64;
        self.fixed_exact = Some((fixed.into(), count));
        count
    }
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

    #[test]
    fn exact_counts_are_tiktokens_cl100k_base_counts() {
        let texts = texts();
        let counts: Vec<usize> = texts.iter().map(|text| exact_tokens(text)).collect();
        let reference = tiktoken_rs::cl100k_base_singleton();
        let expected: Vec<usize> = texts.iter().map(|text| reference.encode_with_special_tokens(text).len()).collect();
        assert_eq!(counts, expected);
        assert!(vocabulary_resident());
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

    fn bytes_of(messages: &[ChatMessage]) -> u64 {
        messages.iter().map(|m| m.text_content().len() as u64 + MESSAGE_OVERHEAD).sum()
    }

    fn estimate(ledger: &mut TokenLedger, messages: &[ChatMessage], fixed: &str, limit: u64) -> Estimate {
        estimate_from(ledger, messages, 0, fixed, limit)
    }

    fn estimate_from(
        ledger: &mut TokenLedger,
        messages: &[ChatMessage],
        offset: usize,
        fixed: &str,
        limit: u64,
    ) -> Estimate {
        ledger.estimate(messages, offset, fixed, limit)
    }

    #[test]
    fn an_estimate_the_bytes_settle_counts_nothing_exactly() {
        let messages = conversation(2_000);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        let estimate = ledger.estimate(&messages, 0, "system", bytes_of(&messages) + 7);
        assert!(!estimate.exact);
        assert!(!ledger.may_reach("system", bytes_of(&messages) + 7));
        assert_eq!(ledger.exact_counts(), 0, "no text was counted for it");
    }

    #[test]
    fn may_reach_agrees_with_the_exact_estimate_without_counting() {
        let mut messages = conversation(40);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        let exact = estimate(&mut ledger, &messages, "system", 1).tokens;
        let counted = ledger.exact_counts();
        assert!(!ledger.may_reach("system", exact + 1), "exact counts are used where cached");
        assert!(ledger.may_reach("system", exact));
        messages.extend(conversation(2));
        ledger.sync(&messages, 0, 0);
        let bytes = bytes_of(&messages[40..]);
        assert!(!ledger.may_reach("system", exact + bytes + 1), "new messages count by their bound");
        assert!(ledger.may_reach("system", exact + bytes));
        assert_eq!(ledger.exact_counts(), counted, "nothing was counted");
    }

    #[test]
    fn the_budget_check_after_a_turn_touches_only_the_new_messages() {
        // Issue 30: the check summed every message of the session each turn once its byte
        // bound had reached the budget.
        let mut messages = conversation(10_000);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        let exact = estimate(&mut ledger, &messages, "system", 1).tokens;
        assert!(bytes_of(&messages) > exact + 100, "the byte bound alone is inconclusive here");
        let touched = ledger.entries_touched();
        messages.extend(conversation(2));
        ledger.sync(&messages, 0, 0);
        assert!(ledger.may_reach("system", exact));
        assert!(!ledger.may_reach("system", exact + 100));
        assert_eq!(ledger.entries_touched(), touched + 2, "two new messages, nothing else looked at");
    }

    #[test]
    fn archiving_drops_the_archived_entries_from_the_totals() {
        let messages = conversation(100);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        ledger.sync(&messages, 0, 60);
        assert_eq!(estimate(&mut ledger, &messages, "", u64::MAX).tokens, bytes_of(&messages[60..]));
        // The session forgets the archived messages: the ledger names messages by their index
        // from the session's start, so it goes on as it was.
        let kept = &messages[60..];
        let touched = ledger.entries_touched();
        ledger.sync(kept, 60, 60);
        assert_eq!(ledger.entries_touched(), touched);
        assert_eq!(estimate_from(&mut ledger, kept, 60, "", u64::MAX).tokens, bytes_of(kept));
        let exact = estimate_from(&mut ledger, kept, 60, "", 1).tokens;
        let expected: u64 = kept.iter().map(|m| exact_tokens(&m.text_content()) as u64 + MESSAGE_OVERHEAD).sum();
        assert_eq!(exact, expected);
    }

    #[test]
    fn far_below_the_limit_nothing_is_counted_exactly() {
        let messages = conversation(100);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        let estimate = estimate(&mut ledger, &messages, "system prompt", 1_000_000);
        assert!(!estimate.exact);
        assert_eq!(ledger.exact_counts(), 0, "the tokenizer is never needed for a short session");
        assert_eq!(estimate.tokens, bytes_of(&messages) + "system prompt".len() as u64);
    }

    #[test]
    fn near_the_limit_counts_are_exact_and_cached() {
        let messages = conversation(20);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        let first = estimate(&mut ledger, &messages, "system", 1);
        assert!(first.exact);
        assert_eq!(ledger.exact_counts(), 21, "each message and the fixed part once");
        let again = estimate(&mut ledger, &messages, "system", 1);
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
        ledger.sync(&messages, 0, 990);
        estimate(&mut ledger, &messages, "s", 1);
        let counted = ledger.exact_counts();
        messages.extend(conversation(2));
        ledger.sync(&messages, 0, 990);
        estimate(&mut ledger, &messages, "s", 1);
        assert_eq!(ledger.exact_counts(), counted + 2);
    }

    #[test]
    fn the_estimate_covers_only_messages_from_the_given_index() {
        let messages = conversation(10);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        let all = estimate(&mut ledger, &messages, "", u64::MAX).tokens;
        ledger.sync(&messages, 0, 8);
        let tail = estimate(&mut ledger, &messages, "", u64::MAX).tokens;
        assert_eq!(tail, bytes_of(&messages[8..]));
        assert!(all > tail);
    }

    #[test]
    fn a_shorter_message_list_restarts_the_ledger() {
        let messages = conversation(10);
        let mut ledger = TokenLedger::default();
        ledger.sync(&messages, 0, 0);
        ledger.sync(&messages[..0], 0, 0);
        assert_eq!(estimate(&mut ledger, &messages[..0], "", u64::MAX).tokens, 0);
        ledger.sync(&messages[..3], 0, 0);
        assert_eq!(estimate(&mut ledger, &messages[..3], "", u64::MAX).tokens, bytes_of(&messages[..3]));
    }

    #[test]
    fn tool_calls_and_reasoning_count_toward_a_message() {
        let mut message = ChatMessage::text(Role::Assistant, "");
        message.tool_calls = vec![ToolCall::new("1", "read_file", r#"{"path": "a.md"}"#)];
        message.reasoning_content = Some("thinking it over".into());
        let mut ledger = TokenLedger::default();
        ledger.sync(std::slice::from_ref(&message), 0, 0);
        let estimate = estimate(&mut ledger, std::slice::from_ref(&message), "", u64::MAX);
        assert_eq!(
            estimate.tokens,
            ("read_file".len() + r#"{"path": "a.md"}"#.len() + "thinking it over".len()) as u64 + MESSAGE_OVERHEAD
        );
    }
}

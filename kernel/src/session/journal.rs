//! The durable inbox and the turn journal: records kept in a session file beside its
//! messages, so a kernel killed at any instant knows on its next start which messages it
//! accepted and never answered, and which tool calls it sent and never saw finish.
//!
//! Both are lines of their own `_type` (`"inbox"`, `"call"`), like nanobot 0.3's
//! `provider_state` lines: a nanobot-compatible reader skips them, so the file stays
//! readable by those tools (every new field is additive).
//!
//! - **Inbox.** An accepted message is an `{"_type":"inbox","state":"accepted",…}` line with
//!   its text and origin, written before the channel is told it may forget the message. When
//!   its turn starts, the user message is appended (carrying [`INBOX_ID_KEY`]) with an
//!   `in_turn` line; when the turn ends, an `answered` (or `failed`, with the reason) line.
//!   A message's state is its last line's.
//! - **Journal.** Before a tool call is sent, a `{"_type":"call","state":"started",…}` line
//!   names it by its key (turn id, step, call index) and the model's call id; the call's
//!   tool-result message, appended as soon as the call returns and carrying [`CALL_KEY_KEY`],
//!   is its `finished` record.
//!
//! A whole-file rewrite keeps only the records still open (see [`Session::compact_records`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Session;
use crate::message::{ChatMessage, Role, ToolCall};

/// Key under which a user message names the inbox entry it is (the turn's id).
pub const INBOX_ID_KEY: &str = "inbox_id";
/// Key under which a user message stores the id of the channel message it came from.
pub const INBOUND_ID_KEY: &str = "inbound_id";
/// Key of the session metadata that is `true` while the inbox holds a message not yet
/// answered, so a start finds such sessions by reading metadata lines alone.
pub const OPEN_INBOX_KEY: &str = "inbox_open";
/// Key under which a tool result names the call it finishes (its journal key).
pub const CALL_KEY_KEY: &str = "call_key";
/// Key set to `true` on the result of a call a restart interrupted (reported, not re-run).
pub const INTERRUPTED_KEY: &str = "interrupted";

/// A record line of a session file that is not a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "_type", rename_all = "snake_case")]
pub enum Record {
    /// A change of state of an accepted message.
    Inbox(InboxRecord),
    /// A tool call about to be sent.
    Call(CallRecord),
}

/// Where a message stands, from accepted to answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxState {
    /// On disk, not yet in a turn.
    Accepted,
    /// Its turn started (the user message is in the history).
    InTurn,
    /// Its turn ended with an answer.
    Answered,
    /// Its turn ended without one (`reason` says why).
    Failed,
}

impl InboxState {
    /// Whether nothing more happens to the message.
    pub fn is_closed(self) -> bool {
        matches!(self, InboxState::Answered | InboxState::Failed)
    }
}

/// One inbox line. Only the `accepted` line carries the message itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxRecord {
    /// The message's id in this session (also its turn's id).
    pub id: String,
    /// The state it entered.
    pub state: InboxState,
    /// The text (accepted only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Who wrote it when not the user: `cron`, `heartbeat`, `subagent`, `system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The channel's id of the message, for recognising a redelivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound_id: Option<String>,
    /// The channel's details of the message, for the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_metadata: Option<Value>,
    /// Who wrote it, as the channel names them: the one person who may approve the calls of
    /// its turn, also when the turn is resumed after a restart. Absent in records written
    /// before it was kept (their resumed turns have nobody to ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// Why the turn failed (failed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl InboxRecord {
    /// A state change of message `id` that carries nothing else.
    pub fn state(id: &str, state: InboxState) -> InboxRecord {
        InboxRecord {
            id: id.to_owned(),
            state,
            text: None,
            source: None,
            inbound_id: None,
            channel_metadata: None,
            sender_id: None,
            reason: None,
        }
    }
}

/// One journal line: a tool call was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// `<turn id>.<step>.<call index>`: the idempotency key the plugin receives.
    pub key: String,
    /// The turn (inbox id) the call belongs to.
    pub turn: String,
    /// The model's id of the call, as in the assistant message.
    pub tool_call_id: String,
    /// Always `started`; the tool result message is the `finished` record.
    pub state: CallState,
}

/// A journal record's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Written before the call is sent.
    Started,
}

/// The journal key of call `index` of model step `step` in turn `turn`.
pub fn call_key(turn: &str, step: u32, index: usize) -> String {
    format!("{turn}.{step}.{index}")
}

/// A fresh inbox id: the clock in microseconds and a counter, in hex, so ids of one
/// session never meet across runs of the kernel.
pub fn fresh_inbox_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let micros = chrono::Utc::now().timestamp_micros();
    format!("m{micros:x}-{:x}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A message accepted and not yet answered, as the inbox holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingMessage {
    /// Its inbox id.
    pub id: String,
    /// Its text.
    pub text: String,
    /// Who wrote it when not the user.
    pub source: Option<String>,
    /// The channel's id of it.
    pub inbound_id: Option<String>,
    /// The channel's details of it (null when none).
    pub channel_metadata: Value,
    /// Who wrote it, as its channel names them (none for older records and kernel turns).
    pub sender_id: Option<String>,
    /// Whether its turn started.
    pub state: InboxState,
}

impl Session {
    /// The state of inbox entry `id`, when the session has it.
    pub fn inbox_state(&self, id: &str) -> Option<InboxState> {
        self.inbox().filter(|r| r.id == id).map(|r| r.state).last()
    }

    /// The inbox entry of the channel message `inbound_id`, when the session has it.
    pub fn inbox_entry_of(&self, inbound_id: &str) -> Option<(String, InboxState)> {
        let id = self.inbox().find(|r| r.inbound_id.as_deref() == Some(inbound_id))?.id.clone();
        let state = self.inbox_state(&id)?;
        Some((id, state))
    }

    /// Every message accepted and not answered, in the order it was accepted.
    pub fn pending_messages(&self) -> Vec<PendingMessage> {
        let closed = self.closed_ids();
        let mut pending: Vec<PendingMessage> = Vec::new();
        for record in self.inbox().filter(|r| !closed.contains(r.id.as_str())) {
            match record.state {
                InboxState::Accepted => pending.push(PendingMessage {
                    id: record.id.clone(),
                    text: record.text.clone().unwrap_or_default(),
                    source: record.source.clone(),
                    inbound_id: record.inbound_id.clone(),
                    channel_metadata: record.channel_metadata.clone().unwrap_or(Value::Null),
                    sender_id: record.sender_id.clone(),
                    state: InboxState::Accepted,
                }),
                state => {
                    if let Some(entry) = pending.iter_mut().find(|p| p.id == record.id) {
                        entry.state = state;
                    }
                }
            }
        }
        pending
    }

    /// Where in the history the user message of turn `id` is.
    pub fn turn_start(&self, id: &str) -> Option<usize> {
        if !self.may_carry(INBOX_ID_KEY, id) {
            return None;
        }
        self.messages
            .iter()
            .rposition(|m| m.role == Role::User && m.extra.get(INBOX_ID_KEY).and_then(Value::as_str) == Some(id))
    }

    /// Whether the journal says call `tool_call_id` of turn `turn` was sent.
    pub fn call_started(&self, turn: &str, tool_call_id: &str) -> bool {
        self.records.iter().any(|r| matches!(r, Record::Call(c) if c.turn == turn && c.tool_call_id == tool_call_id))
    }

    /// Drops the records of closed messages (and of their turns' calls): what a whole-file
    /// rewrite keeps, and what memory keeps after a load.
    pub fn compact_records(&mut self) {
        let closed: HashSet<String> = self.closed_ids().into_iter().map(str::to_owned).collect();
        self.records.retain(|record| match record {
            Record::Inbox(r) => !closed.contains(&r.id),
            Record::Call(c) => !closed.contains(&c.turn),
        });
    }

    fn inbox(&self) -> impl Iterator<Item = &InboxRecord> {
        self.records.iter().filter_map(|r| match r {
            Record::Inbox(inbox) => Some(inbox),
            Record::Call(_) => None,
        })
    }

    fn closed_ids(&self) -> HashSet<&str> {
        self.inbox().filter(|r| r.state.is_closed()).map(|r| r.id.as_str()).collect()
    }
}

/// What the history of turn `id` says about how far it got, from its user message on.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnProgress {
    /// It ends with an answer: the turn finished (only its `answered` line is missing).
    Answered,
    /// Its last assistant message called tools of which these have no result.
    OpenCalls(Vec<ToolCall>),
    /// The model is to be asked next (after the user message or complete tool results).
    AskModel,
}

/// How far the turn whose user message is `messages[start]` got.
pub fn progress(messages: &[ChatMessage], start: usize) -> TurnProgress {
    let turn = messages.get(start..).unwrap_or_default();
    let Some(caller) = turn.iter().rposition(|m| m.role == Role::Assistant) else { return TurnProgress::AskModel };
    let assistant = &turn[caller];
    if assistant.tool_calls.is_empty() {
        return TurnProgress::Answered;
    }
    let answered: HashSet<&str> = turn[caller + 1..].iter().filter_map(|m| m.tool_call_id.as_deref()).collect();
    let open: Vec<ToolCall> =
        assistant.tool_calls.iter().filter(|call| !answered.contains(call.id.as_str())).cloned().collect();
    if open.is_empty() { TurnProgress::AskModel } else { TurnProgress::OpenCalls(open) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(id: &str, text: &str) -> Record {
        let mut record = InboxRecord::state(id, InboxState::Accepted);
        record.text = Some(text.to_owned());
        Record::Inbox(record)
    }

    #[test]
    fn pending_messages_are_those_accepted_and_not_closed_in_acceptance_order() {
        let mut session = Session::new("loopback:c1");
        session.records = vec![
            accepted("a", "first"),
            accepted("b", "second"),
            Record::Inbox(InboxRecord::state("a", InboxState::InTurn)),
            accepted("c", "third"),
            Record::Inbox(InboxRecord::state("b", InboxState::InTurn)),
            Record::Inbox(InboxRecord::state("b", InboxState::Answered)),
        ];
        let pending = session.pending_messages();
        let ids: Vec<(&str, InboxState)> = pending.iter().map(|p| (p.id.as_str(), p.state)).collect();
        assert_eq!(ids, [("a", InboxState::InTurn), ("c", InboxState::Accepted)]);
        session.compact_records();
        assert_eq!(session.records.len(), 3, "b's records are gone");
    }

    #[test]
    fn a_record_line_round_trips_with_its_type_tag() {
        let record = Record::Call(CallRecord {
            key: call_key("t", 2, 0),
            turn: "t".into(),
            tool_call_id: "call_1".into(),
            state: CallState::Started,
        });
        let line = serde_json::to_value(&record).unwrap();
        assert_eq!(line["_type"], "call");
        assert_eq!(line["key"], "t.2.0");
        assert_eq!(serde_json::from_value::<Record>(line).unwrap(), record);
    }
}

//! Putting a session right after a crash: what [`SessionStore::load`](super::SessionStore::load)
//! fixed in the file, and the messages that close a turn the kernel never finished.

use std::collections::HashSet;

use super::Session;
use crate::message::{ChatMessage, Role};

/// What [`SessionStore::load`](super::SessionStore::load) changed in a file before using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// The last line was not valid JSON — the process died while appending it — and was cut
    /// off the file.
    DroppedTornLine {
        /// Its 1-based line number.
        line: usize,
        /// How many bytes were removed.
        bytes: usize,
    },
    /// The file did not end with a newline (an editor, or another program, wrote it); one was
    /// added so the next append starts a line of its own.
    AddedMissingNewline,
}

/// Content of the tool result that stands in for a call whose result was never recorded.
pub const INTERRUPTED_TOOL_RESULT: &str = "Error: interrupted: oxibot stopped before this tool call finished, \
so whether it took effect is unknown. Check its effect before running it again.";

/// Content of the assistant message that answers a user message left without a reply.
pub const INTERRUPTED_REPLY: &str = "(My previous turn was interrupted: oxibot stopped before I could \
finish answering this message.)";

/// The messages that make a history valid for a provider again after a crash; empty when it
/// already is. The caller appends them (with [`SessionStore::append`](super::SessionStore::append)).
///
/// Only the end of the history is looked at, since that is the only place a crash leaves
/// something open:
/// - each tool call of the last assistant message that has no result among the tool messages
///   after it gets an [`INTERRUPTED_TOOL_RESULT`], in call order;
/// - a history ending with a user message gets an [`INTERRUPTED_REPLY`].
pub fn close_interrupted_turn(session: &Session) -> Vec<ChatMessage> {
    close_messages(&session.messages)
}

fn close_messages(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let Some(last) = messages.last() else {
        return Vec::new();
    };
    if last.role == Role::User {
        return vec![ChatMessage::text(Role::Assistant, INTERRUPTED_REPLY).from_kernel()];
    }
    let Some(caller) = messages.iter().rposition(|m| m.role != Role::Tool) else {
        return Vec::new();
    };
    let assistant = &messages[caller];
    if assistant.role != Role::Assistant {
        return Vec::new();
    }
    let answered: HashSet<&str> = messages[caller + 1..].iter().filter_map(|m| m.tool_call_id.as_deref()).collect();
    assistant
        .tool_calls
        .iter()
        .filter(|call| !answered.contains(call.id.as_str()))
        .map(|call| ChatMessage::tool_result(call, INTERRUPTED_TOOL_RESULT))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn session_of(messages: Vec<ChatMessage>) -> Session {
        let mut session = Session::new("cli:direct");
        session.messages = messages;
        session
    }

    fn calling(calls: &[(&str, &str)]) -> ChatMessage {
        let mut message = ChatMessage::text(Role::Assistant, "");
        message.content = serde_json::Value::Null;
        message.tool_calls = calls.iter().map(|(id, name)| ToolCall::new(*id, *name, "{}")).collect();
        message
    }

    #[test]
    fn a_tool_call_without_a_result_gets_an_interrupted_error_result() {
        let session = session_of(vec![ChatMessage::text(Role::User, "list files"), calling(&[("call_1", "list_dir")])]);
        let closing = close_interrupted_turn(&session);
        assert_eq!(closing.len(), 1);
        assert_eq!(closing[0].role, Role::Tool);
        assert_eq!(closing[0].tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(closing[0].name.as_deref(), Some("list_dir"));
        assert!(closing[0].text_content().starts_with("Error: interrupted"));
    }

    #[test]
    fn of_two_tool_calls_only_the_unanswered_one_is_closed() {
        let first = ToolCall::new("call_1", "read_file", "{}");
        let session = session_of(vec![
            ChatMessage::text(Role::User, "compare"),
            calling(&[("call_1", "read_file"), ("call_2", "exec")]),
            ChatMessage::tool_result(&first, "contents"),
        ]);
        let closing = close_interrupted_turn(&session);
        assert_eq!(closing.len(), 1);
        assert_eq!(closing[0].tool_call_id.as_deref(), Some("call_2"));
        assert_eq!(closing[0].name.as_deref(), Some("exec"));
    }

    #[test]
    fn a_trailing_user_message_gets_an_interrupted_reply() {
        let session = session_of(vec![
            ChatMessage::text(Role::User, "hi"),
            ChatMessage::text(Role::Assistant, "hello"),
            ChatMessage::text(Role::User, "what time is it?"),
        ]);
        let closing = close_interrupted_turn(&session);
        assert_eq!(closing, vec![ChatMessage::text(Role::Assistant, INTERRUPTED_REPLY).from_kernel()]);
    }

    #[test]
    fn a_finished_turn_needs_nothing() {
        let call = ToolCall::new("call_1", "read_file", "{}");
        let finished = session_of(vec![
            ChatMessage::text(Role::User, "read a"),
            calling(&[("call_1", "read_file")]),
            ChatMessage::tool_result(&call, "contents"),
            ChatMessage::text(Role::Assistant, "done"),
        ]);
        assert!(close_interrupted_turn(&finished).is_empty());
        assert!(close_interrupted_turn(&session_of(Vec::new())).is_empty());
    }

    #[test]
    fn all_results_present_needs_nothing_even_without_a_final_answer() {
        let call = ToolCall::new("call_1", "read_file", "{}");
        let session = session_of(vec![
            ChatMessage::text(Role::User, "read a"),
            calling(&[("call_1", "read_file")]),
            ChatMessage::tool_result(&call, "x"),
        ]);
        assert!(close_interrupted_turn(&session).is_empty());
    }
}

//! `GET /api/sessions` (every session of every channel, last activity first) and
//! `GET /api/session?key=` (one transcript). Both read the session files directly and never
//! write them: the session actors own the files, and a reader only needs whole lines.

use std::path::Path;

use serde_json::{Value, json};

use crate::session::SessionStore;
use crate::session::location::key_of;
use crate::turn::approval::audit_text;

/// Longest preview of a session's last message.
const PREVIEW_CHARS: usize = 120;

/// Every session in the store's directory: key, channel, last activity, message count and a
/// preview of the last message, most recent first.
pub fn list(store: &SessionStore) -> Value {
    let mut sessions: Vec<Value> = std::fs::read_dir(store.dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|path| summary(&path))
        .collect();
    sessions.sort_by(|a, b| b["updated_at"].as_str().cmp(&a["updated_at"].as_str()));
    json!({"sessions": sessions})
}

/// One session's summary, `None` for a file without a key.
fn summary(path: &Path) -> Option<Value> {
    let key = key_of(path)?;
    let (header, messages) = read(path)?;
    let last = messages.iter().rev().find(|m| matches!(m["role"].as_str(), Some("user" | "assistant")));
    let preview: String =
        last.map(|m| text_of(&m["content"])).unwrap_or_default().chars().take(PREVIEW_CHARS).collect();
    let channel = key.split_once(':').map_or(key.as_str(), |(channel, _)| channel).to_owned();
    Some(json!({
        "key": key,
        "channel": channel,
        "updated_at": header["updated_at"],
        "created_at": header["created_at"],
        "messages": messages.len(),
        "preview": preview,
    }))
}

/// The transcript of session `key`: each message's role, text, tool calls (name and
/// arguments), tool name and time, and for a tool result with an audit record who or what
/// allowed (or refused) the call, in words; `None` when there is no such session.
pub fn transcript(store: &SessionStore, key: &str) -> Option<Value> {
    let path = store.path_for(key);
    let (header, messages) = read(&path)?;
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let calls: Vec<Value> = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|call| json!({"name": call["function"]["name"], "arguments": call["function"]["arguments"]}))
                .collect();
            json!({"role": m["role"], "text": text_of(&m["content"]), "tool_calls": calls, "name": m["name"],
                "timestamp": m["timestamp"], "audit": m.get("approval").map(audit_text)})
        })
        .collect();
    Some(json!({"key": key, "updated_at": header["updated_at"], "messages": messages}))
}

/// The metadata line and the message lines of a session file (a torn last line is skipped).
fn read(path: &Path) -> Option<(Value, Vec<Value>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut header = Value::Null;
    let mut messages = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let Ok(record) = serde_json::from_str::<Value>(line) else { continue };
        match record.get("_type").and_then(Value::as_str) {
            Some("metadata") => header = record,
            Some(_) => {}
            None => messages.push(record),
        }
    }
    Some((header, messages))
}

/// A message's content as text: a string as it is, the text parts of a list of parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::TempDir;

    fn write_session(store: &SessionStore, key: &str, updated: &str, lines: &[Value]) {
        let header = json!({"_type": "metadata", "key": key, "created_at": updated, "updated_at": updated,
            "metadata": {}, "last_consolidated": 0});
        let text: Vec<String> = std::iter::once(&header).chain(lines).map(Value::to_string).collect();
        std::fs::write(store.path_for(key), text.join("\n") + "\n").unwrap();
    }

    #[test]
    fn sessions_are_listed_most_recent_first_with_a_preview() {
        let dir = TempDir::new("web-sessions");
        let store = SessionStore::in_dir(dir.path());
        write_session(&store, "telegram:1", "2026-01-01T10:00:00", &[json!({"role": "user", "content": "old"})]);
        let parts = json!([{"type": "text", "text": "new"}]);
        write_session(&store, "websocket:web-1", "2026-02-01T10:00:00", &[json!({"role": "user", "content": parts})]);
        let listed = list(&store);
        let keys: Vec<&str> =
            listed["sessions"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["websocket:web-1", "telegram:1"]);
        assert_eq!(listed["sessions"][0]["preview"], "new");
        assert_eq!(listed["sessions"][0]["channel"], "websocket");
    }

    #[test]
    fn a_transcript_names_tool_calls_and_skips_a_torn_line() {
        let dir = TempDir::new("web-transcript");
        let store = SessionStore::in_dir(dir.path());
        let call = json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]});
        write_session(&store, "cli:direct", "2026-01-01T10:00:00", &[json!({"role": "user", "content": "hi"}), call]);
        let path = store.path_for("cli:direct");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"role\": \"assi");
        std::fs::write(&path, text).unwrap();
        let shown = transcript(&store, "cli:direct").unwrap();
        assert_eq!(shown["messages"].as_array().unwrap().len(), 2);
        assert_eq!(shown["messages"][1]["tool_calls"][0]["name"], "read_file");
        assert!(transcript(&store, "cli:other").is_none());
    }

    #[test]
    fn a_tool_result_in_a_transcript_says_who_allowed_its_call() {
        let dir = TempDir::new("web-audit");
        let store = SessionStore::in_dir(dir.path());
        let record = json!({"allowed": true, "by": "person", "channel": "telegram", "chat_id": "42", "sender": "42", "call": "ab"});
        let lines = [
            json!({"role": "tool", "name": "exec", "content": "ok", "approval": record}),
            json!({"role": "tool", "name": "read_file", "content": "text"}),
        ];
        write_session(&store, "telegram:42", "2026-01-01T10:00:00", &lines);
        let shown = transcript(&store, "telegram:42").unwrap();
        assert_eq!(shown["messages"][0]["audit"], "allowed by 42 on telegram (chat 42)");
        assert_eq!(shown["messages"][1]["audit"], Value::Null);
    }
}

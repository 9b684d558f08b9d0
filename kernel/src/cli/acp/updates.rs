//! What `oxibot acp` tells the editor in `session/update` notifications: reply pieces, tool
//! calls with their kind, status and the files they touch, and a loaded session's history.

use std::collections::VecDeque;
use std::path::Path;

use oxibot_kernel::message::{ChatMessage, Role};
use serde_json::{Value, json};

/// A text block as ACP writes content.
fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// A piece of the agent's reply.
pub fn agent_chunk(piece: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": text(piece)})
}

/// A piece of the person's message (a loaded session's history).
pub fn user_chunk(piece: &str) -> Value {
    json!({"sessionUpdate": "user_message_chunk", "content": text(piece)})
}

/// A tool call starting, with what the editor shows of it.
pub fn tool_call(id: &str, name: &str, arguments: &str, status: &str, workspace: &Path) -> Value {
    let input: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title(name, &input),
        "kind": kind(name),
        "status": status,
        "rawInput": input,
        "locations": locations(&input, workspace),
    })
}

/// A tool call's new status (`in_progress`, `completed`, `failed`).
pub fn tool_status(id: &str, status: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status})
}

/// The kind of tool, for the editor's icon.
fn kind(name: &str) -> &'static str {
    match name {
        "read_file" => "read",
        "write_file" | "edit_file" => "edit",
        "list_dir" | "glob" | "grep" | "memory_search" => "search",
        "exec" => "execute",
        "web_fetch" | "web_search" => "fetch",
        _ => "other",
    }
}

/// `tool: what it works on`, the first of the arguments that says it, shortened.
fn title(name: &str, input: &Value) -> String {
    const SAYING: [&str; 5] = ["path", "command", "url", "query", "pattern"];
    let what = SAYING.iter().find_map(|key| input.get(*key).and_then(Value::as_str));
    match what {
        Some(what) if what.chars().count() > 80 => format!("{name}: {}…", what.chars().take(79).collect::<String>()),
        Some(what) => format!("{name}: {what}"),
        None => name.to_owned(),
    }
}

/// The file a file tool touches, as an absolute path in the workspace.
fn locations(input: &Value, workspace: &Path) -> Vec<Value> {
    let Some(path) = input.get("path").and_then(Value::as_str) else { return Vec::new() };
    vec![json!({"path": workspace.join(path).display().to_string()})]
}

/// The ids the editor knows the turn's tool calls by, matched to the kernel's events (which
/// name only the tool): calls finish, and ask for approval, in the order they started.
#[derive(Default)]
pub struct ToolCalls {
    /// Calls started and not finished: (id, tool, whether the person was asked about it).
    open: VecDeque<(String, String, bool)>,
    /// How many calls this prompt started (the next id).
    started: usize,
    /// The prompt's own prefix, so ids differ between prompts.
    prefix: String,
}

impl ToolCalls {
    /// Calls of the prompt numbered `prompt`.
    pub fn for_prompt(prompt: u64) -> ToolCalls {
        ToolCalls { prefix: format!("p{prompt}-"), ..ToolCalls::default() }
    }

    /// A call of `name` started; returns its id.
    pub fn start(&mut self, name: &str) -> String {
        self.started += 1;
        let id = format!("{}call-{}", self.prefix, self.started);
        self.open.push_back((id.clone(), name.to_owned(), false));
        id
    }

    /// The id of the oldest open call of `name` not asked about yet (the one the kernel asks
    /// about now), marked as asked.
    pub fn ask_about(&mut self, name: &str) -> Option<String> {
        let (id, _, asked) = self.open.iter_mut().find(|(_, tool, asked)| tool == name && !asked)?;
        *asked = true;
        Some(id.clone())
    }

    /// The oldest open call of `name` finished; returns its id.
    pub fn finish(&mut self, name: &str) -> Option<String> {
        let index = self.open.iter().position(|(_, tool, _)| tool == name)?;
        self.open.remove(index).map(|(id, _, _)| id)
    }
}

/// The updates replaying a session's history: the person's and the assistant's texts, and
/// the tool calls with how they ended.
pub fn replay(messages: &[ChatMessage], workspace: &Path) -> Vec<Value> {
    let mut updates = Vec::new();
    for message in messages.iter().filter(|message| !message.is_from_kernel()) {
        let content = message.text_content();
        match message.role {
            Role::User if !content.is_empty() => updates.push(user_chunk(&content)),
            Role::Assistant => {
                if !content.is_empty() {
                    updates.push(agent_chunk(&content));
                }
                for call in &message.tool_calls {
                    updates.push(tool_call(
                        &call.id,
                        &call.function.name,
                        &call.function.arguments,
                        "completed",
                        workspace,
                    ));
                }
            }
            Role::Tool if content.starts_with("Error") => {
                if let Some(id) = &message.tool_call_id {
                    updates.push(tool_status(id, "failed"));
                }
            }
            _ => {}
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_tool_call_names_its_file_as_an_absolute_location() {
        let update = tool_call("c1", "read_file", r#"{"path": "notes/a.md"}"#, "pending", Path::new("/w"));
        assert_eq!(update["locations"], json!([{"path": "/w/notes/a.md"}]));
        assert_eq!((&update["kind"], &update["title"]), (&json!("read"), &json!("read_file: notes/a.md")));
        let exec = tool_call("c2", "exec", r#"{"command": "ls"}"#, "pending", Path::new("/w"));
        assert_eq!((&exec["kind"], &exec["locations"]), (&json!("execute"), &json!([])));
    }

    #[test]
    fn calls_finish_in_the_order_they_started_per_tool() {
        let mut calls = ToolCalls::for_prompt(1);
        let first = calls.start("read_file");
        let exec = calls.start("exec");
        let second = calls.start("read_file");
        assert_eq!(calls.ask_about("read_file"), Some(first.clone()));
        assert_eq!(calls.ask_about("read_file"), Some(second.clone()));
        assert_eq!(calls.ask_about("read_file"), None);
        assert_eq!(calls.finish("read_file"), Some(first));
        assert_eq!(calls.finish("exec"), Some(exec));
        assert_eq!(calls.finish("read_file"), Some(second));
        assert_eq!(calls.finish("read_file"), None);
    }
}

//! What `oxibot mcp serve` offers MCP clients: the `chat` tool (a real turn in a session), the
//! `memory_search` tool (the recall index, as `oxibot memory search`), and each session as a
//! resource (`oxibot://session/<key>`, read as its transcript).

use std::rc::Rc;

use oxibot_kernel::agent::{SessionManager, TurnReply};
use oxibot_kernel::gateway::web::api::sessions;
use oxibot_kernel::memory::recall::sources::Category;
use serde_json::{Map, Value, json};

use super::protocol::{Backend, INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError, ToolOutcome};

/// The scheme and prefix of a session's resource URI.
const SESSION_URI_PREFIX: &str = "oxibot://session/";

/// How many hits `memory_search` gives without a `limit`.
const DEFAULT_SEARCH_LIMIT: usize = 5;

/// The assistant as an MCP backend.
pub struct Assistant {
    /// Runs turns and holds the memory actors.
    manager: Rc<SessionManager>,
    /// The session `chat` talks in when the call names none.
    default_session: String,
}

impl Assistant {
    /// The backend over `manager`, chatting in `default_session` unless told otherwise.
    pub fn new(manager: Rc<SessionManager>, default_session: String) -> Assistant {
        Assistant { manager, default_session }
    }

    /// Runs one turn in `session` and gives its reply.
    async fn chat(&self, session: &str, message: &str) -> ToolOutcome {
        // No one to ask for approvals here: with the receiver gone, a call that needs one is
        // refused at once and the model is told so.
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        match self.manager.send(session, message, events).await {
            Ok(TurnReply::Stopped) => ToolOutcome { text: "the turn was stopped".to_owned(), is_error: true },
            Ok(reply) => ToolOutcome { text: reply.text().to_owned(), is_error: false },
            Err(error) => ToolOutcome { text: format!("Error: {error}"), is_error: true },
        }
    }

    /// Searches memory as `oxibot memory search` does and lists the hits.
    async fn memory_search(&self, query: &str, limit: usize, category: Option<Category>) -> ToolOutcome {
        let Some(recall) = &self.manager.memory().recall else {
            return ToolOutcome { text: "Error: the memory index cannot be opened".to_owned(), is_error: true };
        };
        let found = match recall.sync().await {
            Ok(_) => recall.search(query, limit, category).await,
            Err(error) => Err(error),
        };
        match found {
            Ok(hits) if hits.is_empty() => {
                ToolOutcome { text: format!("Nothing in memory matches \"{query}\"."), is_error: false }
            }
            Ok(hits) => {
                let lines: Vec<String> = hits
                    .iter()
                    .enumerate()
                    .map(|(rank, hit)| {
                        let day = hit.day().map(|d| format!(", {d}")).unwrap_or_default();
                        format!("{}. {} ({}{day})\n{}", rank + 1, hit.location(), hit.category.as_str(), hit.text)
                    })
                    .collect();
                ToolOutcome { text: lines.join("\n\n"), is_error: false }
            }
            Err(error) => ToolOutcome { text: format!("Error: memory search failed: {error}"), is_error: true },
        }
    }
}

impl Backend for Assistant {
    fn name(&self) -> &str {
        "oxibot"
    }

    fn tools(&self) -> Vec<Value> {
        vec![
            json!({
                "name": "chat",
                "title": "Chat with oxibot",
                "description": format!(
                    "Send a message to the oxibot assistant and get its reply. The assistant keeps the \
                     conversation: each session remembers what was said before. Without `session` the \
                     message goes to {}.",
                    self.default_session
                ),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "description": "What to say."},
                        "session": {"type": "string", "description": "The session key (`channel:chat_id`), e.g. one listed as a resource."}
                    },
                    "required": ["message"]
                },
                "annotations": {"readOnlyHint": false, "openWorldHint": true}
            }),
            json!({
                "name": "memory_search",
                "title": "Search oxibot's memory",
                "description": "Search the assistant's memory (MEMORY.md, daily notes, past conversations) and list the best matches with where they are.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many matches (default 5)."},
                        "category": {"type": "string", "enum": ["core", "daily", "conversation"], "description": "Only this kind of memory."}
                    },
                    "required": ["query"]
                },
                "annotations": {"readOnlyHint": true, "openWorldHint": false}
            }),
        ]
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutcome, RpcError> {
        let text = |key: &str| arguments.get(key).and_then(Value::as_str);
        match name {
            "chat" => {
                let message = text("message").ok_or_else(|| RpcError::invalid_params("chat needs a \"message\""))?;
                let session = text("session").filter(|s| !s.trim().is_empty()).unwrap_or(&self.default_session);
                Ok(self.chat(session, message).await)
            }
            "memory_search" => {
                let query = text("query").ok_or_else(|| RpcError::invalid_params("memory_search needs a \"query\""))?;
                let limit = arguments
                    .get("limit")
                    .and_then(Value::as_u64)
                    .map_or(DEFAULT_SEARCH_LIMIT, |n| n.clamp(1, 50) as usize);
                let category = match text("category") {
                    Some(name) => Some(Category::parse(name).ok_or_else(|| {
                        RpcError::invalid_params(format!("unknown category '{name}' (core, daily or conversation)"))
                    })?),
                    None => None,
                };
                Ok(self.memory_search(query, limit, category).await)
            }
            other => Err(RpcError::invalid_params(format!("unknown tool: {other}"))),
        }
    }

    fn resources(&self) -> Result<Vec<Value>, RpcError> {
        let listed = sessions::list(self.manager.services().session_files());
        let resources = listed["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|session| {
                let key = session["key"].as_str()?;
                Some(json!({
                    "uri": session_uri(key),
                    "name": key,
                    "description": format!("{} message(s), last active {}: {}", session["messages"],
                        session["updated_at"].as_str().unwrap_or("never"), session["preview"].as_str().unwrap_or("")),
                    "mimeType": "text/plain",
                }))
            })
            .collect();
        Ok(resources)
    }

    fn read_resource(&self, uri: &str) -> Result<Vec<Value>, RpcError> {
        let not_found = || RpcError::new(RESOURCE_NOT_FOUND, format!("resource not found: {uri}"));
        let key = session_key(uri).ok_or_else(not_found)?;
        let store = self.manager.services().session_files();
        if !store.path_for(&key).exists() {
            return Err(not_found());
        }
        let transcript = sessions::transcript(store, &key)
            .ok_or_else(|| RpcError::new(INTERNAL_ERROR, format!("cannot read session {key}")))?;
        Ok(vec![json!({"uri": uri, "mimeType": "text/plain", "text": transcript_text(&transcript)})])
    }
}

/// The resource URI of session `key` (its text percent-encoded where a URI needs it).
fn session_uri(key: &str) -> String {
    let mut uri = SESSION_URI_PREFIX.to_owned();
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:@".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The session key of a resource URI, `None` for another URI.
fn session_key(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(SESSION_URI_PREFIX)?;
    let key = oxibot_kernel::gateway::web::http::percent_decode(encoded);
    (!key.is_empty()).then_some(key)
}

/// A transcript as text: one paragraph per message, its role first.
fn transcript_text(transcript: &Value) -> String {
    let mut text = String::new();
    for message in transcript["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("?");
        let time = message["timestamp"].as_str().map(|t| format!(" ({t})")).unwrap_or_default();
        text.push_str(&format!("[{role}{time}]"));
        if let Some(name) = message["name"].as_str() {
            text.push_str(&format!(" {name}"));
        }
        text.push('\n');
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let arguments = call["arguments"].as_str().unwrap_or("");
            text.push_str(&format!("→ {}({arguments})\n", call["name"].as_str().unwrap_or("?")));
        }
        if let Some(body) = message["text"].as_str().filter(|t| !t.is_empty()) {
            text.push_str(body);
            text.push('\n');
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_session_key_survives_its_resource_uri() {
        for key in ["cli:direct", "telegram:-100 42/x", "mcp:default"] {
            assert_eq!(session_key(&session_uri(key)).as_deref(), Some(key));
        }
        assert_eq!(session_uri("telegram:-100 42"), "oxibot://session/telegram:-100%2042");
        assert_eq!(session_key("file:///etc/passwd"), None);
    }

    #[test]
    fn a_transcript_reads_as_roles_tool_calls_and_text() {
        let transcript = json!({"messages": [
            {"role": "user", "text": "hi", "tool_calls": [], "name": null, "timestamp": "T1"},
            {"role": "assistant", "text": "", "tool_calls": [{"name": "read_file", "arguments": "{}"}], "name": null},
        ]});
        assert_eq!(transcript_text(&transcript), "[user (T1)]\nhi\n\n[assistant]\n→ read_file({})\n\n");
    }
}

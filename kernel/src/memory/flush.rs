//! Flushes: what a conversation leaves in the memory files before it leaves the context.
//!
//! - The session flush (`/new`): the conversation about to be archived is written as a
//!   dated file, `memory/YYYY-MM-DD-<slug>.md`, one list item per message, so it stays
//!   searchable word for word after it has been summarised.
//! - The pre-archive flush (OpenClaw's pre-compaction flush): before the Consolidator archives
//!   a slice, a silent turn — no user sees it, nothing of it enters the session — lets the
//!   model `store` what matters into `memory/MEMORY.md` and the day's log.

use std::path::Path;
use std::sync::Arc;

use oxibot_proto::CallContext;
use tokio::sync::mpsc;

use super::prompts::{MEMORY_FLUSH, transcript};
use super::recall::Recall;
use super::recall::rank;
use super::recall::sources::MEMORY_DIR;
use super::recall::tool::MemoryTool;
use crate::context::ContextBuilder;
use crate::message::{ChatMessage, Role};
use crate::services::Services;
use crate::turn::builtin::{BuiltinContext, BuiltinTools, TurnSource};
use crate::turn::hooks::{CompositeHook, StripThinking};
use crate::turn::runner::{RunError, RunSpec, Turn};
use crate::turn::tool_batch::ToolGate;

/// Longest message kept in a session flush, in characters.
const MAX_MESSAGE_CHARS: usize = 2000;
/// Most model calls of the silent turn.
const FLUSH_ITERATIONS: u32 = 4;
/// Longest part of `MEMORY.md` shown to the silent turn, in characters.
const MAX_MEMORY_CHARS: usize = 4000;

/// Writes `messages` of session `key` to a new dated file; returns its path relative to the
/// workspace, or `None` when there was nothing to write (no user or assistant text).
pub fn write_session_flush(
    workspace: &Path,
    key: &str,
    messages: &[ChatMessage],
    timezone: Option<&str>,
) -> std::io::Result<Option<String>> {
    let items: Vec<String> = messages.iter().filter_map(item).collect();
    if items.is_empty() {
        return Ok(None);
    }
    let now = crate::history::timestamp_now(timezone);
    let day = now.get(..10).unwrap_or(&now);
    let first_user =
        messages.iter().find(|m| m.role == Role::User).map(|m| ContextBuilder::strip_runtime(&m.text_content()));
    let slug = slug(first_user.as_deref().unwrap_or(""));
    let dir = workspace.join(MEMORY_DIR);
    std::fs::create_dir_all(&dir)?;
    let mut name = format!("{day}-{slug}.md");
    let mut n = 1;
    while dir.join(&name).exists() {
        n += 1;
        name = format!("{day}-{slug}-{n}.md");
    }
    let text = format!("# Conversation {key}, archived {now}\n\n{}\n", items.join("\n"));
    crate::fsutil::write_atomic(&dir.join(&name), text.as_bytes())?;
    Ok(Some(format!("{MEMORY_DIR}/{name}")))
}

/// A message as a list item: `- user (14:01): text`; tool traffic and empty messages are
/// left out.
fn item(message: &ChatMessage) -> Option<String> {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System | Role::Tool => return None,
    };
    let text = ContextBuilder::strip_runtime(&message.text_content());
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let text = match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    };
    let time = message.timestamp.as_deref().and_then(|t| t.get(11..16)).map(|t| format!(" ({t})")).unwrap_or_default();
    Some(format!("- {role}{time}: {}", text.replace('\n', "\n  ")))
}

/// A file-name slug from the first words that say something: `garden-plan-tomatoes`.
fn slug(text: &str) -> String {
    let words: Vec<String> = rank::terms(text)
        .into_iter()
        .map(|w| w.chars().filter(char::is_ascii_alphanumeric).collect::<String>())
        .filter(|w| !w.is_empty())
        .take(4)
        .collect();
    if words.is_empty() { "session".to_owned() } else { words.join("-") }
}

/// Only the `memory` tool runs in the silent turn.
struct OnlyMemory;

impl ToolGate for OnlyMemory {
    fn check(&self, tool: &str, _: &serde_json::Value) -> Result<(), String> {
        if tool == super::recall::tool::NAME {
            Ok(())
        } else {
            Err(format!("{tool} is not available here; use memory with action store"))
        }
    }
}

/// Runs the silent turn over `slice` of session `key`: the model may `store` what matters;
/// its words go nowhere, its calls are written to the usage log as `memory_flush`. Returns how many stores succeeded.
pub async fn flush_before_archive(
    services: &Services,
    recall: &Recall,
    key: &str,
    slice: &[ChatMessage],
) -> Result<usize, RunError> {
    let tool = MemoryTool::limited_to(recall.clone(), &["store"]);
    let builtins = BuiltinTools::new(vec![Arc::new(tool)]);
    let spec = RunSpec { max_iterations: FLUSH_ITERATIONS, stream: false, ..(*services.spec()).clone() };
    let (events, mut seen) = mpsc::unbounded_channel();
    let (channel, chat) = key.split_once(':').unwrap_or(("system", key));
    let provider = services.provider();
    let meter = services.meter(key, &spec.model, "memory_flush");
    let capped = meter.capped();
    let attribution = meter.attribution();
    let turn = Turn {
        provider: &provider,
        host: services.host(),
        spec: &spec,
        tools: builtins.specs().into(),
        context: BuiltinContext {
            call: CallContext {
                session_key: Some(key.to_owned()),
                channel: Some(channel.to_owned()),
                chat_id: Some(chat.to_owned()),
                workspace: services.workspace().display().to_string(),
                restrict_to_workspace: true,
                idempotency_key: None,
            },
            source: TurnSource::System,
            ..BuiltinContext::default()
        },
        builtins,
        hooks: CompositeHook::new(vec![Box::new(meter), Box::new(StripThinking)]),
        events,
        // Silent: nothing of this turn is kept but what the tool stores.
        checkpoint: Box::new(|_| Ok(())),
        journal: None,
        gate: Some(Arc::new(OnlyMemory)),
        approvals: None,
        compact_on_overflow: false,
        session: None,
    };
    let memory =
        std::fs::read_to_string(recall.workspace().join(super::recall::sources::MEMORY_PATH)).unwrap_or_default();
    let memory: String = memory.chars().take(MAX_MEMORY_CHARS).collect();
    let input = format!(
        "## Already in memory (memory/MEMORY.md)\n\n{}\n\n## Conversation about to be archived\n\n{}",
        if memory.trim().is_empty() { "(empty)" } else { memory.trim() },
        transcript(slice)
    );
    let messages =
        crate::message::shared([ChatMessage::text(Role::System, MEMORY_FLUSH), ChatMessage::text(Role::User, input)]);
    attribution.run(turn.run(messages)).await?;
    if let Some(breach) = capped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        services.tell_capped(&breach);
    }
    let mut stored = 0;
    while let Ok(event) = seen.try_recv() {
        if matches!(event, crate::turn::runner::TurnEvent::ToolFinished { is_error: false, .. }) {
            stored += 1;
        }
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn a_session_flush_is_a_dated_file_of_the_conversation_named_after_its_start() {
        let dir = TempDir::new("flush");
        let mut user = ChatMessage::text(
            Role::User,
            "[Runtime Context — metadata only, not instructions]\nChannel: cli\n[/Runtime Context]\n\nPlan the garden: tomatoes first",
        );
        user.timestamp = Some("2026-04-16T14:01:00".into());
        let call = crate::message::ToolCall::new("c1", "read_file", "{}");
        let mut asking = ChatMessage::text(Role::Assistant, "");
        asking.tool_calls = vec![call.clone()];
        let messages = vec![
            user,
            asking,
            ChatMessage::tool_result(&call, "file body"),
            ChatMessage::text(Role::Assistant, "Tomatoes by the south wall.\nBasil beside them."),
        ];
        let path = write_session_flush(dir.path(), "cli:direct", &messages, None).unwrap().unwrap();
        let day = &crate::history::timestamp_now(None)[..10];
        assert_eq!(path, format!("memory/{day}-plan-garden-tomatoes-first.md"));
        let text = dir.read(&path);
        assert!(text.starts_with("# Conversation cli:direct, archived "), "{text}");
        assert!(text.ends_with(
            "- user (14:01): Plan the garden: tomatoes first\n- assistant: Tomatoes by the south wall.\n  Basil beside them.\n"
        ), "{text}");
        let again = write_session_flush(dir.path(), "cli:direct", &messages, None).unwrap().unwrap();
        assert!(again.ends_with("-first-2.md"), "{again}");
        assert_eq!(write_session_flush(dir.path(), "cli:direct", &messages[1..3], None).unwrap(), None);
    }
}

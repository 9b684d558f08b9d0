//! One Dream run: fold the history entries Dream has not seen into SOUL.md, USER.md and
//! memory/MEMORY.md (and, rarely, a new skill).
//!
//! Phase 1 is one plain model call that compares the entries with the files and lists
//! findings. Phase 2 is a runner turn with a gated tool set (see [`super::gate`]) that applies
//! them as surgical edits. The Dream cursor advances after phase 2 whether or not it
//! succeeded, so one bad batch cannot make Dream loop on it forever; only a transient failure
//! of phase 1 (network, rate limit, server error) leaves the batch for the next run.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use oxibot_proto::CallContext;
use tokio::sync::mpsc;

use super::gate::{DREAM_TOOLS, DreamGate};
use super::history::{HistoryEntry, HistoryError};
use super::prompts::{
    DREAM_PHASE1, DREAM_PHASE2, MemoryFiles, analysis_is_skip, dream_phase1_input, dream_phase2_input,
};
use super::schedule::DreamSettings;
use crate::agent::Agent;
use crate::agent::hooks::{CompositeHook, StripThinking, strip_think_blocks};
use crate::agent::runner::{RunSpec, Turn};
use crate::message::{ChatMessage, Role};
use crate::provider::{ChatRequest, ProviderError};

/// What a Dream run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DreamReport {
    /// History entries processed.
    pub entries: usize,
    /// The phase-1 findings.
    pub analysis: String,
    /// Successful edits and skill writes in phase 2.
    pub changes: usize,
    /// Why phase 2 failed, when it did.
    pub phase2_error: Option<String>,
    /// The cursor Dream has now processed up to.
    pub cursor: u64,
    /// Timestamp of the newest processed entry (for the commit message).
    pub batch_timestamp: String,
}

impl DreamReport {
    /// One line for the user.
    pub fn summary(&self) -> String {
        if self.entries == 0 {
            return "Dream: no new history to process.".to_owned();
        }
        let mut text = format!(
            "Dream processed {} history entr{} and made {} change(s).",
            self.entries,
            if self.entries == 1 { "y" } else { "ies" },
            self.changes
        );
        if let Some(error) = &self.phase2_error {
            text.push_str(&format!(" The editing step failed: {error}"));
        }
        text
    }
}

/// Why a Dream run did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DreamError {
    /// The history could not be read or the cursor written.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The analysis call failed; the batch is kept for the next run when the failure was
    /// transient.
    #[error("Dream's analysis failed: {0}")]
    Analysis(ProviderError),
    /// A run is already under way.
    #[error("Dream is already running")]
    Busy,
}

/// Runs Dream once over at most `settings.max_batch_size` unprocessed entries.
pub async fn run_dream(agent: &Agent, settings: &DreamSettings) -> Result<DreamReport, DreamError> {
    let since = agent.history.dream_cursor();
    let batch = agent.history.entries_after(since, settings.max_batch_size.max(1))?;
    let Some(last) = batch.last() else { return Ok(DreamReport { cursor: since, ..DreamReport::default() }) };
    let mut report = DreamReport {
        entries: batch.len(),
        cursor: last.cursor,
        batch_timestamp: last.timestamp.clone(),
        ..DreamReport::default()
    };
    let today = super::history::timestamp_now(agent.config.agents.defaults.timezone.as_deref());
    let today = today.get(..10).unwrap_or(&today).to_owned();
    let model = settings.model.clone().unwrap_or_else(|| agent.spec.model.clone());

    let files = read_memory_files(&agent.workspace);
    match analyse(agent, &model, &batch, &files, &today).await {
        Ok(analysis) => report.analysis = analysis,
        Err(error) if error.is_retryable() => return Err(DreamError::Analysis(error)),
        Err(error) => {
            tracing::warn!(%error, "Dream analysis failed; skipping this batch");
            report.phase2_error = Some(format!("analysis failed: {error}"));
        }
    }
    if report.phase2_error.is_none() && !analysis_is_skip(&report.analysis) {
        let skills = skill_lines(agent);
        let input = dream_phase2_input(&report.analysis, &files, &today, &skills);
        match apply(agent, settings, &model, input).await {
            Ok(changes) => report.changes = changes,
            Err(error) => {
                tracing::warn!(%error, "Dream editing step failed");
                report.phase2_error = Some(error);
            }
        }
    }
    agent.history.set_dream_cursor(report.cursor)?;
    let dropped = agent.history.compact()?;
    if dropped > 0 {
        tracing::info!(dropped, "history compacted");
    }
    Ok(report)
}

/// Phase 1: the findings, as text.
async fn analyse(
    agent: &Agent,
    model: &str,
    batch: &[HistoryEntry],
    files: &MemoryFiles,
    today: &str,
) -> Result<String, ProviderError> {
    let request = ChatRequest {
        model: model.to_owned(),
        messages: vec![
            ChatMessage::text(Role::System, DREAM_PHASE1),
            ChatMessage::text(Role::User, dream_phase1_input(batch, files, today)),
        ],
        tools: Vec::new(),
        max_tokens: agent.spec.max_tokens,
        temperature: agent.spec.temperature,
        reasoning_effort: None,
    };
    let response = agent.provider.chat(&request, false, &mut |_| {}).await?;
    Ok(strip_think_blocks(response.content.as_deref().unwrap_or("")).trim().to_owned())
}

/// Phase 2: a gated runner turn; returns the number of successful writes.
async fn apply(agent: &Agent, settings: &DreamSettings, model: &str, input: String) -> Result<usize, String> {
    let tools: Vec<_> = agent.host.tools().into_iter().filter(|t| DREAM_TOOLS.contains(&t.name.as_str())).collect();
    if tools.is_empty() {
        return Err("no file tools are available (is the fs plugin installed?)".to_owned());
    }
    let spec = RunSpec {
        model: model.to_owned(),
        max_iterations: settings.max_iterations.max(1),
        stream: false,
        ..agent.spec.clone()
    };
    let written: Arc<Mutex<Vec<ChatMessage>>> = Arc::default();
    let sink = written.clone();
    let (events, _ignored) = mpsc::unbounded_channel();
    let turn = Turn {
        provider: &agent.provider,
        host: &agent.host,
        spec: &spec,
        tools,
        call_context: CallContext {
            session_key: Some("system:dream".to_owned()),
            channel: Some("system".to_owned()),
            chat_id: Some("dream".to_owned()),
            workspace: agent.workspace.display().to_string(),
            restrict_to_workspace: true,
        },
        hooks: CompositeHook::new(vec![Box::new(StripThinking)]),
        events,
        checkpoint: Box::new(move |messages| {
            sink.lock().unwrap_or_else(PoisonError::into_inner).extend(messages);
            Ok(())
        }),
        gate: Some(Arc::new(DreamGate::new(&agent.workspace))),
    };
    let messages = vec![ChatMessage::text(Role::System, DREAM_PHASE2), ChatMessage::text(Role::User, input)];
    turn.run(messages).await.map_err(|e| e.to_string())?;
    let written = written.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(count_writes(&written))
}

/// Tool results of `edit_file` / `write_file` calls that succeeded.
fn count_writes(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool && matches!(m.name.as_deref(), Some("edit_file" | "write_file")))
        .filter(|m| !m.text_content().starts_with("Error"))
        .count()
}

fn read_memory_files(workspace: &Path) -> MemoryFiles {
    let read = |name: &str| std::fs::read_to_string(workspace.join(name)).unwrap_or_default();
    MemoryFiles { memory: read("memory/MEMORY.md"), soul: read("SOUL.md"), user: read("USER.md") }
}

/// `name — description (path)` for every skill, for phase 2's duplicate check.
fn skill_lines(agent: &Agent) -> Vec<String> {
    let mut context = agent.context.lock().unwrap_or_else(PoisonError::into_inner);
    context.skills().into_iter().map(|s| format!("{} — {} ({})", s.name, s.description, s.path.display())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn only_successful_edits_and_writes_count_as_changes() {
        let edit = ToolCall::new("1", "edit_file", "{}");
        let write = ToolCall::new("2", "write_file", "{}");
        let read = ToolCall::new("3", "read_file", "{}");
        let messages = [
            ChatMessage::tool_result(&edit, "Edited SOUL.md"),
            ChatMessage::tool_result(&edit, "Error: old_text not found"),
            ChatMessage::tool_result(&write, "Wrote 120 bytes"),
            ChatMessage::tool_result(&read, "content"),
        ];
        assert_eq!(count_writes(&messages), 2);
    }

    #[test]
    fn the_summary_says_what_happened() {
        assert_eq!(DreamReport::default().summary(), "Dream: no new history to process.");
        let report =
            DreamReport { entries: 1, changes: 2, phase2_error: Some("HTTP 500".into()), ..DreamReport::default() };
        assert_eq!(
            report.summary(),
            "Dream processed 1 history entry and made 2 change(s). The editing step failed: HTTP 500"
        );
    }
}

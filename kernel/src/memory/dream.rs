//! One Dream run: fold the history entries Dream has not seen into SOUL.md, USER.md and
//! memory/MEMORY.md (and, rarely, a new skill).
//!
//! Phase 1 is one plain model call that compares the entries with the files and lists
//! findings. Phase 2 is a runner turn with a gated tool set (see [`super::gate`]) that applies
//! them as surgical edits. The Dream cursor advances after phase 2 whether or not it
//! succeeded, so one bad batch cannot make Dream loop on it forever; only a transient failure
//! of phase 1 (network, rate limit, server error) or a reached spending cap leaves the batch
//! for the next run. Each call is written to the usage log as `dream`, phase `analysis` or
//! `edit`.

use std::path::Path;
use std::sync::Arc;

use oxibot_proto::CallContext;
use tokio::sync::mpsc;

use super::gate::{DREAM_TOOLS, DreamGate};
use super::prompts::{
    DREAM_PHASE1, DREAM_PHASE2, MemoryFiles, analysis_is_skip, dream_phase1_input, dream_phase2_input,
    drop_prompt_examples,
};
use super::schedule::DreamSettings;
use crate::history::{HistoryEntry, HistoryError};
use crate::message::{ChatMessage, Role};
use crate::meter::Meter;
use crate::provider::{ChatRequest, ProviderError};
use crate::services::Services;
use crate::turn::builtin::{BuiltinContext, BuiltinTools, TurnSource};
use crate::turn::hooks::{CompositeHook, StripThinking, strip_think_blocks};
use crate::turn::runner::{RunError, RunSpec, Turn, TurnEvent};

/// Dream's source in the usage log and in `agents.defaults.budgets`.
const DREAM_SOURCE: &str = "dream";

/// What a Dream run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DreamReport {
    /// History entries processed.
    pub entries: usize,
    /// The phase-1 findings.
    pub analysis: String,
    /// Memory files changed: as the commit recorded them when versioning is on, else the
    /// successful edits of phase 2.
    pub changes: usize,
    /// Skills phase 2 created (`skills/` is not versioned).
    pub skills: usize,
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
            "Dream processed {} history entr{} and changed {} memory file(s)",
            self.entries,
            if self.entries == 1 { "y" } else { "ies" },
            self.changes
        );
        if self.skills > 0 {
            text.push_str(&format!(" and created {} skill(s)", self.skills));
        }
        text.push('.');
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
    /// A spending cap of Dream (or of everything) is reached: no model was called and the
    /// batch waits for the next run.
    #[error("{0}")]
    Capped(String),
}

/// Why Dream's editing phase failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// No file tool is registered.
    #[error("no file tools are available (is the fs plugin installed?)")]
    NoFileTools,
    /// The editing turn failed.
    #[error(transparent)]
    Turn(#[from] RunError),
}

/// Runs Dream once over at most `settings.max_batch_size` unprocessed entries.
pub async fn run_dream(services: &Services, settings: &DreamSettings) -> Result<DreamReport, DreamError> {
    let history = services.history();
    let since = history.dream_cursor();
    let batch = history.entries_after(since, settings.max_batch_size.max(1))?;
    let Some(last) = batch.last() else { return Ok(DreamReport { cursor: since, ..DreamReport::default() }) };
    let mut report = DreamReport {
        entries: batch.len(),
        cursor: last.cursor,
        batch_timestamp: last.timestamp.clone(),
        ..DreamReport::default()
    };
    let today = crate::history::timestamp_now(services.timezone().as_deref());
    let today = today.get(..10).unwrap_or(&today).to_owned();
    let model = settings.model.clone().unwrap_or_else(|| services.spec().model.clone());

    let meter = services.meter("system:dream", &model, DREAM_SOURCE);
    if let Some(breach) = meter.check() {
        services.tell_capped(&breach);
        return Err(DreamError::Capped(breach.message()));
    }
    let files = read_memory_files(services.workspace());
    match analyse(services, meter.phase("analysis"), &model, &batch, &files, &today).await {
        Ok(analysis) => report.analysis = drop_prompt_examples(&analysis),
        Err(error) if error.is_retryable() => return Err(DreamError::Analysis(error)),
        Err(error) => {
            tracing::warn!(%error, "Dream analysis failed; skipping this batch");
            report.phase2_error = Some(format!("analysis failed: {error}"));
        }
    }
    if report.phase2_error.is_none() && !analysis_is_skip(&report.analysis) {
        let skills = skill_lines(services);
        let input = dream_phase2_input(&report.analysis, &files, &today, &skills);
        match apply(services, settings, &model, input).await {
            Ok((edits, skills)) => (report.changes, report.skills) = (edits, skills),
            Err(error) => {
                tracing::warn!(%error, "Dream editing step failed");
                report.phase2_error = Some(error.to_string());
            }
        }
    }
    history.set_dream_cursor(report.cursor)?;
    let dropped = history.compact()?;
    if dropped > 0 {
        tracing::info!(dropped, "history compacted");
    }
    Ok(report)
}

/// Phase 1: the findings, as text; the call is written to the usage log by `meter`.
async fn analyse(
    services: &Services,
    mut meter: Meter,
    model: &str,
    batch: &[HistoryEntry],
    files: &MemoryFiles,
    today: &str,
) -> Result<String, ProviderError> {
    let request = ChatRequest {
        model: model.to_owned(),
        messages: crate::message::shared([
            ChatMessage::text(Role::System, DREAM_PHASE1),
            ChatMessage::text(Role::User, dream_phase1_input(batch, files, today)),
        ]),
        tools: std::sync::Arc::default(),
        max_tokens: services.spec().max_tokens,
        temperature: services.spec().temperature,
        reasoning_effort: None,
    };
    let started = std::time::Instant::now();
    let provider = services.provider();
    let mut no_stream = |_| {};
    let call = provider.chat(&request, false, &mut no_stream);
    let response =
        crate::telemetry::genai::traced_chat(&meter.attribution(), model, provider.name(), &request.messages, call)
            .await?;
    meter.record(&response.usage, started.elapsed());
    Ok(strip_think_blocks(response.content.as_deref().unwrap_or("")).trim().to_owned())
}

/// Phase 2: a gated runner turn; returns the successful edits and skill writes.
async fn apply(
    services: &Services,
    settings: &DreamSettings,
    model: &str,
    input: String,
) -> Result<(usize, usize), ApplyError> {
    let tools: Vec<_> =
        services.host().tools().into_iter().filter(|t| DREAM_TOOLS.contains(&t.name.as_str())).collect();
    if tools.is_empty() {
        return Err(ApplyError::NoFileTools);
    }
    let spec = RunSpec {
        model: model.to_owned(),
        max_iterations: settings.max_iterations.max(1),
        stream: false,
        ..(*services.spec()).clone()
    };
    let (events, mut finished) = mpsc::unbounded_channel();
    let provider = services.provider();
    let meter = services.meter("system:dream", model, DREAM_SOURCE).phase("edit");
    let capped = meter.capped();
    let attribution = meter.attribution();
    let turn = Turn {
        provider: &provider,
        host: services.host(),
        spec: &spec,
        tools: tools.into(),
        context: BuiltinContext {
            call: CallContext {
                session_key: Some("system:dream".to_owned()),
                channel: Some("system".to_owned()),
                chat_id: Some("dream".to_owned()),
                workspace: services.workspace().display().to_string(),
                restrict_to_workspace: true,
                idempotency_key: None,
            },
            source: TurnSource::System,
            ..BuiltinContext::default()
        },
        builtins: BuiltinTools::default(),
        hooks: CompositeHook::new(vec![Box::new(meter), Box::new(StripThinking)]),
        events,
        // Dream's turn is not a conversation: nothing of it is kept but the edits themselves.
        checkpoint: Box::new(|_| Ok(())),
        journal: None,
        gate: Some(Arc::new(DreamGate::new(services.workspace()))),
        approvals: None,
        compact_on_overflow: false,
        session: None,
    };
    let messages =
        crate::message::shared([ChatMessage::text(Role::System, DREAM_PHASE2), ChatMessage::text(Role::User, input)]);
    attribution.run(turn.run(messages)).await?;
    if let Some(breach) = capped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        services.tell_capped(&breach);
    }
    let mut events = Vec::new();
    while let Ok(event) = finished.try_recv() {
        events.push(event);
    }
    Ok((count_successes(&events, "edit_file"), count_successes(&events, "write_file")))
}

/// Calls of `tool` that succeeded, by the tool results' error flags.
fn count_successes(events: &[TurnEvent], tool: &str) -> usize {
    events
        .iter()
        .filter(|event| matches!(event, TurnEvent::ToolFinished { name, is_error: false } if name == tool))
        .count()
}

fn read_memory_files(workspace: &Path) -> MemoryFiles {
    let read = |name: &str| std::fs::read_to_string(workspace.join(name)).unwrap_or_default();
    MemoryFiles { memory: read("memory/MEMORY.md"), soul: read("SOUL.md"), user: read("USER.md") }
}

/// `name — description (path)` for every skill, for phase 2's duplicate check.
fn skill_lines(services: &Services) -> Vec<String> {
    services.with_context(|context| {
        context.skills().into_iter().map(|s| format!("{} — {} ({})", s.name, s.description, s.path.display())).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(name: &str, is_error: bool) -> TurnEvent {
        TurnEvent::ToolFinished { name: name.to_owned(), is_error }
    }

    #[test]
    fn only_successful_edits_and_writes_count_as_changes() {
        let events = [
            finished("edit_file", false),
            finished("edit_file", true),
            finished("write_file", false),
            finished("read_file", false),
            TurnEvent::Delta("Edited".into()),
        ];
        assert_eq!((count_successes(&events, "edit_file"), count_successes(&events, "write_file")), (1, 1));
    }

    #[test]
    fn the_summary_says_what_happened() {
        assert_eq!(DreamReport::default().summary(), "Dream: no new history to process.");
        let report =
            DreamReport { entries: 1, changes: 2, phase2_error: Some("HTTP 500".into()), ..DreamReport::default() };
        assert_eq!(
            report.summary(),
            "Dream processed 1 history entry and changed 2 memory file(s). The editing step failed: HTTP 500"
        );
        let skill = DreamReport { entries: 2, skills: 1, ..DreamReport::default() };
        assert_eq!(
            skill.summary(),
            "Dream processed 2 history entries and changed 0 memory file(s) and created 1 skill(s)."
        );
    }
}

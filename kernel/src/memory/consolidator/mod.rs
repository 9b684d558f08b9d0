//! Consolidation: keeping a session under its token budget by archiving its oldest
//! unconsolidated slice into `memory/history.jsonl`.
//!
//! Order of writes, so a kill at any instant loses nothing and duplicates nothing: the
//! summary is appended to the history (marked with the session and the index it archives up
//! to), then the session's `last_consolidated` advances. A kill between the two is repaired
//! by [`Consolidation::recover`], which finds the mark and advances the session instead of
//! archiving the slice again.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::message::ChatMessage;
use crate::provider::ProviderError;
use crate::session::{Session, SessionStorage};

use crate::history::{HistoryStore, Origin, timestamp_now};
use crate::memory::boundary::{cut_for_everything, pick_cut};
use crate::memory::prompts::{CONSOLIDATE, echoes_prompt, is_nothing_notable, minute, raw_archive};
use crate::turn::budget::SAFETY_TOKENS;

/// Most archiving rounds in one consolidation.
pub const MAX_ROUNDS: u32 = 5;

/// The token limits of a session's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Consolidation starts when the estimate reaches this.
    pub limit: u64,
    /// …and archives until the estimate is at or below this (half the limit).
    pub target: u64,
}

impl Budget {
    /// `context_window - max_tokens - SAFETY_TOKENS`, and half of it.
    pub fn new(context_window: u32, max_tokens: u32) -> Budget {
        let limit = u64::from(context_window.saturating_sub(max_tokens).saturating_sub(SAFETY_TOKENS).max(1));
        Budget { limit, target: limit / 2 }
    }
}

/// Token counts of a session's prompt.
pub trait Estimator {
    /// The whole prompt: the fixed part plus the session's unconsolidated messages.
    fn total(&mut self, session: &Session) -> u64;
    /// Message `index` (from the session's start, see `Session::offset`).
    fn message(&mut self, session: &Session, index: usize) -> u64;
}

/// Turns a slice of conversation into archive text.
pub trait Summarizer {
    /// The summary, or why the model could not give one.
    fn summarize(
        &self,
        messages: &[ChatMessage],
    ) -> impl std::future::Future<Output = Result<String, ProviderError>> + Send;
}

/// What a consolidation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Archiving rounds (history entries written).
    pub rounds: u32,
    /// Messages archived.
    pub messages: usize,
    /// Rounds whose summary failed and were archived raw.
    pub raw: u32,
    /// Estimate before, in tokens (0 when not estimated).
    pub tokens_before: u64,
    /// Estimate after, in tokens (0 when not estimated).
    pub tokens_after: u64,
}

/// Why a consolidation stopped short.
#[derive(Debug, thiserror::Error)]
pub enum ConsolidateError {
    /// The history could not be written.
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    /// The session could not be saved.
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
    /// The session is not loaded (its actor went away).
    #[error("the session is not loaded")]
    NotLoaded,
}

/// Advances `session.last_consolidated` to what the history already archived of it (after a
/// kill between an archive and the session's save); returns whether it moved.
pub fn catch_up(
    session: &mut Session,
    history: &HistoryStore,
    store: &dyn SessionStorage,
) -> Result<bool, ConsolidateError> {
    let Some(through) = history.archived_through(&session.key)? else { return Ok(false) };
    if through <= session.last_consolidated || through > session.message_count() {
        return Ok(false);
    }
    tracing::info!(session = %session.key, through, "the history already holds this slice; marking it consolidated");
    session.last_consolidated = through;
    store.save_metadata(session)?;
    session.forget_archived();
    Ok(true)
}

/// A session loaded in its actor, shared with work that runs beside it.
pub type SharedSession = Arc<Mutex<Option<Session>>>;

/// One consolidation of one session.
pub struct Consolidation<'a, E, S> {
    /// The session.
    pub session: &'a SharedSession,
    /// Its file.
    pub store: &'a dyn SessionStorage,
    /// The archive.
    pub history: &'a HistoryStore,
    /// Token counts.
    pub estimator: E,
    /// Summaries.
    pub summarizer: S,
    /// Limits.
    pub budget: Budget,
    /// For entry timestamps.
    pub timezone: Option<String>,
}

impl<E: Estimator, S: Summarizer> Consolidation<'_, E, S> {
    /// Marks as consolidated what the history already holds for this session (a kill came
    /// between an archive and the session's save).
    pub fn recover(&mut self) -> Result<(), ConsolidateError> {
        let mut guard = self.lock();
        let session = guard.as_mut().ok_or(ConsolidateError::NotLoaded)?;
        catch_up(session, self.history, self.store)?;
        Ok(())
    }

    /// Archives the oldest slices while the prompt estimate is at or above the limit, until
    /// it is at or below the target (at most [`MAX_ROUNDS`] rounds).
    pub async fn over_budget(&mut self) -> Result<Report, ConsolidateError> {
        self.recover()?;
        let mut report = Report { tokens_before: self.estimate()?, ..Report::default() };
        report.tokens_after = report.tokens_before;
        if report.tokens_before < self.budget.limit {
            return Ok(report);
        }
        while report.rounds < MAX_ROUNDS && report.tokens_after > self.budget.target {
            let excess = report.tokens_after - self.budget.target;
            let Some(cut) = self.cut_by_tokens(excess)? else { break };
            self.archive_until(cut, &mut report).await?;
            report.tokens_after = self.estimate()?;
        }
        tracing::info!(
            rounds = report.rounds,
            before = report.tokens_before,
            after = report.tokens_after,
            "consolidated"
        );
        Ok(report)
    }

    /// The slice the first round of [`Consolidation::over_budget`] (or, `forced`, of
    /// [`Consolidation::overflow`]) would archive, if any — for the silent flush turn that
    /// runs before it.
    pub fn first_slice(&mut self, forced: bool) -> Result<Option<Vec<ChatMessage>>, ConsolidateError> {
        self.recover()?;
        let tokens = self.estimate()?;
        if !forced && tokens < self.budget.limit {
            return Ok(None);
        }
        let excess = tokens.saturating_sub(self.budget.target).max(1);
        let Some(cut) = self.cut_by_tokens(excess)? else { return Ok(None) };
        self.with_session(|s| Some(archivable(s, cut).to_vec()))
    }

    /// Archives at least one slice, then more while the estimate is above half the budget
    /// (the provider reported a context overflow the estimate did not foresee). The latest
    /// turn always stays.
    pub async fn overflow(&mut self) -> Result<Report, ConsolidateError> {
        self.recover()?;
        let mut report = Report { tokens_before: self.estimate()?, ..Report::default() };
        report.tokens_after = report.tokens_before;
        while report.rounds < MAX_ROUNDS && (report.rounds == 0 || report.tokens_after > self.budget.target) {
            let excess = report.tokens_after.saturating_sub(self.budget.target).max(1);
            let Some(cut) = self.cut_by_tokens(excess)? else { break };
            self.archive_until(cut, &mut report).await?;
            report.tokens_after = self.estimate()?;
        }
        Ok(report)
    }

    /// Archives every unconsolidated message, the latest turn included (`/new`).
    pub async fn everything(&mut self) -> Result<Report, ConsolidateError> {
        self.recover()?;
        let mut report = Report::default();
        while let Some(cut) = self.with_session(|s| {
            cut_for_everything(&s.messages, s.consolidated_in_memory(), true).map(|cut| s.offset + cut)
        })? {
            self.archive_until(cut, &mut report).await?;
        }
        Ok(report)
    }

    fn estimate(&mut self) -> Result<u64, ConsolidateError> {
        let guard = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let session = guard.as_ref().ok_or(ConsolidateError::NotLoaded)?;
        Ok(self.estimator.total(session))
    }

    fn cut_by_tokens(&mut self, excess: u64) -> Result<Option<usize>, ConsolidateError> {
        let guard = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let session = guard.as_ref().ok_or(ConsolidateError::NotLoaded)?;
        let estimator = &mut self.estimator;
        let (offset, start) = (session.offset, session.consolidated_in_memory());
        let cut = pick_cut(&session.messages, start, excess, |i| estimator.message(session, offset + i));
        Ok(cut.map(|cut| offset + cut))
    }

    /// Archives the messages from `last_consolidated` to `cut` (an index from the session's
    /// start), marks them consolidated and lets them go from memory.
    async fn archive_until(&mut self, cut: usize, report: &mut Report) -> Result<(), ConsolidateError> {
        let (key, slice) = self.with_session(|s| (s.key.clone(), archivable(s, cut).to_vec()))?;
        if slice.is_empty() {
            return Ok(());
        }
        let content = match self.summarizer.summarize(&slice).await {
            // Nothing worth keeping: the slice is marked consolidated, and the history gets
            // no entry to index and recall.
            Ok(summary) if is_nothing_notable(&summary) && !summary.trim().is_empty() => None,
            Ok(summary) if !summary.trim().is_empty() && !echoes_prompt(&summary, CONSOLIDATE) => {
                Some(summary.trim().to_owned())
            }
            Ok(summary) => {
                tracing::warn!(session = %key, empty = summary.trim().is_empty(), "the summary was empty or repeated its instructions; archiving the messages raw");
                report.raw += 1;
                Some(raw_archive(&slice))
            }
            Err(error) => {
                tracing::warn!(session = %key, %error, "summarising failed; archiving the messages raw");
                report.raw += 1;
                Some(raw_archive(&slice))
            }
        };
        let timestamp = slice
            .last()
            .and_then(|m| m.timestamp.as_deref())
            .map(minute)
            .unwrap_or_else(|| timestamp_now(self.timezone.as_deref()));
        if let Some(content) = content {
            self.history.append(&timestamp, &content, Some(Origin { session: key, through: cut }))?;
        }
        let mut guard = self.lock();
        let session = guard.as_mut().ok_or(ConsolidateError::NotLoaded)?;
        session.last_consolidated = session.last_consolidated.max(cut);
        self.store.save_metadata(session)?;
        session.forget_archived();
        report.rounds += 1;
        report.messages += slice.len();
        Ok(())
    }

    fn with_session<T>(&self, f: impl FnOnce(&Session) -> T) -> Result<T, ConsolidateError> {
        self.lock().as_ref().map(f).ok_or(ConsolidateError::NotLoaded)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Session>> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The unconsolidated messages before `cut` (an index from the session's start).
fn archivable(session: &Session, cut: usize) -> &[ChatMessage] {
    let end = cut.saturating_sub(session.offset).min(session.messages.len());
    &session.messages[session.consolidated_in_memory().min(end)..end]
}

#[cfg(test)]
mod tests;

//! The control of a session's running turn: the turn runs as a task, and `/stop` (or Ctrl-C)
//! aborts it without waiting in the session's mailbox; the messages `/stop` closed before
//! their turn started are remembered, so their waiting callers hear "stopped".

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use tokio::task::AbortHandle;

use super::outcome::TurnFailure;
use crate::turn::runner::{RunError, TurnOutcome};

/// Runs a session's turns as tasks and stops the running one, bypassing the session's
/// message queue (`/stop`, Ctrl-C).
#[derive(Default)]
pub struct TurnControl {
    /// The running turn's task, so `stop` can abort it; `None` between turns.
    running: Mutex<Option<AbortHandle>>,
    /// Inbox ids of messages `/stop` closed while they waited for their turn.
    stopped_waiting: Mutex<HashSet<String>>,
}

impl TurnControl {
    /// Runs `turn` as a task on this thread until it ends or [`TurnControl::stop`] aborts it.
    pub async fn run(
        &self,
        turn: impl Future<Output = Result<TurnOutcome, RunError>> + 'static,
    ) -> Result<TurnOutcome, TurnFailure> {
        let task = actix::spawn(turn);
        let _running = Running::new(self, task.abort_handle());
        match task.await {
            Ok(outcome) => outcome.map_err(TurnFailure::Run),
            Err(error) if error.is_cancelled() => Err(TurnFailure::Stopped),
            Err(_) => Err(TurnFailure::Lost),
        }
    }

    /// Whether a turn is running.
    pub fn is_running(&self) -> bool {
        self.lock().is_some()
    }

    /// Stops the running turn, if any; returns whether there was one.
    pub fn stop(&self) -> bool {
        match self.lock().as_ref() {
            Some(task) => {
                task.abort();
                true
            }
            None => false,
        }
    }

    /// Remembers that `/stop` closed inbox entry `id` before its turn started.
    pub fn mark_stopped_waiting(&self, id: &str) {
        self.stopped_waiting.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_owned());
    }

    /// Whether `/stop` closed inbox entry `id` before its turn started (asked once per entry).
    pub fn take_stopped_waiting(&self, id: &str) -> bool {
        self.stopped_waiting.lock().unwrap_or_else(PoisonError::into_inner).remove(id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<AbortHandle>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A turn's task registered with its [`TurnControl`]; unregisters it, and aborts it should
/// the caller stop waiting (its session went away), when dropped.
struct Running<'a> {
    /// Where the task is registered.
    control: &'a TurnControl,
}

impl<'a> Running<'a> {
    fn new(control: &'a TurnControl, task: AbortHandle) -> Running<'a> {
        *control.lock() = Some(task);
        Running { control }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(task) = self.control.lock().take() {
            task.abort();
        }
    }
}

//! What spent a span's tokens, in the usage log's words: the source (`user`, `heartbeat`,
//! `dream`, `consolidation`, `memory_flush`, `subagent`, `embedding`, …), its session, and
//! the cron job or Dream phase where there is one.
//!
//! A turn, a helper or a Dream phase carries its [`Attribution`] in the OpenTelemetry context
//! ([`Attribution::run`]), so every model call span started inside it says what it was for;
//! a single call outside a turn hands its attribution to the span directly.

use std::future::Future;

use futures_util::future::Either;
use opentelemetry::context::FutureExt as _;
use opentelemetry::{Context, KeyValue};

use super::instruments::instruments;

/// The attribute naming what spent the tokens (`user`, `cron`, `heartbeat`, …), as in the
/// usage log.
pub const SOURCE_ATTRIBUTE: &str = "oxibot.usage.source";
/// The attribute naming the cron job that spent them.
pub const JOB_ATTRIBUTE: &str = "oxibot.usage.job";
/// The attribute naming the phase of a source with phases (Dream's `analysis`, `edit`).
pub const PHASE_ATTRIBUTE: &str = "oxibot.usage.phase";

/// What a model or embedding call is attributed to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// The usage log's source.
    pub source: String,
    /// The session the call is for (`gen_ai.conversation.id`).
    pub session: String,
    /// The cron job, for a job's calls.
    pub job: Option<String>,
    /// The phase, for Dream's calls.
    pub phase: Option<String>,
}

impl Attribution {
    /// Calls of `source` for `session`.
    pub fn new(source: &str, session: &str) -> Attribution {
        Attribution { source: source.to_owned(), session: session.to_owned(), job: None, phase: None }
    }

    /// The span attributes: source, session, and job and phase when set.
    pub fn span_attributes(&self) -> Vec<KeyValue> {
        let mut attributes = vec![
            KeyValue::new(SOURCE_ATTRIBUTE, self.source.clone()),
            KeyValue::new("gen_ai.conversation.id", self.session.clone()),
        ];
        if let Some(job) = &self.job {
            attributes.push(KeyValue::new(JOB_ATTRIBUTE, job.clone()));
        }
        if let Some(phase) = &self.phase {
            attributes.push(KeyValue::new(PHASE_ATTRIBUTE, phase.clone()));
        }
        attributes
    }

    /// The metric attributes: the source and phase only (sessions and jobs are too many to
    /// be metric dimensions).
    pub fn metric_attributes(&self) -> Vec<KeyValue> {
        let mut attributes = vec![KeyValue::new(SOURCE_ATTRIBUTE, self.source.clone())];
        if let Some(phase) = &self.phase {
            attributes.push(KeyValue::new(PHASE_ATTRIBUTE, phase.clone()));
        }
        attributes
    }

    /// `run` with this attribution in the current context at every poll, so the model calls
    /// it makes are attributed; `run` unchanged when export is off.
    pub fn run<F: Future>(self, run: F) -> impl Future<Output = F::Output> {
        match instruments() {
            Some(_) => Either::Left(run.with_context(Context::current().with_value(self))),
            None => Either::Right(run),
        }
    }

    /// The attribution of the current context, if any.
    pub fn current() -> Option<Attribution> {
        Context::map_current(|context| context.get::<Attribution>().cloned())
    }
}

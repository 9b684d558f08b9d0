//! `DreamActor`: runs Dream on its schedule and on request (`/dream`), one run at a time,
//! and has the `GitActor` commit what a run changed.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::dream::{DreamError, DreamReport, run_dream};
use super::git_actor::{CommitMemory, GitActor, InitRepo, ShowCommit};
use super::schedule::DreamSettings;
use crate::services::Services;

/// Runs Dream.
pub struct DreamActor {
    /// Provider, tools, history and workspace.
    services: Arc<Services>,
    /// When and how Dream runs (`agents.defaults.dream`).
    settings: DreamSettings,
    /// Versions the memory files; `None` when versioning is off.
    git: Option<Addr<GitActor>>,
    /// Whether a run is under way (a second request is refused, not queued).
    running: bool,
}

impl DreamActor {
    /// An actor for the services' workspace.
    pub fn new(services: Arc<Services>, settings: DreamSettings, git: Option<Addr<GitActor>>) -> DreamActor {
        DreamActor { services, settings, git, running: false }
    }

    /// Arms the timer for the next scheduled run.
    fn schedule_next(&self, ctx: &mut Context<Self>) {
        if !self.settings.enabled {
            return;
        }
        let now = chrono::Utc::now();
        let timezone = self.services.timezone().and_then(|tz| tz.parse().ok()).unwrap_or(chrono_tz::UTC);
        let Some(next) = self.settings.schedule.next_after(now, timezone) else {
            tracing::warn!("the Dream schedule has no next run; Dream runs only on /dream");
            return;
        };
        let wait = (next - now).to_std().unwrap_or(Duration::ZERO);
        tracing::debug!(next = %next, "next Dream run");
        ctx.run_later(wait, |actor, ctx| {
            ctx.notify(RunDream);
            actor.schedule_next(ctx);
        });
    }
}

impl Actor for DreamActor {
    type Context = Context<Self>;
}

/// Start running Dream on the configured schedule.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StartSchedule;

impl Handler<StartSchedule> for DreamActor {
    type Result = ();

    fn handle(&mut self, _: StartSchedule, ctx: &mut Context<Self>) {
        self.schedule_next(ctx);
    }
}

/// Run Dream now; resolves with what it did (and the commit, when it changed files).
#[derive(Message)]
#[rtype(result = "Result<DreamOutcome, DreamError>")]
pub struct RunDream;

/// A finished run and its commit.
#[derive(Debug, Clone)]
pub struct DreamOutcome {
    /// What the run did.
    pub report: DreamReport,
    /// The short sha of the commit recording the changes, if any.
    pub commit: Option<String>,
}

impl DreamOutcome {
    /// One or two lines for the user.
    pub fn summary(&self) -> String {
        match &self.commit {
            Some(sha) => format!("{}\nCommitted as {sha} (see /dream-log).", self.report.summary()),
            None => self.report.summary(),
        }
    }
}

impl Handler<RunDream> for DreamActor {
    type Result = ResponseActFuture<Self, Result<DreamOutcome, DreamError>>;

    fn handle(&mut self, _: RunDream, _: &mut Context<Self>) -> Self::Result {
        if self.running {
            return Box::pin(fut::ready(Err(DreamError::Busy)));
        }
        self.running = true;
        let services = self.services.clone();
        let settings = self.settings.clone();
        let git = self.git.clone();
        let work = async move {
            if let Some(git) = &git {
                // The repository must hold the files as they were before this run's edits.
                if let Ok(Err(error)) = git.send(InitRepo).await {
                    tracing::warn!(%error, "memory versioning is off");
                }
            }
            let mut report = run_dream(&services, &settings).await?;
            let commit = match &git {
                Some(git) if report.changes > 0 => commit(git, &mut report).await,
                _ => None,
            };
            Ok(DreamOutcome { report, commit })
        };
        Box::pin(work.into_actor(self).map(|outcome, actor, _| {
            actor.running = false;
            outcome
        }))
    }
}

/// Commits the memory files after a run and sets the report's changes to the files the
/// commit changed (none without a commit: an edit that changed nothing is no change);
/// failures are logged, never fatal.
async fn commit(git: &Addr<GitActor>, report: &mut DreamReport) -> Option<String> {
    let message = format!("dream: {}, {} change(s)", report.batch_timestamp, report.changes);
    let committed = git.send(CommitMemory { message }).await;
    report.changes = 0;
    match committed {
        Ok(Ok(Some(info))) => {
            if let Ok(Ok(diff)) = git.send(ShowCommit { sha: Some(info.sha.clone()) }).await {
                report.changes = diff.files_changed;
            }
            Some(info.short)
        }
        Ok(Ok(None)) => None,
        Ok(Err(error)) => {
            tracing::warn!(%error, "could not commit Dream's changes");
            None
        }
        Err(_) => None,
    }
}

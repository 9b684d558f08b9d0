//! `GET /api/cron` (every scheduled job with its schedule, next run, last status and run
//! history, as `jobs.json` holds it) and the actions on one job: pause, resume, run now,
//! remove. Edits go through the same [`CronHandle`] as the `cron` tool, so the scheduler in
//! this process (when it is the workspace's) hears of them at once.

use actix::Addr;
use serde_json::{Value, json};

use crate::cron::CronError;
use crate::cron::actor::{CronActor, RunJob};
use crate::cron::handle::CronHandle;

/// What can be done to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobAction {
    /// Stop scheduling it.
    Pause,
    /// Schedule it again.
    Resume,
    /// Run it now, as if it were due.
    RunNow,
    /// Delete it.
    Remove,
}

/// The jobs (each with `replies_to`, the session its reply goes to) and whether this gateway
/// runs them.
pub async fn list(handle: &CronHandle, scheduler: Option<&Addr<CronActor>>) -> Result<Value, CronError> {
    let jobs: Vec<Value> = handle
        .list()
        .await?
        .iter()
        .map(|job| {
            let mut value = serde_json::to_value(job).unwrap_or(Value::Null);
            if let Some(fields) = value.as_object_mut() {
                let target = job.payload.target().map(|target| target.session_key);
                fields.insert("replies_to".to_owned(), target.map_or(Value::Null, Value::String));
            }
            value
        })
        .collect();
    Ok(json!({"jobs": jobs, "scheduled_here": scheduler.is_some(), "timezone": handle.timezone().name()}))
}

/// Applies `action` to job `id`.
pub async fn act(
    handle: &CronHandle,
    scheduler: Option<&Addr<CronActor>>,
    id: &str,
    action: JobAction,
) -> Result<(), CronError> {
    match action {
        JobAction::Pause => handle.set_enabled(id, false).await.map(drop),
        JobAction::Resume => handle.set_enabled(id, true).await.map(drop),
        JobAction::Remove => handle.remove(id).await.map(drop),
        JobAction::RunNow => {
            // Only the workspace's scheduler runs jobs; a second runner could run one twice.
            let scheduler = scheduler.ok_or(CronError::Gone)?;
            scheduler.send(RunJob(id.to_owned())).await.map_err(|_| CronError::Gone)?
        }
    }
}

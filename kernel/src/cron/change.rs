//! Edits to a set of jobs, as values: the scheduler applies each one to its jobs in memory
//! and hands the same value to its store thread, which applies it to the file; the CLI and
//! the `cron` tool apply them to the file directly. One function per edit keeps the two
//! copies equal.

use std::collections::HashMap;

use chrono_tz::Tz;

use super::job::{CronJob, MissedPolicy, RunRecord, RunStatus, ScheduleKind};
use super::timing::{first_run, format_ms, run_after};

/// One edit.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Adds a job (refused when its id is taken).
    Add(Box<CronJob>),
    /// Removes a job.
    Remove {
        /// The job.
        id: String,
    },
    /// Enables (next run computed from now) or disables a job.
    SetEnabled {
        /// The job.
        id: String,
        /// Whether it is scheduled.
        enabled: bool,
        /// Now, in ms since the epoch.
        now_ms: i64,
    },
    /// Records a finished run: history, last status, next run; a one-shot job is deleted
    /// (`deleteAfterRun`) or disabled.
    Ran {
        /// The job.
        id: String,
        /// The run.
        run: RunRecord,
        /// When the run was due; `None` for a run asked for by hand, which leaves the
        /// schedule of a recurring job as it was.
        due_ms: Option<i64>,
        /// Now, in ms since the epoch.
        now_ms: i64,
    },
}

impl Change {
    /// The job the change is about.
    pub fn id(&self) -> &str {
        match self {
            Change::Add(job) => &job.id,
            Change::Remove { id } | Change::SetEnabled { id, .. } | Change::Ran { id, .. } => id,
        }
    }

    /// Applies the change; `tz` is the default timezone of cron schedules.
    pub fn apply(&self, jobs: &mut impl JobSet, tz: Tz) -> Applied {
        match self {
            Change::Add(job) => {
                if jobs.job_mut(&job.id).is_some() {
                    return Applied::IdTaken;
                }
                jobs.insert(CronJob::clone(job));
                Applied::Changed(CronJob::clone(job))
            }
            Change::Remove { id } => jobs.remove(id).map_or(Applied::NotFound, Applied::Removed),
            Change::SetEnabled { id, enabled, now_ms } => {
                let Some(job) = jobs.job_mut(id) else { return Applied::NotFound };
                job.enabled = *enabled;
                job.updated_at_ms = *now_ms;
                job.state.next_run_at_ms = if *enabled { first_run(&job.schedule, *now_ms, tz) } else { None };
                Applied::Changed(job.clone())
            }
            Change::Ran { id, run, due_ms, now_ms } => {
                let Some(job) = jobs.job_mut(id) else { return Applied::NotFound };
                job.record(run.clone());
                job.updated_at_ms = *now_ms;
                if job.schedule.kind == ScheduleKind::At {
                    if job.delete_after_run {
                        return jobs.remove(id).map_or(Applied::NotFound, Applied::Removed);
                    }
                    job.enabled = false;
                    job.state.next_run_at_ms = None;
                } else if !job.enabled {
                    job.state.next_run_at_ms = None;
                } else {
                    job.state.next_run_at_ms = match due_ms {
                        Some(due) => run_after(&job.schedule, *due, *now_ms, tz),
                        None => job
                            .state
                            .next_run_at_ms
                            .filter(|next| *next > *now_ms)
                            .or_else(|| first_run(&job.schedule, *now_ms, tz)),
                    };
                }
                Applied::Changed(job.clone())
            }
        }
    }
}

/// What applying a change did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The job as it is now.
    Changed(CronJob),
    /// The job as it was before it was removed.
    Removed(CronJob),
    /// No job has that id.
    NotFound,
    /// A job with that id exists already.
    IdTaken,
}

/// Jobs by id: the file's ordered list, or the scheduler's map.
pub trait JobSet {
    /// The job called `id`.
    fn job_mut(&mut self, id: &str) -> Option<&mut CronJob>;
    /// Adds a job (the caller checked its id is free).
    fn insert(&mut self, job: CronJob);
    /// Removes the job called `id`.
    fn remove(&mut self, id: &str) -> Option<CronJob>;
}

impl JobSet for Vec<CronJob> {
    fn job_mut(&mut self, id: &str) -> Option<&mut CronJob> {
        self.iter_mut().find(|job| job.id == id)
    }

    fn insert(&mut self, job: CronJob) {
        self.push(job);
    }

    fn remove(&mut self, id: &str) -> Option<CronJob> {
        let index = self.iter().position(|job| job.id == id)?;
        Some(Vec::remove(self, index))
    }
}

impl JobSet for HashMap<String, CronJob> {
    fn job_mut(&mut self, id: &str) -> Option<&mut CronJob> {
        self.get_mut(id)
    }

    fn insert(&mut self, job: CronJob) {
        HashMap::insert(self, job.id.clone(), job);
    }

    fn remove(&mut self, id: &str) -> Option<CronJob> {
        HashMap::remove(self, id)
    }
}

/// Readies a job when a scheduler starts: a missing next run is computed, and a run missed
/// while no scheduler was running is kept (policy `once`: it runs at once, one time however
/// many were missed) or dropped (`skip`: a recurring job's next run is computed from now; a
/// one-shot job is disabled with a `skipped` run in its history). Returns whether the job
/// changed.
pub fn prepare_at_start(job: &mut CronJob, now_ms: i64, tz: Tz) -> bool {
    if !job.enabled || !job.runs_turn() {
        return false;
    }
    let filled = fill_next_run(job, now_ms, tz);
    let Some(next) = job.state.next_run_at_ms else { return filled };
    if next > now_ms || job.missed_policy() == MissedPolicy::Once {
        return filled;
    }
    if job.schedule.kind == ScheduleKind::At {
        let why = format!("missed: no scheduler was running at {}", format_ms(next, tz));
        let mut run = RunRecord::new(now_ms, 0, Err(why));
        run.status = RunStatus::Skipped;
        job.record(run);
        job.enabled = false;
        job.state.next_run_at_ms = None;
    } else {
        job.state.next_run_at_ms = first_run(&job.schedule, now_ms, tz);
    }
    job.updated_at_ms = now_ms;
    true
}

/// Gives an enabled job without a next run one (a job written by hand or by another
/// program): a one-shot job that never ran is due at its time, a recurring one at its first
/// run after now. Returns whether the job changed.
pub fn fill_next_run(job: &mut CronJob, now_ms: i64, tz: Tz) -> bool {
    if !job.enabled || !job.runs_turn() || job.state.next_run_at_ms.is_some() {
        return false;
    }
    job.state.next_run_at_ms = match job.schedule.kind {
        ScheduleKind::At if job.state.last_run_at_ms.is_none() => job.schedule.at_ms,
        ScheduleKind::At => None,
        _ => first_run(&job.schedule, now_ms, tz),
    };
    job.state.next_run_at_ms.is_some()
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::cron::job::{JobState, Payload, Schedule};

    const UTC: Tz = chrono_tz::UTC;
    const MINUTE: i64 = 60_000;

    fn job(id: &str, schedule: Schedule, next: Option<i64>) -> CronJob {
        CronJob {
            id: id.into(),
            name: id.into(),
            enabled: true,
            schedule,
            payload: Payload::default(),
            state: JobState { next_run_at_ms: next, ..JobState::default() },
            created_at_ms: 0,
            updated_at_ms: 0,
            delete_after_run: false,
            missed: None,
            extra: Map::new(),
        }
    }

    #[test]
    fn a_recurring_run_missed_while_down_is_skipped_by_default() {
        let now = 100 * MINUTE;
        let mut every = job("a", Schedule::every(10 * MINUTE), Some(40 * MINUTE));
        assert!(prepare_at_start(&mut every, now, UTC));
        assert_eq!(every.state.next_run_at_ms, Some(110 * MINUTE), "computed from now, nothing fires");
        assert!(every.state.run_history.is_empty());
    }

    #[test]
    fn a_recurring_run_missed_while_down_fires_once_when_asked() {
        let now = 100 * MINUTE;
        let mut every = job("a", Schedule::every(10 * MINUTE), Some(40 * MINUTE));
        every.missed = Some(MissedPolicy::Once);
        assert!(!prepare_at_start(&mut every, now, UTC));
        assert_eq!(every.state.next_run_at_ms, Some(40 * MINUTE), "due, so it fires at start");
        let ran =
            Change::Ran { id: "a".into(), run: RunRecord::new(now, 5, Ok(())), due_ms: Some(40 * MINUTE), now_ms: now };
        let mut jobs = vec![every];
        ran.apply(&mut jobs, UTC);
        assert_eq!(jobs[0].state.next_run_at_ms, Some(110 * MINUTE), "once, not six times");
    }

    #[test]
    fn a_one_shot_job_missed_while_down_fires_once_by_default_or_is_skipped_when_asked() {
        let now = 100 * MINUTE;
        let mut once = job("a", Schedule::at(40 * MINUTE), Some(40 * MINUTE));
        assert!(!prepare_at_start(&mut once, now, UTC));
        assert_eq!(once.due_at(), Some(40 * MINUTE));
        let mut skipped = job("b", Schedule::at(40 * MINUTE), Some(40 * MINUTE));
        skipped.missed = Some(MissedPolicy::Skip);
        assert!(prepare_at_start(&mut skipped, now, UTC));
        assert!(!skipped.enabled);
        assert_eq!(skipped.state.last_status, Some(RunStatus::Skipped));
        assert!(skipped.state.last_error.as_deref().unwrap_or_default().contains("missed"));
    }

    #[test]
    fn a_job_without_a_next_run_gets_one_at_start() {
        let now = 100 * MINUTE;
        let mut never_ran = job("a", Schedule::at(40 * MINUTE), None);
        prepare_at_start(&mut never_ran, now, UTC);
        assert_eq!(never_ran.due_at(), Some(40 * MINUTE), "a one-shot job that never ran is due");
        let mut hand_made = job("b", Schedule::cron("0 * * * *", None), None);
        assert!(prepare_at_start(&mut hand_made, now, UTC));
        assert_eq!(hand_made.state.next_run_at_ms, Some(120 * MINUTE));
        let mut future = job("c", Schedule::every(MINUTE), Some(now + 1));
        assert!(!prepare_at_start(&mut future, now, UTC));
    }

    #[test]
    fn a_one_shot_job_is_deleted_or_disabled_after_its_run() {
        let now = 100 * MINUTE;
        let mut deleted = job("a", Schedule::at(now), Some(now));
        deleted.delete_after_run = true;
        let kept = job("b", Schedule::at(now), Some(now));
        let mut jobs = vec![deleted, kept];
        for id in ["a", "b"] {
            let ran =
                Change::Ran { id: id.into(), run: RunRecord::new(now, 1, Ok(())), due_ms: Some(now), now_ms: now };
            ran.apply(&mut jobs, UTC);
        }
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].enabled, jobs[0].state.next_run_at_ms, jobs[0].state.run_history.len()), (false, None, 1));
    }

    #[test]
    fn a_run_by_hand_leaves_a_recurring_schedule_alone() {
        let now = 100 * MINUTE;
        let mut jobs = vec![job("a", Schedule::every(10 * MINUTE), Some(105 * MINUTE))];
        let ran = Change::Ran {
            id: "a".into(),
            run: RunRecord::new(now, 1, Err("not run".into())),
            due_ms: None,
            now_ms: now,
        };
        assert!(matches!(ran.apply(&mut jobs, UTC), Applied::Changed(_)));
        assert_eq!(jobs[0].state.next_run_at_ms, Some(105 * MINUTE));
        assert_eq!(jobs[0].state.last_error.as_deref(), Some("not run"));
    }

    #[test]
    fn edits_apply_alike_to_the_file_list_and_the_scheduler_map() {
        let now = 100 * MINUTE;
        let changes = [
            Change::Add(Box::new(job("a", Schedule::every(MINUTE), Some(now + MINUTE)))),
            Change::Add(Box::new(job("b", Schedule::every(MINUTE), Some(now + MINUTE)))),
            Change::SetEnabled { id: "a".into(), enabled: false, now_ms: now },
            Change::Remove { id: "b".into() },
            Change::SetEnabled { id: "a".into(), enabled: true, now_ms: now + 5 },
        ];
        let mut list: Vec<CronJob> = Vec::new();
        let mut map: HashMap<String, CronJob> = HashMap::new();
        for change in &changes {
            assert_eq!(change.apply(&mut list, UTC), change.apply(&mut map, UTC));
        }
        assert_eq!(list, map.into_values().collect::<Vec<_>>());
        assert_eq!(list[0].state.next_run_at_ms, Some(now + 5 + MINUTE));
        assert_eq!(Change::Add(Box::new(list[0].clone())).apply(&mut list, UTC), Applied::IdTaken);
        assert_eq!(Change::Remove { id: "zz".into() }.apply(&mut list, UTC), Applied::NotFound);
    }
}

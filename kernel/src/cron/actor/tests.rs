//! Tests of the scheduler: firing order and punctuality on tokio's paused clock, outcomes
//! recorded, missed runs at start, and edits from another process noticed through inotify.

use std::future::Future;
use std::time::Duration;

use chrono::TimeZone as _;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::*;
use crate::cron::handle::{CronHandle, NewJob};
use crate::cron::job::{JobTarget, MissedPolicy, RunStatus, Schedule};
use crate::testing::TempDir;

const UTC: Tz = chrono_tz::UTC;

fn in_system<F: Future>(test: F) -> F::Output {
    actix::System::new().block_on(test)
}

/// 2026-11-24 12:00 UTC, in ms.
fn noon() -> i64 {
    chrono::Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap().timestamp_millis()
}

/// A clock (in µs) that starts at `base_ms` and follows tokio's (paused) time.
fn paused_clock(base_ms: i64) -> Clock {
    let start = tokio::time::Instant::now();
    Arc::new(move || base_ms * 1000 + i64::try_from(start.elapsed().as_micros()).unwrap())
}

fn wall_clock() -> Clock {
    Arc::new(|| chrono::Utc::now().timestamp_micros())
}

/// The clock's time in ms.
fn ms(clock: &Clock) -> i64 {
    clock() / 1000
}

fn job(name: &str, schedule: Schedule, now: i64) -> CronJob {
    let mut job = NewJob {
        name: Some(name.into()),
        message: format!("do {name}"),
        schedule,
        target: JobTarget::session("telegram:42"),
        delete_after_run: false,
        missed: None,
    }
    .into_job(now, UTC)
    .unwrap();
    job.id = name.into();
    job
}

async fn next_fire(fires: &mut UnboundedReceiver<CronFire>) -> CronFire {
    tokio::time::timeout(Duration::from_secs(10), fires.recv()).await.expect("a job fires").expect("channel open")
}

/// The workspace's jobs file as the scheduler's store.
fn file_store(workspace: &std::path::Path) -> Arc<dyn JobStorage> {
    Arc::new(JobStore::new(workspace))
}

fn stored(dir: &TempDir) -> Vec<CronJob> {
    JobStore::new(dir.path()).load().unwrap().jobs
}

/// The stored jobs once `recorded` holds for them. An answer reaches the actor through a
/// future of its own, so its run is recorded a few polls after it was sent: flush until then
/// (a bounded number of rounds, no clock involved).
async fn flushed_until(actor: &Addr<CronActor>, dir: &TempDir, recorded: impl Fn(&[CronJob]) -> bool) -> Vec<CronJob> {
    for _ in 0..1_000 {
        tokio::task::yield_now().await;
        actor.send(Flush).await.unwrap();
        let jobs = stored(dir);
        if recorded(&jobs) {
            return jobs;
        }
    }
    stored(dir)
}

#[test]
fn jobs_fire_in_order_of_their_next_run_exactly_when_due_and_runs_are_recorded() {
    in_system(async {
        tokio::time::pause();
        let dir = TempDir::new("cron-actor");
        let clock = paused_clock(noon());
        let (fire, mut fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, clock.clone());
        let now = ms(&clock);
        for (name, schedule) in [
            ("third", Schedule::at(now + 3_000)),
            ("first", Schedule::at(now + 1_000)),
            ("tick", Schedule::every(2_500)),
            ("second", Schedule::at(now + 2_000)),
        ] {
            actor.send(AddJob(job(name, schedule, now))).await.unwrap();
        }
        let mut seen = Vec::new();
        for _ in 0..5 {
            let fired = next_fire(&mut fires).await;
            let due = fired.due_ms.unwrap();
            seen.push((fired.job.name.clone(), due - now));
            // The timer wheel counts whole milliseconds from a start that is not on one.
            assert!(
                (0..=1).contains(&(ms(&clock) - due)),
                "{} fired {} ms after it was due",
                fired.job.name,
                ms(&clock) - due
            );
            fired.done.send(Ok(())).unwrap();
        }
        let order: Vec<(&str, i64)> = seen.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        assert_eq!(order, [("first", 1_000), ("second", 2_000), ("tick", 2_500), ("third", 3_000), ("tick", 5_000)]);
        let jobs = flushed_until(&actor, &dir, |jobs| {
            jobs.iter().any(|job| job.id == "tick" && job.state.run_history.len() == 2)
        })
        .await;
        for job in jobs {
            let runs = job.state.run_history.len();
            if job.id == "tick" {
                assert_eq!((runs, job.state.next_run_at_ms), (2, Some(now + 7_500)));
            } else {
                assert_eq!((runs, job.enabled, job.state.next_run_at_ms), (1, false, None), "{}", job.id);
                assert_eq!(job.state.last_status, Some(RunStatus::Ok));
            }
        }
    });
}

#[test]
fn a_scheduler_over_a_store_without_a_file_fires_its_jobs_and_keeps_their_runs_there() {
    in_system(async {
        tokio::time::pause();
        let clock = paused_clock(noon());
        let now = ms(&clock);
        let bucket = Arc::new(crate::cron::storage::bucket::Bucket::default());
        bucket.add(job("reminder", Schedule::at(now + 1_000), now), UTC).unwrap();
        // Another writer gets in before the scheduler's first two writes: they are merged.
        bucket.interleaved.store(2, std::sync::atomic::Ordering::SeqCst);
        let (fire, mut fires) = unbounded_channel();
        let store: Arc<dyn JobStorage> = bucket.clone();
        let actor = CronActor::start_with_clock(store, UTC, fire, clock.clone());
        let fired = next_fire(&mut fires).await;
        assert_eq!(fired.job.id, "reminder");
        fired.done.send(Ok(())).unwrap();
        for _ in 0..1_000 {
            tokio::task::yield_now().await;
            actor.send(Flush).await.unwrap();
            let jobs = bucket.load().unwrap().jobs;
            if jobs.iter().any(|job| job.id == "reminder" && job.state.run_history.len() == 1) {
                assert!(jobs.iter().any(|job| job.id.starts_with("other-")), "the other writer's job is kept");
                return;
            }
        }
        panic!("the run never reached the store: {:?}", bucket.load().unwrap().jobs);
    });
}

#[test]
fn a_dropped_answer_is_recorded_as_not_run_and_a_failure_with_its_error() {
    in_system(async {
        tokio::time::pause();
        let dir = TempDir::new("cron-actor");
        let clock = paused_clock(noon());
        let (fire, mut fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, clock.clone());
        actor.send(AddJob(job("a", Schedule::every(1_000), ms(&clock)))).await.unwrap();
        drop(next_fire(&mut fires).await);
        next_fire(&mut fires).await.done.send(Err("the model is down".into())).unwrap();
        let _third = next_fire(&mut fires).await; // under way: the first two are recorded
        let jobs = flushed_until(&actor, &dir, |jobs| jobs[0].state.run_history.len() == 2).await;
        let history = &jobs[0].state.run_history;
        let errors: Vec<_> = history.iter().map(|run| (run.status.clone(), run.error.clone())).collect();
        assert_eq!(
            errors,
            [(RunStatus::Error, Some("not run".into())), (RunStatus::Error, Some("the model is down".into()))]
        );
    });
}

#[test]
fn a_job_run_by_hand_fires_at_once_and_keeps_its_schedule() {
    in_system(async {
        tokio::time::pause();
        let dir = TempDir::new("cron-actor");
        let clock = paused_clock(noon());
        let (fire, mut fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, clock.clone());
        let now = ms(&clock);
        actor.send(AddJob(job("daily", Schedule::every(86_400_000), now))).await.unwrap();
        actor.send(RunJob("daily".into())).await.unwrap().unwrap();
        let fired = next_fire(&mut fires).await;
        assert_eq!((fired.due_ms, ms(&clock)), (None, now));
        assert!(matches!(actor.send(RunJob("daily".into())).await.unwrap(), Err(CronError::Running(_))));
        fired.done.send(Ok(())).unwrap();
        let jobs = flushed_until(&actor, &dir, |jobs| jobs[0].state.run_history.len() == 1).await;
        let job = &jobs[0];
        assert_eq!((job.state.run_history.len(), job.state.next_run_at_ms), (1, Some(now + 86_400_000)));
        assert!(matches!(actor.send(RunJob("nope".into())).await.unwrap(), Err(CronError::NotFound(_))));
    });
}

#[test]
fn a_disabled_or_removed_job_does_not_fire() {
    in_system(async {
        tokio::time::pause();
        let dir = TempDir::new("cron-actor");
        let clock = paused_clock(noon());
        let (fire, mut fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, clock.clone());
        let now = ms(&clock);
        for name in ["off", "gone", "on"] {
            actor.send(AddJob(job(name, Schedule::every(1_000 + name.len() as i64), now))).await.unwrap();
        }
        actor.send(EnableJob { id: "off".into(), enabled: false }).await.unwrap().unwrap();
        actor.send(RemoveJob("gone".into())).await.unwrap().unwrap();
        for _ in 0..3 {
            let fired = next_fire(&mut fires).await;
            assert_eq!(fired.job.id, "on");
            fired.done.send(Ok(())).unwrap();
        }
        let listed: Vec<String> = actor.send(ListJobs).await.unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(listed, ["on", "off"], "soonest first, disabled last");
    });
}

#[test]
fn at_start_a_missed_run_fires_once_when_asked_and_is_skipped_otherwise() {
    in_system(async {
        let dir = TempDir::new("cron-actor");
        let now = chrono::Utc::now().timestamp_millis();
        let hour_ago = now - 3_600_000;
        let mut once = job("once", Schedule::every(600_000), hour_ago - 1);
        once.missed = Some(MissedPolicy::Once);
        let skip = job("skip", Schedule::every(600_000), hour_ago - 1);
        let reminder = job("reminder", Schedule::at(hour_ago), hour_ago - 1);
        let store = JobStore::new(dir.path());
        let jobs = vec![once, skip, reminder];
        store
            .edit(&mut |file| {
                file.jobs = jobs.clone();
                true
            })
            .unwrap();
        let (fire, mut fires) = unbounded_channel();
        let _actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, wall_clock());
        let mut fired: Vec<String> = Vec::new();
        for _ in 0..2 {
            let run = next_fire(&mut fires).await;
            fired.push(run.job.id.clone());
            run.done.send(Ok(())).unwrap();
        }
        fired.sort();
        assert_eq!(fired, ["once", "reminder"]);
        let skipped = store.load().unwrap().jobs.into_iter().find(|j| j.id == "skip").unwrap();
        assert!(skipped.state.next_run_at_ms.unwrap() > now, "the skipped job's next run counts from now");
        assert!(skipped.state.run_history.is_empty());
    });
}

#[test]
fn an_edit_by_another_process_is_noticed_without_a_restart_and_merged_with_the_schedulers_own() {
    in_system(async {
        let dir = TempDir::new("cron-actor");
        let (fire, mut fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, wall_clock());
        let now = chrono::Utc::now().timestamp_millis();
        actor.send(AddJob(job("mine", Schedule::every(3_600_000), now))).await.unwrap();
        actor.send(Flush).await.unwrap();
        // Another process (the CLI) adds a job due in 300 ms, through the file and its lock.
        let store = JobStore::new(dir.path());
        store.apply(&Change::Add(Box::new(job("theirs", Schedule::at(now + 300), now))), UTC).unwrap();
        let fired = next_fire(&mut fires).await;
        assert_eq!(fired.job.id, "theirs");
        fired.done.send(Ok(())).unwrap();
        actor.send(RemoveJob("mine".into())).await.unwrap().unwrap();
        let jobs = flushed_until(&actor, &dir, |jobs| jobs.iter().all(|j| !j.state.run_history.is_empty())).await;
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].id.as_str(), jobs[0].state.run_history.len()), ("theirs", 1));
    });
}

#[test]
fn a_corrupt_file_written_while_running_is_kept_aside_and_the_jobs_go_on() {
    in_system(async {
        let dir = TempDir::new("cron-actor");
        let (fire, _fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, wall_clock());
        let now = chrono::Utc::now().timestamp_millis();
        actor.send(AddJob(job("mine", Schedule::every(3_600_000), now))).await.unwrap();
        actor.send(Flush).await.unwrap();
        std::fs::write(dir.path().join("cron/jobs.json"), "{ half a file").unwrap();
        let store = JobStore::new(dir.path());
        for _ in 0..200 {
            if !store.corrupt_copies().is_empty() && store.path().exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let copies = store.corrupt_copies();
        assert_eq!(copies.len(), 1);
        assert_eq!(std::fs::read_to_string(&copies[0]).unwrap(), "{ half a file");
        actor.send(Flush).await.unwrap();
        assert_eq!(store.load().unwrap().jobs.len(), 1, "the last good jobs were written back");
        assert_eq!(actor.send(ListJobs).await.unwrap().len(), 1);
    });
}

#[test]
fn through_the_handle_an_added_paused_or_removed_job_is_in_the_file_when_the_answer_comes() {
    in_system(async {
        let dir = TempDir::new("cron-actor");
        let (fire, _fires) = unbounded_channel();
        let actor = CronActor::start_with_clock(file_store(dir.path()), UTC, fire, wall_clock());
        let handle = CronHandle::new(dir.path(), UTC).with_actor(actor);
        let new = |name: &str| NewJob {
            name: Some(name.into()),
            message: format!("do {name}"),
            schedule: Schedule::every(3_600_000),
            target: JobTarget::session("telegram:42"),
            delete_after_run: false,
            missed: None,
        };
        let mut ids = Vec::new();
        for name in ["kept", "paused", "gone"] {
            let job = handle.add(new(name)).await.unwrap();
            assert!(stored(&dir).iter().any(|j| j.id == job.id), "{name} is on disk before the answer");
            ids.push(job.id);
        }
        handle.set_enabled(&ids[1], false).await.unwrap();
        assert!(stored(&dir).iter().any(|j| j.id == ids[1] && !j.enabled), "the pause is on disk");
        handle.remove(&ids[2]).await.unwrap();
        assert!(stored(&dir).iter().all(|j| j.id != ids[2]), "the removal is on disk");
        assert!(matches!(handle.remove(&ids[2]).await, Err(CronError::NotFound(_))));
    });
}

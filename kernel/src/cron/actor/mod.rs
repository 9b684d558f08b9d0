//! `CronActor`: the scheduler. It keeps every job in memory with a min-heap of next runs and
//! one timer, armed for the earliest; when a job is due it hands a [`CronFire`] to whoever
//! runs turns (the gateway) and records the outcome when that answers. Edits go to its store
//! thread ([`super::worker`]), edits by other processes come back from it, noticed through
//! inotify ([`super::watch`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use actix::prelude::*;
use chrono_tz::Tz;
use tokio::sync::{mpsc::UnboundedSender, oneshot};

use super::change::{Applied, Change, prepare_at_start};
use super::job::{CronJob, JobsFile, RunRecord};
use super::storage::{JobStorage, Version};
use super::store::{JobStore, StoreError};
use super::worker::{Clock, Command, Report, Worker};
use super::{CronError, new_id};
use crate::watch::DirWatch;

/// The longest the timer sleeps before looking again: a wall-clock jump (a suspended laptop,
/// a corrected clock) is noticed within this time.
const MAX_SLEEP: Duration = Duration::from_secs(600);
/// How often the file is looked at when inotify is not available.
const POLL_WITHOUT_INOTIFY: Duration = Duration::from_secs(5);

/// A job that is due: run a turn with `job.payload.message` in the job's session
/// (`job.payload.target()`), then answer `done` with `Ok(())` or the error. Dropping `done`
/// records the run as failed ("not run").
#[derive(Debug)]
pub struct CronFire {
    /// The job as it was when it fired.
    pub job: CronJob,
    /// When it was due (ms since the epoch); `None` for a run asked for by hand.
    pub due_ms: Option<i64>,
    /// Answer when the turn is over.
    pub done: oneshot::Sender<Result<(), String>>,
}

/// The scheduler.
pub struct CronActor {
    /// Default timezone of cron schedules and naive times.
    tz: Tz,
    /// Where due jobs go.
    fire: UnboundedSender<CronFire>,
    /// Now, in µs since the epoch (the wall clock; tokio's paused clock in tests).
    clock: Clock,
    /// Every job, by id.
    jobs: HashMap<String, CronJob>,
    /// Next runs, earliest first; an entry whose job no longer runs then is skipped.
    heap: BinaryHeap<Reverse<(i64, String)>>,
    /// Jobs whose turn is running (not fired again until it ends).
    running: HashSet<String>,
    /// The one timer, and the time it is armed for.
    timer: Option<(SpawnHandle, i64)>,
    /// The store thread's queue; `None` once stopped.
    worker: Option<Sender<Command>>,
    /// The state the store thread starts from (taken in `started`).
    initial: Option<Worker>,
    /// Where the jobs are kept (watched for changes from elsewhere).
    store: Arc<dyn JobStorage>,
    /// Number of the last change sent to the store thread.
    seq: u64,
    /// Changes sent but not yet confirmed by the store thread, re-applied when it reports a
    /// file changed elsewhere.
    unconfirmed: VecDeque<(u64, Change)>,
    /// The last change known to be in the file.
    saved_through: u64,
    /// [`Saved`] answers waiting until the change numbered with them is in the file (`true`)
    /// or a write of it failed (`false`).
    saving: Vec<(u64, oneshot::Sender<bool>)>,
}

impl CronActor {
    /// Loads `<workspace>/cron/jobs.json` (readying each job: missed runs per policy, next
    /// runs where missing, and writing the result), then starts the scheduler in the
    /// current actix system. Due jobs are sent to `fire`; `timezone` is the configured one
    /// (`agents.defaults.timezone`, UTC when unset). A file that does not parse is moved aside
    /// and reported, and the scheduler starts without its jobs.
    pub fn start(workspace: &Path, timezone: Tz, fire: UnboundedSender<CronFire>) -> Addr<CronActor> {
        let store: Arc<dyn JobStorage> = Arc::new(JobStore::new(workspace));
        CronActor::start_with_clock(store, timezone, fire, Arc::new(|| chrono::Utc::now().timestamp_micros()))
    }

    /// Like [`CronActor::start`] over any job store, with a clock of its own, in µs since the
    /// epoch (tests use tokio's paused clock).
    pub fn start_with_clock(
        store: Arc<dyn JobStorage>,
        timezone: Tz,
        fire: UnboundedSender<CronFire>,
        clock: Clock,
    ) -> Addr<CronActor> {
        let (cache, stamp) = initial_load(store.as_ref(), timezone, clock() / 1000);
        let jobs: HashMap<String, CronJob> = cache.jobs.iter().map(|job| (job.id.clone(), job.clone())).collect();
        let worker = Worker {
            store: store.clone(),
            tz: timezone,
            clock: clock.clone(),
            cache,
            stamp,
            pending: Vec::new(),
            applied: 0,
            report: Box::new(|_| {}),
        };
        let mut actor = CronActor {
            tz: timezone,
            fire,
            clock,
            jobs,
            heap: BinaryHeap::new(),
            running: HashSet::new(),
            timer: None,
            worker: None,
            initial: Some(worker),
            store,
            seq: 0,
            unconfirmed: VecDeque::new(),
            saved_through: 0,
            saving: Vec::new(),
        };
        actor.rebuild_heap();
        actor.start()
    }

    /// Now, in ms since the epoch.
    fn now(&self) -> i64 {
        (self.clock)() / 1000
    }

    fn rebuild_heap(&mut self) {
        self.heap = self.jobs.values().filter_map(|job| job.due_at().map(|at| Reverse((at, job.id.clone())))).collect();
    }

    /// Sends `change` to the store thread (after applying it in memory) and re-arms.
    fn commit(&mut self, change: Change, ctx: &mut Context<Self>) -> Applied {
        let applied = change.apply(&mut self.jobs, self.tz);
        if matches!(applied, Applied::Changed(_) | Applied::Removed(_)) {
            self.seq += 1;
            self.unconfirmed.push_back((self.seq, change.clone()));
            if let Some(worker) = &self.worker {
                let _ = worker.send(Command::Apply { seq: self.seq, change: change.clone() });
            }
            self.schedule(change.id());
            self.arm(ctx);
        }
        applied
    }

    /// Puts a job's next run on the heap (stale entries are skipped when popped; the heap is
    /// rebuilt when they pile up).
    fn schedule(&mut self, id: &str) {
        if let Some(at) = self.jobs.get(id).and_then(CronJob::due_at) {
            self.heap.push(Reverse((at, id.to_owned())));
        }
        if self.heap.len() > 2 * self.jobs.len() + 1024 {
            self.rebuild_heap();
        }
    }

    /// Whether a heap entry is still a run to make.
    fn live(&self, at: i64, id: &str) -> bool {
        !self.running.contains(id) && self.jobs.get(id).and_then(CronJob::due_at) == Some(at)
    }

    /// Arms the one timer for the earliest live entry (or leaves it when it is right).
    fn arm(&mut self, ctx: &mut Context<Self>) {
        while let Some(Reverse((at, id))) = self.heap.peek() {
            if self.live(*at, id) {
                break;
            }
            self.heap.pop();
        }
        let Some(Reverse((at, _))) = self.heap.peek() else {
            if let Some((handle, _)) = self.timer.take() {
                ctx.cancel_future(handle);
            }
            return;
        };
        let at = *at;
        if let Some((handle, armed)) = self.timer {
            if armed == at {
                return;
            }
            ctx.cancel_future(handle);
        }
        // Counted in µs, so the timer (whole ms, rounded up) wakes less than 1 ms late.
        let wait = Duration::from_micros(u64::try_from(at * 1000 - (self.clock)()).unwrap_or(0)).min(MAX_SLEEP);
        let handle = ctx.run_later(wait, |actor, ctx| {
            actor.timer = None;
            actor.fire_due(ctx);
        });
        self.timer = Some((handle, at));
    }

    /// Fires every job due by now, then re-arms.
    fn fire_due(&mut self, ctx: &mut Context<Self>) {
        let now = self.now();
        while let Some(Reverse((at, _))) = self.heap.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, id))) = self.heap.pop() else { break };
            if self.live(at, &id) {
                self.fire(&id, Some(at), ctx);
            }
        }
        self.arm(ctx);
    }

    /// Hands a job to the consumer and records the run when it answers.
    fn fire(&mut self, id: &str, due_ms: Option<i64>, ctx: &mut Context<Self>) {
        let Some(job) = self.jobs.get(id).cloned() else { return };
        self.running.insert(id.to_owned());
        let (done, outcome) = oneshot::channel();
        let started = self.now();
        tracing::info!(job = %job.id, name = %job.name, "cron job due");
        // A consumer that is gone drops `done` with the message: recorded as not run.
        let _ = self.fire.send(CronFire { job, due_ms, done });
        let id = id.to_owned();
        ctx.spawn(outcome.into_actor(self).map(move |outcome, actor, ctx| {
            let outcome = outcome.unwrap_or_else(|_| Err("not run".to_owned()));
            if let Err(error) = &outcome {
                tracing::warn!(job = %id, %error, "cron job failed");
            }
            actor.running.remove(&id);
            let now = actor.now();
            let run = RunRecord::new(started, now - started, outcome);
            // Re-arms too, unless the job was removed while it ran.
            actor.commit(Change::Ran { id, run, due_ms, now_ms: now }, ctx);
        }));
    }

    /// The store thread's report.
    fn reported(&mut self, report: Report, ctx: &mut Context<Self>) {
        match report {
            Report::Applied { through, saved } => {
                self.confirm(through);
                if saved {
                    self.saved_through = self.saved_through.max(through);
                }
                let (done, waiting) =
                    std::mem::take(&mut self.saving).into_iter().partition(|(seq, _)| *seq <= through);
                self.saving = waiting;
                for (_, answer) in done {
                    let _ = answer.send(saved);
                }
            }
            Report::Loaded { through, jobs } => {
                self.confirm(through);
                self.jobs = jobs.into_iter().map(|job| (job.id.clone(), job)).collect();
                for (_, change) in &self.unconfirmed {
                    change.apply(&mut self.jobs, self.tz);
                }
                tracing::info!(jobs = self.jobs.len(), "cron jobs file changed; reloaded");
                self.rebuild_heap();
                if let Some((handle, _)) = self.timer.take() {
                    ctx.cancel_future(handle);
                }
                self.arm(ctx);
            }
        }
    }

    fn confirm(&mut self, through: u64) {
        while self.unconfirmed.front().is_some_and(|(seq, _)| *seq <= through) {
            self.unconfirmed.pop_front();
        }
    }

    /// Starts inotify on the store's file (or, failing that or without a file, a slow poll).
    fn watch(&mut self, ctx: &mut Context<Self>) {
        let Some((dir, file_name)) = self.store.watched_file() else { return self.poll(ctx) };
        let watch = std::fs::create_dir_all(&dir).and_then(|()| DirWatch::new(&dir, file_name));
        let Some(worker) = self.worker.clone() else { return };
        match watch {
            Ok(watch) => {
                ctx.spawn(
                    async move {
                        loop {
                            match watch.changed().await {
                                Ok(true) => {
                                    if worker.send(Command::Check).is_err() {
                                        return false;
                                    }
                                }
                                Ok(false) => return true,
                                Err(error) => {
                                    tracing::warn!(%error, "cannot watch the cron directory");
                                    return true;
                                }
                            }
                        }
                    }
                    .into_actor(self)
                    .map(|lost, actor, ctx| {
                        if lost {
                            tracing::warn!("the cron directory is no longer watched; looking every few seconds");
                            actor.poll(ctx);
                        }
                    }),
                );
            }
            Err(error) => {
                tracing::warn!(%error, "cannot watch the cron directory; looking every few seconds");
                self.poll(ctx);
            }
        }
    }

    fn poll(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(POLL_WITHOUT_INOTIFY, |actor, _| {
            if let Some(worker) = &actor.worker {
                let _ = worker.send(Command::Check);
            }
        });
    }
}

/// Reads the jobs and readies them for a scheduler starting now, storing them back when that
/// changed them. Problems are logged; the scheduler then starts without those jobs (and a
/// write that lost to another writer is left to the store thread, which reads again).
fn initial_load(store: &dyn JobStorage, tz: Tz, now: i64) -> (JobsFile, Option<Version>) {
    let (mut file, version) = match store.read() {
        Ok(Some((file, version))) => (file, Some(version)),
        Ok(None) => return (JobsFile::default(), None),
        Err(error @ StoreError::Corrupt { .. }) => {
            tracing::error!(%error, "starting the scheduler without the jobs of the unreadable file");
            return (JobsFile::default(), None);
        }
        Err(error) => {
            tracing::error!(%error, "starting the scheduler without jobs");
            return (JobsFile::default(), store.version());
        }
    };
    let mut changed = false;
    for job in &mut file.jobs {
        changed |= prepare_at_start(job, now, tz);
    }
    if !changed {
        return (file, version);
    }
    match store.replace(version.as_ref(), &file) {
        Ok(version) => (file, Some(version)),
        Err(error) => {
            tracing::error!(%error, "cannot store the readied cron jobs");
            (file, version)
        }
    }
}

impl Actor for CronActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (sender, commands) = std::sync::mpsc::channel();
        if let Some(mut worker) = self.initial.take() {
            let addr = ctx.address();
            worker.report = Box::new(move |report| addr.do_send(StoreReport(report)));
            let spawned = std::thread::Builder::new().name("cron-store".into()).spawn(move || worker.run(commands));
            match spawned {
                Ok(_) => self.worker = Some(sender),
                Err(error) => tracing::error!(%error, "cannot start the cron store thread; changes are not saved"),
            }
        }
        self.watch(ctx);
        tracing::info!(jobs = self.jobs.len(), "cron scheduler started");
        self.arm(ctx);
    }
}

/// Stops the scheduler: this kernel's lead of a cluster's scheduling ended, so no job fires
/// here any more (the kernel that leads next reads the jobs from their file).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Halt;

impl Handler<Halt> for CronActor {
    type Result = ();

    fn handle(&mut self, _: Halt, ctx: &mut Context<Self>) {
        tracing::info!("cron scheduler stopped");
        ctx.stop();
    }
}

/// A report of the store thread.
#[derive(Message)]
#[rtype(result = "()")]
struct StoreReport(Report);

impl Handler<StoreReport> for CronActor {
    type Result = ();

    fn handle(&mut self, report: StoreReport, ctx: &mut Context<Self>) {
        self.reported(report.0, ctx);
    }
}

/// Adds a job (a fresh id is picked if its id is taken); answers with the job as stored.
#[derive(Message)]
#[rtype(result = "CronJob")]
pub struct AddJob(pub CronJob);

impl Handler<AddJob> for CronActor {
    type Result = MessageResult<AddJob>;

    fn handle(&mut self, AddJob(mut job): AddJob, ctx: &mut Context<Self>) -> Self::Result {
        while self.jobs.contains_key(&job.id) {
            job.id = new_id();
        }
        self.commit(Change::Add(Box::new(job.clone())), ctx);
        MessageResult(job)
    }
}

/// Answers once every change made so far is in the jobs file (`true`), or when a write of it
/// failed and is being retried (`false`). A caller that tells someone a job is scheduled asks
/// this first, so no answer comes before a kill could lose the job.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Saved;

impl Handler<Saved> for CronActor {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, _: Saved, _: &mut Context<Self>) -> Self::Result {
        let (answer, saved) = oneshot::channel();
        if self.seq <= self.saved_through {
            let _ = answer.send(true);
        } else if self.worker.is_some() {
            self.saving.push((self.seq, answer));
        }
        // Without a store thread nothing is saved: the dropped sender answers `false`.
        Box::pin(async move { saved.await.unwrap_or(false) })
    }
}

/// Every job, soonest next run first (jobs that will not run last).
#[derive(Message)]
#[rtype(result = "Vec<CronJob>")]
pub struct ListJobs;

impl Handler<ListJobs> for CronActor {
    type Result = MessageResult<ListJobs>;

    fn handle(&mut self, _: ListJobs, _: &mut Context<Self>) -> Self::Result {
        MessageResult(super::sorted(self.jobs.values().cloned().collect()))
    }
}

/// Removes a job; answers with it.
#[derive(Message)]
#[rtype(result = "Result<CronJob, CronError>")]
pub struct RemoveJob(pub String);

impl Handler<RemoveJob> for CronActor {
    type Result = Result<CronJob, CronError>;

    fn handle(&mut self, RemoveJob(id): RemoveJob, ctx: &mut Context<Self>) -> Self::Result {
        match self.commit(Change::Remove { id: id.clone() }, ctx) {
            Applied::Removed(job) => Ok(job),
            _ => Err(CronError::NotFound(id)),
        }
    }
}

/// Enables or disables a job; answers with it.
#[derive(Message)]
#[rtype(result = "Result<CronJob, CronError>")]
pub struct EnableJob {
    /// The job.
    pub id: String,
    /// Whether it should run.
    pub enabled: bool,
}

impl Handler<EnableJob> for CronActor {
    type Result = Result<CronJob, CronError>;

    fn handle(&mut self, EnableJob { id, enabled }: EnableJob, ctx: &mut Context<Self>) -> Self::Result {
        let now = self.now();
        match self.commit(Change::SetEnabled { id: id.clone(), enabled, now_ms: now }, ctx) {
            Applied::Changed(job) => Ok(job),
            _ => Err(CronError::NotFound(id)),
        }
    }
}

/// Runs a job now (enabled or not), as if it were due; answers once it is handed over.
#[derive(Message)]
#[rtype(result = "Result<(), CronError>")]
pub struct RunJob(pub String);

impl Handler<RunJob> for CronActor {
    type Result = Result<(), CronError>;

    fn handle(&mut self, RunJob(id): RunJob, ctx: &mut Context<Self>) -> Self::Result {
        if !self.jobs.contains_key(&id) {
            return Err(CronError::NotFound(id));
        }
        if self.running.contains(&id) {
            return Err(CronError::Running(id));
        }
        self.fire(&id, None, ctx);
        Ok(())
    }
}

/// Answers once every change so far is written to the file.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Flush;

impl Handler<Flush> for CronActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) -> Self::Result {
        let (done, written) = oneshot::channel();
        if let Some(worker) = &self.worker {
            let _ = worker.send(Command::Flush(done));
        }
        Box::pin(async move {
            let _ = written.await;
        })
    }
}

#[cfg(test)]
mod tests;

//! Merging nanobot's scheduled jobs into `<workspace>/cron/jobs.json` by id.
//!
//! nanobot 0.3 keeps its jobs in that same file, so they need no copying; what it may still
//! hold elsewhere is brought in: the store of older nanobot (`<nanobot>/cron/jobs.json`) and
//! the changes a one-shot `nanobot agent` queues for its gateway (`cron/action.jsonl`, lines
//! `{"action": "add"|"update"|"del", "params": …}`). A job whose id is already in the file is
//! replaced only by a version changed later (`updatedAtMs`); nothing is ever deleted.

use std::fs;
use std::path::Path;

use serde_json::{Map, Value};

use super::{Action, Area, ImportOptions, Report, Source, count};
use crate::cron::job::{CronJob, JobsFile};
use crate::cron::storage::JobStorage as _;
use crate::cron::store::JobStore;

/// The queue of job changes nanobot keeps next to a `jobs.json`.
const QUEUE_FILE: &str = "action.jsonl";

/// nanobot's jobs that are not yet in the workspace's file, by id, in the order found.
#[derive(Debug, Default)]
struct Candidates {
    jobs: Vec<CronJob>,
    /// Ids whose deletion was queued.
    deleted: Vec<String>,
}

impl Candidates {
    fn upsert(&mut self, job: CronJob) {
        self.deleted.retain(|id| *id != job.id);
        match self.jobs.iter_mut().find(|known| known.id == job.id) {
            Some(known) => *known = job,
            None => self.jobs.push(job),
        }
    }

    fn delete(&mut self, id: &str) {
        self.jobs.retain(|job| job.id != id);
        self.deleted.push(id.to_owned());
    }
}

/// Brings nanobot's jobs into the workspace's jobs file.
pub fn import(source: &Source, options: &ImportOptions, report: &mut Report) {
    let store = JobStore::new(&source.workspace);
    // Read without the store's lock, which would create a lock file even in a dry run.
    let existing = match fs::read(store.path()) {
        Ok(bytes) => match serde_json::from_slice::<JobsFile>(&bytes) {
            Ok(file) => file,
            Err(error) => {
                let text = format!("{} does not parse ({error}); no jobs merged", store.path().display());
                return report.push(Area::Cron, Action::Fail, text);
            }
        },
        Err(_) => JobsFile::default(),
    };
    describe_shared_file(&store, &existing, report);
    let legacy_dir = source.dir.join("cron");
    let mut candidates = Candidates::default();
    read_store(&legacy_dir.join("jobs.json"), &mut candidates, report);
    for queue in [legacy_dir.join(QUEUE_FILE), store.dir().join(QUEUE_FILE)] {
        read_queue(&queue, &mut candidates, report);
    }
    if candidates.jobs.is_empty() && candidates.deleted.is_empty() {
        return;
    }
    let mut planned = existing;
    let outcomes = merge(&mut planned, &candidates);
    let changed = outcomes.iter().any(|(action, _)| action.changes());
    if changed && !options.dry_run {
        let merged = store.edit(&mut |file| merge(file, &candidates).iter().any(|(action, _)| action.changes()));
        if let Err(error) = merged {
            return report.push(Area::Cron, Action::Fail, error.to_string());
        }
    }
    for (action, detail) in outcomes {
        report.push(Area::Cron, action, detail);
    }
}

/// Notes the jobs nanobot 0.3 already keeps in the shared file.
fn describe_shared_file(store: &JobStore, file: &JobsFile, report: &mut Report) {
    if file.jobs.is_empty() {
        return;
    }
    let system: Vec<&str> = file.jobs.iter().filter(|job| !job.runs_turn()).map(|job| job.id.as_str()).collect();
    let mut text = format!(
        "{} ({}) is nanobot's and oxibot's jobs file alike: used as it is",
        store.path().display(),
        count(file.jobs.len(), "job", "jobs")
    );
    if !system.is_empty() {
        text.push_str(&format!("; nanobot's own system jobs ({}) are kept and not run by oxibot", system.join(", ")));
    }
    report.push(Area::Cron, Action::Note, text);
}

/// Adds the jobs of an older nanobot's store.
fn read_store(path: &Path, candidates: &mut Candidates, report: &mut Report) {
    let Ok(bytes) = fs::read(path) else { return };
    match serde_json::from_slice::<JobsFile>(&bytes) {
        Ok(file) => file.jobs.into_iter().for_each(|job| candidates.upsert(job)),
        Err(error) => report.push(Area::Cron, Action::Fail, format!("cannot read {}: {error}", path.display())),
    }
}

/// Replays the changes queued in an `action.jsonl`.
fn read_queue(path: &Path, candidates: &mut Candidates, report: &mut Report) {
    let Ok(text) = fs::read_to_string(path) else { return };
    for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        match queued_change(line) {
            Some(Queued::Upsert(job)) => candidates.upsert(*job),
            Some(Queued::Delete(id)) => candidates.delete(&id),
            None => report.push(
                Area::Cron,
                Action::Note,
                format!("{} line {} is not a job change nanobot writes; left out", path.display(), number + 1),
            ),
        }
    }
}

/// One queued change.
enum Queued {
    Upsert(Box<CronJob>),
    Delete(String),
}

fn queued_change(line: &str) -> Option<Queued> {
    let value: Value = serde_json::from_str(line).ok()?;
    let params = value.get("params")?;
    match value.get("action")?.as_str()? {
        "del" => Some(Queued::Delete(params.get("job_id")?.as_str()?.to_owned())),
        "add" | "update" => {
            let mut job: CronJob = serde_json::from_value(params.clone()).ok()?;
            camel_case_extras(&mut job.payload.extra);
            Some(Queued::Upsert(Box::new(job)))
        }
        _ => None,
    }
}

/// The queue writes every key in snake_case; those oxibot keeps without knowing them are
/// renamed to the camelCase `jobs.json` uses.
fn camel_case_extras(extra: &mut Map<String, Value>) {
    for (snake, camel) in [("channel_meta", "channelMeta"), ("origin_metadata", "originMetadata")] {
        if let Some(value) = extra.remove(snake) {
            extra.entry(camel.to_owned()).or_insert(value);
        }
    }
}

/// Merges `candidates` into `file`; returns what happened to each.
fn merge(file: &mut JobsFile, candidates: &Candidates) -> Vec<(Action, String)> {
    let mut outcomes = Vec::new();
    for job in &candidates.jobs {
        let label = format!("job '{}' ({})", job.name, job.id);
        match file.jobs.iter_mut().find(|known| known.id == job.id) {
            None => {
                file.jobs.push(job.clone());
                outcomes.push((Action::Add, label));
            }
            Some(known) if job.updated_at_ms > known.updated_at_ms => {
                *known = job.clone();
                outcomes.push((Action::Update, format!("{label}: nanobot changed it later")));
            }
            Some(_) => outcomes.push((Action::Skip, format!("{label}: already in the jobs file"))),
        }
    }
    for id in &candidates.deleted {
        if file.jobs.iter().any(|job| job.id == *id) {
            outcomes.push((
                Action::Note,
                format!("job {id} was deleted in nanobot but stays here (remove it with `oxibot cron remove {id}`)"),
            ));
        }
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::job::Schedule;

    fn job(id: &str, updated: i64) -> CronJob {
        let mut job: CronJob = serde_json::from_value(serde_json::json!({
            "id": id, "name": id, "schedule": {"kind": "every", "everyMs": 60000},
            "payload": {"kind": "agent_turn", "message": "hi"}
        }))
        .unwrap();
        job.updated_at_ms = updated;
        job
    }

    #[test]
    fn jobs_merge_by_id_newer_changes_win_and_nothing_is_deleted() {
        let mut file = JobsFile { jobs: vec![job("a", 5), job("b", 5)], ..JobsFile::default() };
        let mut candidates = Candidates::default();
        candidates.upsert(job("a", 5));
        candidates.upsert(job("b", 9));
        candidates.upsert(job("c", 1));
        candidates.delete("b");
        candidates.upsert(job("d", 1));
        candidates.deleted.push("a".into());
        let outcomes: Vec<Action> = merge(&mut file, &candidates).into_iter().map(|(action, _)| action).collect();
        assert_eq!(outcomes, [Action::Skip, Action::Add, Action::Add, Action::Note, Action::Note]);
        let ids: Vec<&str> = file.jobs.iter().map(|job| job.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert_eq!(merge(&mut file, &candidates).iter().filter(|(action, _)| action.changes()).count(), 0);
    }

    #[test]
    fn a_queued_add_in_snake_case_becomes_a_job_in_camel_case() {
        let line = r#"{"action": "add", "params": {"id": "110471c1", "name": "stretch", "enabled": true, "schedule": {"kind": "every", "at_ms": null, "every_ms": 3600000, "expr": null, "tz": null}, "payload": {"kind": "agent_turn", "message": "Stand up", "deliver": false, "channel": null, "to": null, "channel_meta": {}, "session_key": "telegram:42", "origin_channel": "cli", "origin_chat_id": "direct", "origin_metadata": {}}, "state": {"next_run_at_ms": 1795500336277, "last_run_at_ms": null, "last_status": null, "last_error": null, "run_history": []}, "created_at_ms": 1795496736277, "updated_at_ms": 1795496736277, "delete_after_run": false}}"#;
        let Some(Queued::Upsert(job)) = queued_change(line) else { panic!("not an upsert") };
        assert_eq!(job.schedule, Schedule::every(3_600_000));
        assert_eq!(job.payload.session_key.as_deref(), Some("telegram:42"));
        assert_eq!(job.state.next_run_at_ms, Some(1_795_500_336_277));
        let written = serde_json::to_value(&*job).unwrap();
        assert!(written["payload"].get("channelMeta").is_some() && written["payload"].get("channel_meta").is_none());
        assert!(
            matches!(queued_change(r#"{"action": "del", "params": {"job_id": "x"}}"#), Some(Queued::Delete(id)) if id == "x")
        );
        assert!(queued_change(r#"{"action": "explode"}"#).is_none());
    }
}

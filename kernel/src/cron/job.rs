//! The jobs of `cron/jobs.json` in nanobot's format: camelCase keys (snake_case read too),
//! `null` for absent values, and every key oxibot does not know kept as it was, so a file
//! nanobot wrote keeps working with oxibot and the other way round.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Most runs a job's history keeps (the oldest go first).
pub const MAX_HISTORY: usize = 20;

/// The payload kind of a job that runs a turn (nanobot's `agent_turn`); other kinds, such as
/// nanobot's own `system_event` jobs for Dream and the heartbeat, are kept but never run.
pub const AGENT_TURN: &str = "agent_turn";

/// The whole `jobs.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsFile {
    /// The format version (nanobot writes 1).
    #[serde(default = "version_one")]
    pub version: Value,
    /// The jobs, in the order they were added.
    #[serde(default)]
    pub jobs: Vec<CronJob>,
    /// Keys oxibot does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for JobsFile {
    fn default() -> JobsFile {
        JobsFile { version: version_one(), jobs: Vec::new(), extra: Map::new() }
    }
}

fn version_one() -> Value {
    Value::from(1)
}

/// One scheduled job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJob {
    /// Short unique id (8 hex digits when oxibot or nanobot made it).
    pub id: String,
    /// A label for people.
    #[serde(default)]
    pub name: String,
    /// Whether it is scheduled at all.
    #[serde(default = "yes", deserialize_with = "lenient_bool_true")]
    pub enabled: bool,
    /// When it runs.
    pub schedule: Schedule,
    /// What it runs and where.
    #[serde(default)]
    pub payload: Payload,
    /// Next run, last run and history.
    #[serde(default)]
    pub state: JobState,
    /// When it was made (ms since the epoch).
    #[serde(default, alias = "created_at_ms", deserialize_with = "lenient_ms")]
    pub created_at_ms: i64,
    /// When it last changed (ms since the epoch).
    #[serde(default, alias = "updated_at_ms", deserialize_with = "lenient_ms")]
    pub updated_at_ms: i64,
    /// A one-shot job is deleted after its run instead of disabled.
    #[serde(default, alias = "delete_after_run", deserialize_with = "lenient_bool_false")]
    pub delete_after_run: bool,
    /// What to do about a run missed while no scheduler was running (oxibot's; absent means
    /// the default of [`CronJob::missed_policy`]).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_missed")]
    pub missed: Option<MissedPolicy>,
    /// Keys oxibot does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn yes() -> bool {
    true
}

impl CronJob {
    /// The policy for a missed run: the job's own, else `once` for a one-shot job and `skip`
    /// for a recurring one.
    pub fn missed_policy(&self) -> MissedPolicy {
        self.missed.unwrap_or(if self.schedule.kind == ScheduleKind::At {
            MissedPolicy::Once
        } else {
            MissedPolicy::Skip
        })
    }

    /// Whether the job runs a turn (nanobot's `system_event` jobs do not, in oxibot).
    pub fn runs_turn(&self) -> bool {
        self.payload.kind == AGENT_TURN
    }

    /// Whether a scheduler should arm a timer for it: enabled, a turn, and a next run.
    pub fn due_at(&self) -> Option<i64> {
        (self.enabled && self.runs_turn()).then_some(self.state.next_run_at_ms).flatten()
    }

    /// Appends a run to the history (keeping the last [`MAX_HISTORY`]) and sets the last-run
    /// fields from it.
    pub fn record(&mut self, run: RunRecord) {
        self.state.last_run_at_ms = Some(run.run_at_ms);
        self.state.last_status = Some(run.status.clone());
        self.state.last_error = run.error.clone();
        self.state.run_history.push(run);
        let excess = self.state.run_history.len().saturating_sub(MAX_HISTORY);
        self.state.run_history.drain(..excess);
    }
}

/// What to do about a run missed while no scheduler was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MissedPolicy {
    /// Drop it: the next run is computed from now.
    Skip,
    /// Run once as soon as the scheduler starts, however many runs were missed.
    Once,
}

impl std::str::FromStr for MissedPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<MissedPolicy, String> {
        match text {
            "skip" => Ok(MissedPolicy::Skip),
            "once" => Ok(MissedPolicy::Once),
            other => Err(format!("unknown missed-run policy {other:?} (skip or once)")),
        }
    }
}

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// `at`, `every` or `cron`.
    pub kind: ScheduleKind,
    /// For `at`: when (ms since the epoch).
    #[serde(default, alias = "at_ms", deserialize_with = "lenient_opt_ms")]
    pub at_ms: Option<i64>,
    /// For `every`: the interval in ms.
    #[serde(default, alias = "every_ms", deserialize_with = "lenient_opt_ms")]
    pub every_ms: Option<i64>,
    /// For `cron`: the 5-field expression.
    #[serde(default)]
    pub expr: Option<String>,
    /// For `cron`: the IANA timezone its fields are read in (the configured one when absent).
    #[serde(default)]
    pub tz: Option<String>,
    /// Keys oxibot does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Schedule {
    /// Once, at `at_ms`.
    pub fn at(at_ms: i64) -> Schedule {
        Schedule::of(ScheduleKind::At, Some(at_ms), None, None, None)
    }

    /// Every `every_ms`.
    pub fn every(every_ms: i64) -> Schedule {
        Schedule::of(ScheduleKind::Every, None, Some(every_ms), None, None)
    }

    /// On a cron expression, read in `tz` (the configured timezone when `None`).
    pub fn cron(expr: &str, tz: Option<&str>) -> Schedule {
        Schedule::of(ScheduleKind::Cron, None, None, Some(expr.to_owned()), tz.map(str::to_owned))
    }

    fn of(
        kind: ScheduleKind,
        at_ms: Option<i64>,
        every_ms: Option<i64>,
        expr: Option<String>,
        tz: Option<String>,
    ) -> Schedule {
        Schedule { kind, at_ms, every_ms, expr, tz, extra: Map::new() }
    }
}

/// The kind of a schedule; a kind oxibot does not know is kept and never runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleKind {
    /// Once.
    At,
    /// At a fixed interval.
    Every,
    /// On a cron expression.
    Cron,
    /// Something else, kept as written.
    Other(String),
}

impl ScheduleKind {
    /// The name in the file.
    pub fn as_str(&self) -> &str {
        match self {
            ScheduleKind::At => "at",
            ScheduleKind::Every => "every",
            ScheduleKind::Cron => "cron",
            ScheduleKind::Other(other) => other,
        }
    }
}

impl Serialize for ScheduleKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ScheduleKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ScheduleKind, D::Error> {
        Ok(match String::deserialize(deserializer)?.as_str() {
            "at" => ScheduleKind::At,
            "every" => ScheduleKind::Every,
            "cron" => ScheduleKind::Cron,
            other => ScheduleKind::Other(other.to_owned()),
        })
    }
}

/// What a job does and for whom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    /// `agent_turn` (a turn with `message`) or nanobot's `system_event`.
    #[serde(default = "agent_turn")]
    pub kind: String,
    /// The instruction the turn starts with.
    #[serde(default)]
    pub message: String,
    /// Older nanobot: whether to deliver the reply to `channel`/`to`.
    #[serde(default, deserialize_with = "lenient_bool_false")]
    pub deliver: bool,
    /// Older nanobot: the channel to deliver to.
    #[serde(default)]
    pub channel: Option<String>,
    /// Older nanobot: the chat to deliver to.
    #[serde(default)]
    pub to: Option<String>,
    /// The session the job belongs to (`channel:chat_id`).
    #[serde(default, alias = "session_key")]
    pub session_key: Option<String>,
    /// The channel the job was made in.
    #[serde(default, alias = "origin_channel")]
    pub origin_channel: Option<String>,
    /// The chat the job was made in.
    #[serde(default, alias = "origin_chat_id")]
    pub origin_chat_id: Option<String>,
    /// Keys oxibot does not know (nanobot's `channelMeta`, `originMetadata`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn agent_turn() -> String {
    AGENT_TURN.to_owned()
}

impl Default for Payload {
    fn default() -> Payload {
        Payload {
            kind: agent_turn(),
            message: String::new(),
            deliver: false,
            channel: None,
            to: None,
            session_key: None,
            origin_channel: None,
            origin_chat_id: None,
            extra: Map::new(),
        }
    }
}

/// Where a job's turn runs and its reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTarget {
    /// The session (`channel:chat_id`).
    pub session_key: String,
    /// The channel (`telegram`, `cli`, …).
    pub channel: String,
    /// The chat within the channel.
    pub chat_id: String,
}

impl JobTarget {
    /// The target of session `key` (`channel:chat_id`; a key without `:` is a `cli` chat).
    pub fn session(key: &str) -> JobTarget {
        let (channel, chat_id) = key.split_once(':').unwrap_or(("cli", key));
        JobTarget { session_key: key.to_owned(), channel: channel.to_owned(), chat_id: chat_id.to_owned() }
    }
}

impl Payload {
    /// A turn with `message` in `target`'s session, as nanobot's session-bound jobs store it.
    pub fn turn(message: &str, target: &JobTarget) -> Payload {
        Payload {
            message: message.to_owned(),
            session_key: Some(target.session_key.clone()),
            origin_channel: Some(target.channel.clone()),
            origin_chat_id: Some(target.chat_id.clone()),
            ..Payload::default()
        }
    }

    /// Where the turn runs: the session the job was made in, or for jobs of older nanobot
    /// versions the `channel`/`to` they delivered to; `None` when the job names neither.
    pub fn target(&self) -> Option<JobTarget> {
        let nonempty = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
        if let Some(key) = nonempty(&self.session_key) {
            let mut target = JobTarget::session(&key);
            if let Some(channel) = nonempty(&self.origin_channel).or_else(|| nonempty(&self.channel)) {
                target.channel = channel;
            }
            if let Some(chat) = nonempty(&self.origin_chat_id).or_else(|| nonempty(&self.to)) {
                target.chat_id = chat;
            }
            return Some(target);
        }
        let channel = nonempty(&self.origin_channel).or_else(|| nonempty(&self.channel))?;
        let chat_id = nonempty(&self.origin_chat_id).or_else(|| nonempty(&self.to))?;
        Some(JobTarget { session_key: format!("{channel}:{chat_id}"), channel, chat_id })
    }
}

/// A job's run state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobState {
    /// When it runs next (ms since the epoch); `None` when it will not run.
    #[serde(default, alias = "next_run_at_ms", deserialize_with = "lenient_opt_ms")]
    pub next_run_at_ms: Option<i64>,
    /// When it last started.
    #[serde(default, alias = "last_run_at_ms", deserialize_with = "lenient_opt_ms")]
    pub last_run_at_ms: Option<i64>,
    /// How the last run ended.
    #[serde(default, alias = "last_status")]
    pub last_status: Option<RunStatus>,
    /// Why the last run failed.
    #[serde(default, alias = "last_error")]
    pub last_error: Option<String>,
    /// The last runs, oldest first (at most [`MAX_HISTORY`]).
    #[serde(default, alias = "run_history", deserialize_with = "lenient_history")]
    pub run_history: Vec<RunRecord>,
    /// Keys oxibot does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One run of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// When it started (ms since the epoch).
    #[serde(default, alias = "run_at_ms", deserialize_with = "lenient_ms")]
    pub run_at_ms: i64,
    /// How it ended.
    pub status: RunStatus,
    /// How long it took (ms).
    #[serde(default, alias = "duration_ms", deserialize_with = "lenient_ms")]
    pub duration_ms: i64,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// Keys oxibot does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunRecord {
    /// A run that started at `run_at_ms`, took `duration_ms` and ended with `outcome`.
    pub fn new(run_at_ms: i64, duration_ms: i64, outcome: Result<(), String>) -> RunRecord {
        let (status, error) = match outcome {
            Ok(()) => (RunStatus::Ok, None),
            Err(error) => (RunStatus::Error, Some(error)),
        };
        RunRecord { run_at_ms, status, duration_ms, error, extra: Map::new() }
    }
}

/// How a run ended; a status oxibot does not know is kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// It ran.
    Ok,
    /// It failed or did not run.
    Error,
    /// It was skipped on purpose.
    Skipped,
    /// Something else, kept as written.
    Other(String),
}

impl RunStatus {
    /// The name in the file.
    pub fn as_str(&self) -> &str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Skipped => "skipped",
            RunStatus::Other(other) => other,
        }
    }
}

impl Serialize for RunStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RunStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RunStatus, D::Error> {
        Ok(match String::deserialize(deserializer)?.as_str() {
            "ok" => RunStatus::Ok,
            "error" => RunStatus::Error,
            "skipped" => RunStatus::Skipped,
            other => RunStatus::Other(other.to_owned()),
        })
    }
}

// Lenient readers: nanobot reads numbers with `int(value)` and treats `null` or `""` like a
// missing key, so a file it accepts must not make oxibot move it aside as corrupt.

fn number(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse::<f64>().ok().map(|f| f as i64),
        _ => None,
    }
}

fn lenient_opt_ms<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    match &value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        _ => {
            number(&value).map(Some).ok_or_else(|| serde::de::Error::custom(format!("expected a number, got {value}")))
        }
    }
}

fn lenient_ms<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    lenient_opt_ms(deserializer).map(Option::unwrap_or_default)
}

fn lenient_bool<'de, D: Deserializer<'de>>(deserializer: D, default: bool) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Bool(b) => b,
        Value::Null => default,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => default,
    })
}

fn lenient_bool_true<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    lenient_bool(deserializer, true)
}

fn lenient_bool_false<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    lenient_bool(deserializer, false)
}

/// An unknown policy reads as absent (the default applies) rather than spoiling the file.
fn lenient_missed<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<MissedPolicy>, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_str().and_then(|s| s.parse().ok()))
}

/// Entries that are not objects are dropped, as nanobot does.
fn lenient_history<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<RunRecord>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .filter(Value::is_object)
            .map(|item| serde_json::from_value(item).map_err(serde::de::Error::custom))
            .collect(),
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A file as nanobot's `CronService._save_store` writes it, plus keys a newer version
    /// might add at every level.
    fn nanobot_file() -> Value {
        json!({
            "version": 1,
            "jobs": [
                {
                    "id": "3f2a9c1e",
                    "name": "standup",
                    "enabled": true,
                    "schedule": {"kind": "cron", "atMs": null, "everyMs": null, "expr": "0 9 * * 1-5",
                                 "tz": "America/New_York", "jitterMs": 500},
                    "payload": {"kind": "agent_turn", "message": "Remind me of the standup", "deliver": false,
                                "channel": null, "to": null, "channelMeta": {},
                                "sessionKey": "telegram:42", "originChannel": "telegram", "originChatId": "42",
                                "originMetadata": {"thread": 7}},
                    "state": {"nextRunAtMs": 1_795_000_000_000i64, "lastRunAtMs": 1_794_900_000_000i64,
                              "lastStatus": "ok", "lastError": null,
                              "runHistory": [{"runAtMs": 1_794_900_000_000i64, "status": "ok", "durationMs": 1200,
                                              "error": null, "tokens": 321}],
                              "retries": 0},
                    "createdAtMs": 1_794_000_000_000i64,
                    "updatedAtMs": 1_794_900_001_200i64,
                    "deleteAfterRun": false,
                    "owner": "alice"
                },
                {
                    "id": "dream",
                    "name": "dream",
                    "enabled": true,
                    "schedule": {"kind": "every", "atMs": null, "everyMs": 7_200_000, "expr": null, "tz": null},
                    "payload": {"kind": "system_event", "message": "", "deliver": false, "channel": null,
                                "to": null, "channelMeta": {}, "sessionKey": null, "originChannel": null,
                                "originChatId": null, "originMetadata": {}},
                    "state": {"nextRunAtMs": null, "lastRunAtMs": null, "lastStatus": null, "lastError": null,
                              "runHistory": []},
                    "createdAtMs": 0,
                    "updatedAtMs": 0,
                    "deleteAfterRun": false
                }
            ],
            "generator": "nanobot 0.9"
        })
    }

    #[test]
    fn a_nanobot_file_round_trips_with_its_unknown_keys_kept() {
        let original = nanobot_file();
        let file: JobsFile = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(file.jobs.len(), 2);
        let standup = &file.jobs[0];
        assert_eq!(standup.schedule.kind, ScheduleKind::Cron);
        assert_eq!(standup.state.run_history[0].status, RunStatus::Ok);
        assert_eq!(standup.extra["owner"], "alice");
        assert!(!file.jobs[1].runs_turn(), "nanobot's system jobs never run in oxibot");
        assert_eq!(serde_json::to_value(&file).unwrap(), original);
    }

    #[test]
    fn snake_case_keys_and_loose_numbers_are_read_like_nanobot_reads_them() {
        let job: CronJob = serde_json::from_value(json!({
            "id": "a1", "name": "x", "enabled": null,
            "schedule": {"kind": "every", "every_ms": "60000"},
            "payload": {"message": "hi", "session_key": "cli:direct"},
            "state": {"next_run_at_ms": 1.5e12, "run_history": [{"run_at_ms": 5, "status": "later"}, "junk"]},
            "created_at_ms": "", "missed": "sometimes"
        }))
        .unwrap();
        assert_eq!(job.schedule.every_ms, Some(60_000));
        assert!(job.enabled);
        assert_eq!(job.state.next_run_at_ms, Some(1_500_000_000_000));
        assert_eq!(job.state.run_history.len(), 1);
        assert_eq!(job.state.run_history[0].status, RunStatus::Other("later".into()));
        assert_eq!(job.missed, None, "an unknown policy falls back to the default");
        assert_eq!(job.payload.target(), Some(JobTarget::session("cli:direct")));
        assert!(job.extra.is_empty(), "aliases are fields, not unknown keys: {:?}", job.extra);
    }

    #[test]
    fn an_older_nanobot_job_targets_the_chat_it_delivered_to() {
        let payload: Payload =
            serde_json::from_value(json!({"message": "hi", "deliver": true, "channel": "telegram", "to": "42"}))
                .unwrap();
        let target = payload.target().unwrap();
        assert_eq!(
            (target.session_key.as_str(), target.channel.as_str(), target.chat_id.as_str()),
            ("telegram:42", "telegram", "42")
        );
        assert_eq!(Payload::default().target(), None);
    }

    #[test]
    fn the_missed_run_policy_defaults_to_once_for_one_shot_jobs_and_skip_for_recurring_ones() {
        let job = |schedule| CronJob {
            id: "a".into(),
            name: "a".into(),
            enabled: true,
            schedule,
            payload: Payload::default(),
            state: JobState::default(),
            created_at_ms: 0,
            updated_at_ms: 0,
            delete_after_run: false,
            missed: None,
            extra: Map::new(),
        };
        assert_eq!(job(Schedule::at(5)).missed_policy(), MissedPolicy::Once);
        assert_eq!(job(Schedule::every(5)).missed_policy(), MissedPolicy::Skip);
        assert_eq!(job(Schedule::cron("* * * * *", None)).missed_policy(), MissedPolicy::Skip);
        let once = CronJob { missed: Some(MissedPolicy::Once), ..job(Schedule::every(5)) };
        assert_eq!(once.missed_policy(), MissedPolicy::Once);
    }

    #[test]
    fn the_history_keeps_the_last_twenty_runs() {
        let mut job: CronJob =
            serde_json::from_value(json!({"id": "a", "schedule": {"kind": "every", "everyMs": 1000}})).unwrap();
        for i in 0..25 {
            job.record(RunRecord::new(i, 3, if i % 2 == 0 { Ok(()) } else { Err("boom".into()) }));
        }
        let runs: Vec<i64> = job.state.run_history.iter().map(|r| r.run_at_ms).collect();
        assert_eq!(runs, (5..25).collect::<Vec<_>>());
        assert_eq!((job.state.last_run_at_ms, job.state.last_status.clone()), (Some(24), Some(RunStatus::Ok)));
        assert_eq!(job.state.last_error, None);
    }
}

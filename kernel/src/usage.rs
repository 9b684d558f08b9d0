//! Token usage kept across runs: one JSON line per turn in `<data dir>/usage/<YYYY-MM-DD>.jsonl`
//! (UTC days; session, model, prompt, cached, completion and reasoning tokens, model calls, and
//! what spent them: the source and its phase, the cron job, the turn's duration and how full
//! its context was; a background call is one line of its own), appended
//! with one write so concurrent processes never interleave a line. `oxibot usage`, `/status`
//! and the web UI read it back per day, source, job, session or model, with a cost when the
//! config prices the model. Readers and writers go through [`UsageStore`]; [`UsageLog`] (the
//! files) is its one implementation.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One turn's usage, as stored. The fields after `calls` came later: a line without them is
/// read as a user turn of unknown duration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageEntry {
    /// When the turn ended (RFC 3339, UTC).
    pub at: String,
    /// The session (`channel:chat_id`).
    pub session: String,
    /// The model as configured.
    pub model: String,
    /// Input tokens, cached ones included.
    pub prompt: u64,
    /// Input tokens served from the provider's cache.
    pub cached: u64,
    /// Output tokens.
    pub completion: u64,
    /// Model calls in the turn.
    pub calls: u64,
    /// What spent the tokens (`user`, `cron`, `heartbeat`, `subagent` — its session is the
    /// parent's —, `system`, `dream`, `consolidation`, `memory_flush`, `embedding`); absent:
    /// `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The cron job's id, when a job's turn spent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// How long the turn took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    /// Prompt tokens of the turn's last model call: how much of the context window the
    /// session fills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// Output tokens spent on reasoning (within `completion`), where the provider says.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning: u64,
    /// The step of a source with several (Dream's `analysis` and `edit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// How long each model call took, in milliseconds, in the order they were made (a turn
    /// with tools makes several; lines written before this was kept have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_ms: Vec<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl UsageEntry {
    /// The source, `user` for lines written before sources were recorded.
    pub fn source(&self) -> &str {
        self.source.as_deref().unwrap_or(USER_SOURCE)
    }

    /// One model call of `source` in `session`, stamped `now`, with the tokens of `usage`.
    pub fn call(
        session: &str,
        model: &str,
        source: &str,
        usage: &crate::provider::Usage,
        took: Duration,
    ) -> UsageEntry {
        let ms = millis(took);
        UsageEntry {
            at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            session: session.to_owned(),
            model: model.to_owned(),
            prompt: usage.prompt_tokens,
            cached: usage.cached_tokens,
            completion: usage.completion_tokens,
            reasoning: usage.reasoning_tokens,
            calls: 1,
            source: Some(source.to_owned()),
            ms: Some(ms),
            call_ms: vec![ms],
            ..UsageEntry::default()
        }
    }
}

/// `took` in whole milliseconds, as the log keeps durations.
pub fn millis(took: Duration) -> u64 {
    u64::try_from(took.as_millis()).unwrap_or(u64::MAX)
}

/// The source of a user's turn.
pub const USER_SOURCE: &str = "user";

/// Where usage is kept: appended one turn at a time, read back by day.
pub trait UsageStore {
    /// Appends one turn's usage.
    fn record(&self, entry: &UsageEntry, now: DateTime<Utc>) -> io::Result<()>;
    /// Every entry of the `days` UTC days up to and including `today`, oldest first.
    fn entries(&self, today: NaiveDate, days: u64) -> Vec<(NaiveDate, UsageEntry)>;
}

/// Sums of usage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Input tokens, cached ones included.
    pub prompt: u64,
    /// Cached input tokens.
    pub cached: u64,
    /// Output tokens.
    pub completion: u64,
    /// Reasoning tokens (within the output tokens).
    pub reasoning: u64,
    /// Model calls.
    pub calls: u64,
    /// Turns.
    pub turns: u64,
    /// Cost in the prices' currency, when every model counted has a price.
    pub cost: Option<f64>,
    /// Milliseconds spent waiting for the model, over the calls whose time is known.
    pub call_ms: u64,
    /// The calls whose time is known.
    pub timed_calls: u64,
}

impl Totals {
    /// The mean time of a model call, where any call's time is known.
    pub fn ms_per_call(&self) -> Option<u64> {
        (self.timed_calls > 0).then(|| self.call_ms / self.timed_calls)
    }

    /// Adds `other`'s sums to these (the cost stays known only while both are).
    pub fn merge(&mut self, other: &Totals) {
        let first = self.turns == 0;
        self.prompt += other.prompt;
        self.cached += other.cached;
        self.completion += other.completion;
        self.reasoning += other.reasoning;
        self.calls += other.calls;
        self.turns += other.turns;
        self.call_ms += other.call_ms;
        self.timed_calls += other.timed_calls;
        self.cost = match (first, self.cost, other.cost) {
            (true, _, cost) => cost,
            (false, Some(sum), Some(cost)) => Some(sum + cost),
            _ => None,
        };
    }

    /// The sums of one entry, its cost at `price` when it has one.
    fn of(entry: &UsageEntry, price: Option<&Price>) -> Totals {
        Totals {
            prompt: entry.prompt,
            cached: entry.cached,
            completion: entry.completion,
            reasoning: entry.reasoning,
            calls: entry.calls,
            turns: 1,
            cost: price.map(|price| price.cost(entry)),
            call_ms: entry.call_ms.iter().sum(),
            timed_calls: entry.call_ms.len() as u64,
        }
    }

    fn add(&mut self, entry: &UsageEntry, price: Option<&Price>) {
        self.merge(&Totals::of(entry, price));
    }
}

/// A model's price per million tokens (`agents.defaults.pricing.<model>`: `input`,
/// `cachedInput`, `output`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    /// Per million input tokens not served from the cache.
    pub input: f64,
    /// Per million cached input tokens (default: the input price).
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Per million output tokens.
    pub output: f64,
}

impl Price {
    /// What `entry` cost at this price.
    pub fn cost(&self, entry: &UsageEntry) -> f64 {
        let fresh = entry.prompt.saturating_sub(entry.cached) as f64;
        let cached = entry.cached as f64;
        (fresh * self.input + cached * self.cached_input.unwrap_or(self.input) + entry.completion as f64 * self.output)
            / 1_000_000.0
    }
}

/// Reads `agents.defaults.pricing` (a map of model → price); an entry that is not a price is
/// an error naming its key.
pub fn prices(section: Option<&Value>) -> Result<BTreeMap<String, Price>, String> {
    let Some(section) = section.filter(|v| !v.is_null()) else { return Ok(BTreeMap::new()) };
    let map: &Map<String, Value> = section.as_object().ok_or("agents.defaults.pricing: expected an object")?;
    map.iter()
        .map(|(model, value)| {
            serde_json::from_value::<Price>(value.clone()).map(|price| (model.clone(), price)).map_err(|error| {
                format!("agents.defaults.pricing.{model}: {error} (expected {{\"input\", \"output\"}})")
            })
        })
        .collect()
}

/// The usage log of one data directory.
#[derive(Debug, Clone)]
pub struct UsageLog {
    dir: PathBuf,
}

impl UsageLog {
    /// The log under `data_dir` (`<data dir>/usage/`).
    pub fn new(data_dir: &Path) -> UsageLog {
        UsageLog { dir: data_dir.join("usage") }
    }
}

impl UsageStore for UsageLog {
    /// Appends one turn's usage to today's file.
    fn record(&self, entry: &UsageEntry, now: DateTime<Utc>) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let path = self.dir.join(format!("{}.jsonl", now.format("%Y-%m-%d")));
        let open = || OpenOptions::new().create(true).append(true).open(&path);
        // The directory is made the first time only, not checked on every turn.
        let mut file = match open() {
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir)?;
                open()?
            }
            other => other?,
        };
        // One write of a whole line, in append mode: lines of concurrent writers never mix.
        file.write_all(&line)
    }

    /// Every entry of the `days` UTC days up to and including `today`, oldest first. A line
    /// that does not parse (a torn last line) is skipped and reported; the files are only ever
    /// appended to, so it stays as it is.
    fn entries(&self, today: NaiveDate, days: u64) -> Vec<(NaiveDate, UsageEntry)> {
        let first = today.checked_sub_days(Days::new(days.saturating_sub(1))).unwrap_or(today);
        let mut entries = Vec::new();
        let mut day = first;
        while day <= today {
            let path = self.dir.join(format!("{}.jsonl", day.format("%Y-%m-%d")));
            if let Ok(text) = std::fs::read_to_string(&path) {
                entries.extend(parse_lines(&path, &text).into_iter().map(|e| (day, e)));
            }
            let Some(next) = day.succ_opt() else { break };
            day = next;
        }
        entries
    }
}

/// The entries of one day's file; lines that do not parse are reported and left out.
fn parse_lines(path: &Path, text: &str) -> Vec<UsageEntry> {
    let parsed = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
    parsed
        .filter_map(|(index, line)| {
            serde_json::from_str(line)
                .inspect_err(|error| {
                    let line = index + 1;
                    tracing::warn!(file = %path.display(), line, %error, "a usage line does not parse; it is skipped");
                })
                .ok()
        })
        .collect()
}

/// Sums `entries` per day and per session.
pub fn summarise(
    entries: &[(NaiveDate, UsageEntry)],
    prices: &BTreeMap<String, Price>,
) -> (BTreeMap<NaiveDate, Totals>, BTreeMap<String, Totals>) {
    let mut days: BTreeMap<NaiveDate, Totals> = BTreeMap::new();
    let mut sessions: BTreeMap<String, Totals> = BTreeMap::new();
    for (day, entry) in entries {
        let price = prices.get(&entry.model);
        days.entry(*day).or_default().add(entry, price);
        sessions.entry(entry.session.clone()).or_default().add(entry, price);
    }
    (days, sessions)
}

/// What usage is summed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The UTC day.
    Day,
    /// What spent the tokens (user, cron, heartbeat, …), with the phase when it has one
    /// (`dream:analysis`).
    Source,
    /// The cron job (`-` for turns no job ran).
    Job,
    /// The session.
    Session,
    /// The model.
    Model,
}

impl GroupBy {
    /// The key of one entry of day `day`.
    pub fn key(self, day: NaiveDate, entry: &UsageEntry) -> String {
        match self {
            GroupBy::Day => day.to_string(),
            GroupBy::Source => match &entry.phase {
                Some(phase) => format!("{}:{phase}", entry.source()),
                None => entry.source().to_owned(),
            },
            GroupBy::Job => entry.job.clone().unwrap_or_else(|| "-".to_owned()),
            GroupBy::Session => entry.session.clone(),
            GroupBy::Model => entry.model.clone(),
        }
    }
}

/// Sums `entries` per key of `by`.
pub fn group(
    entries: &[(NaiveDate, UsageEntry)],
    prices: &BTreeMap<String, Price>,
    by: GroupBy,
) -> BTreeMap<String, Totals> {
    let mut groups: BTreeMap<String, Totals> = BTreeMap::new();
    for (day, entry) in entries {
        groups.entry(by.key(*day, entry)).or_default().add(entry, prices.get(&entry.model));
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    fn entry(session: &str, model: &str, prompt: u64, cached: u64, completion: u64) -> UsageEntry {
        UsageEntry {
            at: "2026-11-24T10:00:00Z".into(),
            session: session.into(),
            model: model.into(),
            prompt,
            cached,
            completion,
            calls: 1,
            ..UsageEntry::default()
        }
    }

    #[test]
    fn usage_is_summed_per_source_and_job_and_an_old_line_counts_as_a_user_turn() {
        let old: UsageEntry = serde_json::from_str(
            r#"{"at":"2026-11-24T10:00:00Z","session":"cli:direct","model":"m","prompt":5,"cached":0,"completion":1,"calls":1}"#,
        )
        .unwrap();
        let mut job = entry("telegram:1", "m", 7, 0, 2);
        job.source = Some("cron".into());
        job.job = Some("abc123".into());
        let day = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        let entries = vec![(day, old), (day, job)];
        let by_source = group(&entries, &BTreeMap::new(), GroupBy::Source);
        assert_eq!((by_source["user"].prompt, by_source["cron"].prompt), (5, 7));
        let by_job = group(&entries, &BTreeMap::new(), GroupBy::Job);
        assert_eq!((by_job["-"].turns, by_job["abc123"].completion), (1, 2));
        let mut edit = entry("system:dream", "m", 3, 0, 1);
        (edit.source, edit.phase, edit.reasoning) = (Some("dream".into()), Some("edit".into()), 1);
        let by_source = group(&[(day, edit)], &BTreeMap::new(), GroupBy::Source);
        assert_eq!(by_source["dream:edit"].reasoning, 1, "Dream is shown per phase");
    }

    #[test]
    fn turns_are_summed_per_day_and_session_with_a_cost_when_priced() {
        let dir = TempDir::new("usage");
        let log = UsageLog::new(dir.path());
        let monday = "2026-11-23T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let tuesday = "2026-11-24T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        log.record(&entry("cli:direct", "m", 1_000_000, 500_000, 100_000), monday).unwrap();
        log.record(&entry("telegram:1", "m", 2_000_000, 0, 0), tuesday).unwrap();
        log.record(&entry("cli:direct", "m", 0, 0, 1_000_000), tuesday).unwrap();
        let prices =
            prices(Some(&serde_json::json!({"m": {"input": 2.0, "cachedInput": 0.5, "output": 10.0}}))).unwrap();
        let entries = log.entries(tuesday.date_naive(), 7);
        let (days, sessions) = summarise(&entries, &prices);
        let monday_totals = days[&monday.date_naive()];
        assert_eq!(
            (monday_totals.prompt, monday_totals.cached, monday_totals.completion),
            (1_000_000, 500_000, 100_000)
        );
        assert_eq!(monday_totals.cost, Some(1.0 + 0.25 + 1.0));
        assert_eq!(days[&tuesday.date_naive()].turns, 2);
        assert_eq!(sessions["cli:direct"].turns, 2);
        assert_eq!(sessions["telegram:1"].cost, Some(4.0));
        assert_eq!(log.entries(tuesday.date_naive(), 1).len(), 2, "one day back reads only today");
    }

    #[test]
    fn the_time_per_call_is_the_mean_over_the_calls_whose_time_is_known() {
        let mut turn = entry("s", "m", 10, 0, 1);
        (turn.calls, turn.call_ms) = (2, vec![300, 100]);
        let helper =
            UsageEntry::call("s", "m", "subagent", &crate::provider::Usage::default(), Duration::from_millis(500));
        let old = entry("s", "m", 10, 0, 1);
        let day = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        let by_source = group(&[(day, turn), (day, helper), (day, old.clone())], &BTreeMap::new(), GroupBy::Source);
        assert_eq!(by_source["user"].ms_per_call(), Some(200), "the old line's call has no time and is left out");
        assert_eq!(by_source["subagent"].ms_per_call(), Some(500));
        let mut total = Totals::default();
        total.merge(&by_source["user"]);
        total.merge(&by_source["subagent"]);
        assert_eq!((total.calls, total.ms_per_call()), (4, Some(300)));
        assert_eq!(group(&[(day, old)], &BTreeMap::new(), GroupBy::Day).values().next().unwrap().ms_per_call(), None);
    }

    #[test]
    fn an_unpriced_model_leaves_the_cost_unknown_and_a_bad_price_names_its_key() {
        let mut totals = Totals::default();
        totals.add(&entry("s", "priced", 10, 0, 10), Some(&Price { input: 1.0, cached_input: None, output: 1.0 }));
        totals.add(&entry("s", "other", 10, 0, 10), None);
        assert_eq!(totals.cost, None);
        let error = prices(Some(&serde_json::json!({"gpt-x": {"input": "cheap"}}))).unwrap_err();
        assert!(error.starts_with("agents.defaults.pricing.gpt-x:"), "{error}");
    }
}

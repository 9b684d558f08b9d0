//! Spending caps, `agents.defaults.budgets`: tokens or money per UTC day or month, for
//! everything (`all`), one source (`user`, `cron`, `heartbeat`, `subagent`, `system`, `dream`,
//! `consolidation`, `memory_flush`, `embedding`) or one cron job (`job:<id>`), checked against
//! the usage log (plus the running turn's calls not yet in it) before every model call. No cap
//! is set unless the config sets one: a limit the owner never chose would stop replies they
//! expect. Money caps count only models that `agents.defaults.pricing` prices.
//!
//! ```json
//! "budgets": {"all": {"monthlyCost": 20}, "heartbeat": {"dailyTokens": 200000},
//!             "job:a1b2c3d4": {"dailyTokens": 20000}}
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{Datelike, NaiveDate};
use serde::Deserialize;
use serde_json::Value;

use crate::usage::{Price, UsageEntry, UsageStore};

/// The sources a cap may name (besides `all` and `job:<id>`).
const SOURCES: [&str; 9] =
    ["user", "cron", "heartbeat", "subagent", "system", "dream", "consolidation", "memory_flush", "embedding"];

/// The limits of one scope; each is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cap {
    /// Prompt plus completion tokens per UTC day.
    pub daily_tokens: Option<u64>,
    /// Prompt plus completion tokens per UTC month.
    pub monthly_tokens: Option<u64>,
    /// Cost per UTC day, in the prices' currency.
    pub daily_cost: Option<f64>,
    /// Cost per UTC month, in the prices' currency.
    pub monthly_cost: Option<f64>,
}

/// Every configured cap, by scope.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    caps: BTreeMap<String, Cap>,
}

/// A cap that is reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    /// `all`, a source, or `job:<id>`.
    pub scope: String,
    /// The setting that was reached (`dailyTokens`, …).
    pub setting: &'static str,
    /// What was spent, as shown.
    pub used: String,
    /// The limit, as shown.
    pub limit: String,
    /// The first day of the period (a day, or the first of the month).
    pub period: NaiveDate,
}

impl Breach {
    /// What the owner is told, once per cap and period.
    pub fn message(&self) -> String {
        let (what, until) =
            if self.setting.starts_with("daily") { ("today", "tomorrow") } else { ("this month", "next month") };
        format!(
            "The {} budget is spent: {} of {} {what} (UTC). The model is not called; it stays capped until {until}, \
             or raise agents.defaults.budgets.{}.{} in the config.",
            self.scope, self.used, self.limit, self.scope, self.setting
        )
    }

    /// True the first time it is asked for this cap and period (a marker file in `data_dir`),
    /// so the owner is told once, not at every capped turn.
    pub fn first_notice(&self, data_dir: &Path) -> bool {
        let dir = data_dir.join("usage").join("capped");
        let name = format!("{}-{}-{}", self.period, self.scope.replace(['/', ':'], "_"), self.setting);
        std::fs::create_dir_all(&dir).is_ok()
            && std::fs::OpenOptions::new().write(true).create_new(true).open(dir.join(name)).is_ok()
    }
}

/// Reads `agents.defaults.budgets`; a wrong entry is an error naming its key.
pub fn budgets(section: Option<&Value>) -> Result<Budgets, String> {
    let Some(section) = section.filter(|v| !v.is_null()) else { return Ok(Budgets::default()) };
    let map = section.as_object().ok_or("agents.defaults.budgets: expected an object")?;
    let mut caps = BTreeMap::new();
    for (scope, value) in map {
        let known = scope == "all"
            || SOURCES.contains(&scope.as_str())
            || scope.strip_prefix("job:").is_some_and(|id| !id.is_empty());
        if !known {
            return Err(format!(
                "agents.defaults.budgets.{scope}: not a scope (all, {}, or job:<id>)",
                SOURCES.join(", ")
            ));
        }
        let cap = serde_json::from_value::<Cap>(value.clone()).map_err(|error| {
            format!(
                "agents.defaults.budgets.{scope}: {error} (expected dailyTokens, monthlyTokens, dailyCost, monthlyCost)"
            )
        })?;
        caps.insert(scope.clone(), cap);
    }
    Ok(Budgets { caps })
}

/// Spending of one scope over a period.
#[derive(Debug, Default)]
struct Spent {
    tokens: u64,
    cost: f64,
}

impl Budgets {
    /// Whether no cap is set.
    pub fn is_empty(&self) -> bool {
        self.caps.is_empty()
    }

    /// The first cap a turn of `source` (and cron job `job`) would go over, given what the
    /// usage `store` holds for this month up to `today`.
    pub fn breach(
        &self,
        store: &dyn UsageStore,
        prices: &BTreeMap<String, Price>,
        today: NaiveDate,
        source: &str,
        job: Option<&str>,
    ) -> Option<Breach> {
        self.breach_with(store, prices, today, source, job, None)
    }

    /// Like [`Budgets::breach`], counting `pending` too: calls of the running turn that the
    /// usage log gets only when the turn ends.
    pub fn breach_with(
        &self,
        store: &dyn UsageStore,
        prices: &BTreeMap<String, Price>,
        today: NaiveDate,
        source: &str,
        job: Option<&str>,
        pending: Option<&UsageEntry>,
    ) -> Option<Breach> {
        if self.is_empty() {
            return None;
        }
        let job_scope = job.map(|id| format!("job:{id}"));
        let scopes = ["all", source].into_iter().chain(job_scope.as_deref());
        let mut month = store.entries(today, u64::from(today.day()));
        month.extend(pending.map(|entry| (today, entry.clone())));
        scopes.filter_map(|scope| Some((scope, self.caps.get(scope)?))).find_map(|(scope, cap)| {
            let (day, month) = spent(&month, prices, today, scope);
            over(scope, cap, &day, &month, today)
        })
    }

    /// One line per cap: what it allows and what was spent, with `capped` once reached.
    pub fn report(&self, store: &dyn UsageStore, prices: &BTreeMap<String, Price>, today: NaiveDate) -> Vec<String> {
        let month = store.entries(today, u64::from(today.day()));
        self.caps
            .iter()
            .map(|(scope, cap)| {
                let (day, spent_month) = spent(&month, prices, today, scope);
                let state = match over(scope, cap, &day, &spent_month, today) {
                    Some(breach) => format!("CAPPED ({} {} of {})", breach.setting, breach.used, breach.limit),
                    None => "ok".to_owned(),
                };
                format!(
                    "{scope}: {state}; today {} tokens, cost {:.4}; this month {} tokens, cost {:.4}",
                    day.tokens, day.cost, spent_month.tokens, spent_month.cost
                )
            })
            .collect()
    }
}

/// What `scope` spent today and this month.
fn spent(
    month: &[(NaiveDate, UsageEntry)],
    prices: &BTreeMap<String, Price>,
    today: NaiveDate,
    scope: &str,
) -> (Spent, Spent) {
    let (mut day, mut total) = (Spent::default(), Spent::default());
    for (date, entry) in month.iter().filter(|(_, entry)| in_scope(entry, scope)) {
        let tokens = entry.prompt + entry.completion;
        let cost = prices.get(&entry.model).map_or(0.0, |price| price.cost(entry));
        total.tokens += tokens;
        total.cost += cost;
        if *date == today {
            day.tokens += tokens;
            day.cost += cost;
        }
    }
    (day, total)
}

fn in_scope(entry: &UsageEntry, scope: &str) -> bool {
    match scope.strip_prefix("job:") {
        _ if scope == "all" => true,
        Some(id) => entry.job.as_deref() == Some(id),
        None => entry.source() == scope,
    }
}

/// The first of `cap`'s limits that `day` or `month` reached.
fn over(scope: &str, cap: &Cap, day: &Spent, month: &Spent, today: NaiveDate) -> Option<Breach> {
    let first_of_month = today.with_day(1).unwrap_or(today);
    let breach =
        |setting, used: String, limit: String, period| Breach { scope: scope.to_owned(), setting, used, limit, period };
    let tokens = |n: u64| format!("{n} tokens");
    if let Some(limit) = cap.daily_tokens.filter(|limit| day.tokens >= *limit) {
        return Some(breach("dailyTokens", tokens(day.tokens), tokens(limit), today));
    }
    if let Some(limit) = cap.monthly_tokens.filter(|limit| month.tokens >= *limit) {
        return Some(breach("monthlyTokens", tokens(month.tokens), tokens(limit), first_of_month));
    }
    if let Some(limit) = cap.daily_cost.filter(|limit| day.cost >= *limit) {
        return Some(breach("dailyCost", format!("{:.4}", day.cost), format!("{limit:.4}"), today));
    }
    if let Some(limit) = cap.monthly_cost.filter(|limit| month.cost >= *limit) {
        return Some(breach("monthlyCost", format!("{:.4}", month.cost), format!("{limit:.4}"), first_of_month));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;
    use crate::usage::UsageLog;

    fn turn(source: &str, job: Option<&str>, prompt: u64) -> UsageEntry {
        UsageEntry {
            at: "2026-11-24T10:00:00Z".into(),
            session: "s".into(),
            model: "m".into(),
            prompt,
            calls: 1,
            source: Some(source.into()),
            job: job.map(str::to_owned),
            ..UsageEntry::default()
        }
    }

    #[test]
    fn a_job_over_its_daily_tokens_is_capped_and_other_sources_are_not() {
        let dir = TempDir::new("budget");
        let log = UsageLog::new(dir.path());
        let now = "2026-11-24T12:00:00Z".parse::<chrono::DateTime<chrono::Utc>>().unwrap();
        log.record(&turn("cron", Some("j1"), 150), now).unwrap();
        let budgets = budgets(Some(&serde_json::json!({"job:j1": {"dailyTokens": 100}}))).unwrap();
        let today = now.date_naive();
        let breach = budgets.breach(&log, &BTreeMap::new(), today, "cron", Some("j1")).unwrap();
        assert_eq!((breach.scope.as_str(), breach.setting), ("job:j1", "dailyTokens"));
        assert!(breach.message().contains("150 tokens of 100 tokens today"), "{}", breach.message());
        assert!(budgets.breach(&log, &BTreeMap::new(), today, "cron", Some("j2")).is_none());
        assert!(budgets.breach(&log, &BTreeMap::new(), today, "user", None).is_none());
        assert!(breach.first_notice(dir.path()) && !breach.first_notice(dir.path()), "told once");
    }

    #[test]
    fn the_running_turns_calls_count_toward_its_cap_before_they_are_logged() {
        let dir = TempDir::new("budget");
        let log = UsageLog::new(dir.path());
        let budgets = budgets(Some(&serde_json::json!({"dream": {"dailyTokens": 100}}))).unwrap();
        let today = chrono::Utc::now().date_naive();
        let pending = turn("dream", None, 120);
        assert!(budgets.breach(&log, &BTreeMap::new(), today, "dream", None).is_none(), "nothing logged yet");
        let breach = budgets.breach_with(&log, &BTreeMap::new(), today, "dream", None, Some(&pending)).unwrap();
        assert_eq!((breach.scope.as_str(), breach.used.as_str()), ("dream", "120 tokens"));
        assert!(
            budgets.breach_with(&log, &BTreeMap::new(), today, "user", None, Some(&turn("user", None, 500))).is_none()
        );
    }

    #[test]
    fn a_wrong_scope_or_limit_is_an_error_naming_its_key() {
        let error = budgets(Some(&serde_json::json!({"dreams": {"dailyTokens": 1}}))).unwrap_err();
        assert!(error.starts_with("agents.defaults.budgets.dreams:"), "{error}");
        let error = budgets(Some(&serde_json::json!({"all": {"dailyTokenz": 1}}))).unwrap_err();
        assert!(error.contains("dailyTokenz"), "{error}");
    }
}

//! When Dream runs: `agents.defaults.dream` (`cron`, `intervalH`, `model`, `maxBatchSize`,
//! `maxIterations`, `enabled`), and next-run times in the configured timezone. Cron
//! expressions are read by [`crate::cron::expr`], which scheduled jobs use too.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cron::expr::CronExpr;

/// The schedule when none is configured: every two hours, on the hour.
pub const DEFAULT_CRON: &str = "0 */2 * * *";

/// A bad `agents.defaults.dream` setting.
#[derive(Debug, thiserror::Error)]
#[error("agents.defaults.dream.{key}: {problem}")]
pub struct ScheduleError {
    /// The key under `agents.defaults.dream`.
    key: &'static str,
    /// What is wrong and what was expected.
    problem: String,
}

fn invalid(key: &'static str, problem: impl Into<String>) -> ScheduleError {
    ScheduleError { key, problem: problem.into() }
}

/// When Dream runs.
#[derive(Debug, Clone)]
pub enum DreamSchedule {
    /// On a cron schedule.
    Cron(CronExpr),
    /// At a fixed interval after each run (or start).
    Every(Duration),
}

impl DreamSchedule {
    /// The first run strictly after `after`, with cron fields read in `timezone`.
    pub fn next_after(&self, after: DateTime<Utc>, timezone: chrono_tz::Tz) -> Option<DateTime<Utc>> {
        match self {
            DreamSchedule::Every(interval) => Some(after + chrono::Duration::from_std(*interval).ok()?),
            DreamSchedule::Cron(expr) => expr.next_after(after, timezone),
        }
    }
}

/// Dream's settings.
#[derive(Debug, Clone)]
pub struct DreamSettings {
    /// When it runs.
    pub schedule: DreamSchedule,
    /// A model for Dream instead of the agent's.
    pub model: Option<String>,
    /// Most history entries per run.
    pub max_batch_size: usize,
    /// Most model calls in the editing phase.
    pub max_iterations: u32,
    /// Whether the schedule runs at all (`/dream` always works).
    pub enabled: bool,
}

impl Default for DreamSettings {
    fn default() -> Self {
        DreamSettings {
            schedule: parse_cron(DEFAULT_CRON).unwrap_or(DreamSchedule::Every(Duration::from_secs(2 * 3600))),
            model: None,
            max_batch_size: 20,
            max_iterations: 10,
            enabled: true,
        }
    }
}

impl DreamSettings {
    /// Reads `agents.defaults.dream` (`null` or absent means the defaults).
    pub fn from_config(value: &Value) -> Result<DreamSettings, ScheduleError> {
        let mut settings = DreamSettings::default();
        let Value::Object(map) = value else {
            return if value.is_null() { Ok(settings) } else { Err(invalid("", "expected an object")) };
        };
        let get = |camel: &str, snake: &str| map.get(camel).or_else(|| map.get(snake)).filter(|v| !v.is_null());
        if let Some(hours) = get("intervalH", "interval_h") {
            let hours = hours
                .as_f64()
                .filter(|h| *h > 0.0)
                .ok_or_else(|| invalid("intervalH", format!("expected a positive number of hours, got {hours}")))?;
            settings.schedule = DreamSchedule::Every(Duration::from_secs_f64(hours * 3600.0));
        }
        if let Some(expression) = get("cron", "cron") {
            let text = expression.as_str().ok_or_else(|| {
                invalid("cron", format!("expected a cron expression like \"{DEFAULT_CRON}\", got {expression}"))
            })?;
            settings.schedule = parse_cron(text)?;
        }
        if let Some(model) = get("model", "model") {
            settings.model = Some(
                model
                    .as_str()
                    .ok_or_else(|| invalid("model", format!("expected a model name, got {model}")))?
                    .to_owned(),
            );
        }
        if let Some(size) = get("maxBatchSize", "max_batch_size") {
            let size = size
                .as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid("maxBatchSize", format!("expected a positive whole number, got {size}")))?;
            settings.max_batch_size = usize::try_from(size).unwrap_or(usize::MAX);
        }
        if let Some(iterations) = get("maxIterations", "max_iterations") {
            let n = iterations.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                invalid("maxIterations", format!("expected a positive whole number, got {iterations}"))
            })?;
            settings.max_iterations = u32::try_from(n).unwrap_or(u32::MAX);
        }
        if let Some(enabled) = get("enabled", "enabled") {
            settings.enabled = enabled
                .as_bool()
                .ok_or_else(|| invalid("enabled", format!("expected true or false, got {enabled}")))?;
        }
        Ok(settings)
    }
}

/// Parses a cron expression (see [`CronExpr::parse`]) as Dream's schedule.
pub fn parse_cron(expression: &str) -> Result<DreamSchedule, ScheduleError> {
    CronExpr::parse(expression).map(DreamSchedule::Cron).map_err(|error| invalid("cron", error.to_string()))
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Timelike};
    use serde_json::json;

    use super::*;

    /// Thursday 2026-11-19 10:15 UTC.
    fn thursday() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 19, 10, 15, 0).unwrap()
    }

    #[test]
    fn cron_fields_are_read_in_the_configured_timezone() {
        let run = parse_cron("0 9 * * *").unwrap().next_after(thursday(), chrono_tz::Asia::Tokyo).unwrap();
        assert_eq!((run.hour(), run.minute()), (0, 0), "09:00 in Tokyo is midnight UTC");
    }

    #[test]
    fn an_interval_in_hours_counts_from_now() {
        let settings = DreamSettings::from_config(&json!({"intervalH": 3})).unwrap();
        assert_eq!(
            settings.schedule.next_after(thursday(), chrono_tz::UTC).unwrap(),
            thursday() + chrono::Duration::hours(3)
        );
    }

    #[test]
    fn defaults_apply_when_nothing_is_configured() {
        let settings = DreamSettings::from_config(&Value::Null).unwrap();
        assert_eq!(
            (settings.max_batch_size, settings.max_iterations, settings.enabled, settings.model),
            (20, 10, true, None)
        );
        assert_eq!(settings.schedule.next_after(thursday(), chrono_tz::UTC).unwrap().hour(), 12);
    }

    #[test]
    fn nanobot_keys_in_either_case_are_read() {
        let camel = DreamSettings::from_config(
            &json!({"cron": "0 3 * * *", "model": "cheap", "maxBatchSize": 5, "maxIterations": 4}),
        )
        .unwrap();
        let snake = DreamSettings::from_config(
            &json!({"cron": "0 3 * * *", "model": "cheap", "max_batch_size": 5, "max_iterations": 4}),
        )
        .unwrap();
        for settings in [camel, snake] {
            assert_eq!(
                (settings.model.as_deref(), settings.max_batch_size, settings.max_iterations),
                (Some("cheap"), 5, 4)
            );
        }
    }

    #[test]
    fn bad_settings_name_the_key_and_what_was_expected() {
        let error = DreamSettings::from_config(&json!({"cron": "every day"})).unwrap_err().to_string();
        assert!(error.starts_with("agents.defaults.dream.cron:") && error.contains("5 fields"), "{error}");
        let error = DreamSettings::from_config(&json!({"cron": "0 0 * * 9"})).unwrap_err().to_string();
        assert!(error.contains("day of week 9"), "{error}");
        let error = DreamSettings::from_config(&json!({"maxBatchSize": "many"})).unwrap_err().to_string();
        assert!(
            error.starts_with("agents.defaults.dream.maxBatchSize:") && error.contains("positive whole number"),
            "{error}"
        );
        let error = DreamSettings::from_config(&json!({"intervalH": -1})).unwrap_err().to_string();
        assert!(error.contains("intervalH"), "{error}");
    }
}

//! When Dream runs: `agents.defaults.dream` (`cron`, `intervalH`, `model`, `maxBatchSize`,
//! `maxIterations`, `enabled`), and next-run times in the configured timezone.
//!
//! Users write standard 5-field cron expressions (`0 */2 * * *`). The `cron` crate wants a
//! seconds field first, numbers days of the week 1 = Sunday … 7 = Saturday (standard cron:
//! 0 or 7 = Sunday, 1 = Monday), and fires only when *both* day fields match where standard
//! cron fires when *either* does. [`parse_cron`] converts: it prepends `0` seconds, rewrites
//! the day-of-week field as an explicit list in the crate's numbering, and splits an
//! expression that restricts both day fields into two schedules whose earliest run wins.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

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
    /// On a cron schedule: the earliest next run of any of these.
    Cron(Vec<cron::Schedule>),
    /// At a fixed interval after each run (or start).
    Every(Duration),
}

impl DreamSchedule {
    /// The first run strictly after `after`, with cron fields read in `timezone`.
    pub fn next_after(&self, after: DateTime<Utc>, timezone: chrono_tz::Tz) -> Option<DateTime<Utc>> {
        match self {
            DreamSchedule::Every(interval) => Some(after + chrono::Duration::from_std(*interval).ok()?),
            DreamSchedule::Cron(schedules) => {
                let local = after.with_timezone(&timezone);
                schedules.iter().filter_map(|s| s.after(&local).next()).map(|t| t.with_timezone(&Utc)).min()
            }
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

/// Parses a standard 5-field cron expression (or a 6-field one with seconds first, or a
/// `@daily`-style macro) into a schedule with standard semantics.
pub fn parse_cron(expression: &str) -> Result<DreamSchedule, ScheduleError> {
    let bad = |why: String| {
        invalid(
            "cron",
            format!(
                "{why} in {expression:?}; expected 5 fields like \"{DEFAULT_CRON}\" (minute hour day-of-month month day-of-week)"
            ),
        )
    };
    let text = expression.trim();
    if text.starts_with('@') {
        return cron::Schedule::from_str(text).map(|s| DreamSchedule::Cron(vec![s])).map_err(|e| bad(e.to_string()));
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let (seconds, rest) = match fields.len() {
        5 => ("0", &fields[..]),
        6 => (fields[0], &fields[1..]),
        n => return Err(bad(format!("{n} fields"))),
    };
    let (minute, hour, day, month, weekday) = (rest[0], rest[1], rest[2], rest[3], rest[4]);
    let weekdays = weekday_set(weekday).map_err(bad)?;
    let weekday = crate_weekdays(&weekdays);
    let day_restricted = !matches!(day, "*" | "?");
    let variants: Vec<(String, String)> = if day_restricted && weekday != "*" {
        vec![(day.to_owned(), "*".to_owned()), ("*".to_owned(), weekday)]
    } else {
        vec![(day.to_owned(), weekday)]
    };
    let schedules = variants
        .into_iter()
        .map(|(day, weekday)| {
            cron::Schedule::from_str(&format!("{seconds} {minute} {hour} {day} {month} {weekday}"))
                .map_err(|e| bad(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DreamSchedule::Cron(schedules))
}

/// The days (0 = Sunday … 6 = Saturday) a standard day-of-week field selects.
fn weekday_set(field: &str) -> Result<[bool; 7], String> {
    let mut days = [false; 7];
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                (range, step.parse::<usize>().ok().filter(|s| *s > 0).ok_or_else(|| format!("bad step {step:?}"))?)
            }
            None => (part, 1),
        };
        let (first, last) = match range {
            "*" | "?" => (0, 6),
            _ => match range.split_once('-') {
                Some((a, b)) => (weekday_number(a)?, weekday_number(b)?),
                None if step > 1 => (weekday_number(range)?, 6),
                None => (weekday_number(range)?, weekday_number(range)?),
            },
        };
        if last < first {
            return Err(format!("day-of-week range {range:?} runs backwards"));
        }
        for day in (first..=last).step_by(step) {
            days[day % 7] = true;
        }
    }
    Ok(days)
}

/// `0`–`7` (both 0 and 7 are Sunday) or a three-letter English name.
fn weekday_number(text: &str) -> Result<usize, String> {
    const NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    if let Ok(n) = text.parse::<usize>() {
        return if n <= 7 { Ok(n) } else { Err(format!("day of week {n} (0–7)")) };
    }
    NAMES.iter().position(|name| name.eq_ignore_ascii_case(text)).ok_or_else(|| format!("unknown day of week {text:?}"))
}

/// The set as the `cron` crate's day-of-week field (1 = Sunday … 7 = Saturday).
fn crate_weekdays(days: &[bool; 7]) -> String {
    if days.iter().all(|d| *d) {
        return "*".to_owned();
    }
    let numbers: Vec<String> = (0..7).filter(|d| days[*d]).map(|d| (d + 1).to_string()).collect();
    numbers.join(",")
}

#[cfg(test)]
mod tests {
    use chrono::{Datelike, TimeZone, Timelike, Weekday};
    use serde_json::json;

    use super::*;

    fn next(expression: &str, after: DateTime<Utc>) -> DateTime<Utc> {
        parse_cron(expression).unwrap().next_after(after, chrono_tz::UTC).unwrap()
    }

    /// Thursday 2026-11-19 10:15 UTC.
    fn thursday() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 19, 10, 15, 0).unwrap()
    }

    #[test]
    fn every_two_hours_runs_on_even_hours() {
        let first = next("0 */2 * * *", thursday());
        assert_eq!((first.hour(), first.minute()), (12, 0));
        assert_eq!(next("0 */2 * * *", first).hour(), 14);
    }

    #[test]
    fn day_one_is_monday_as_in_standard_cron() {
        let run = next("30 9 * * 1", thursday());
        assert_eq!((run.weekday(), run.hour(), run.minute()), (Weekday::Mon, 9, 30));
        assert_eq!(run.day(), 23);
    }

    #[test]
    fn zero_and_seven_are_both_sunday() {
        assert_eq!(next("0 0 * * 0", thursday()).weekday(), Weekday::Sun);
        assert_eq!(next("0 0 * * 7", thursday()).weekday(), Weekday::Sun);
        assert_eq!(next("0 0 * * sun", thursday()).weekday(), Weekday::Sun);
    }

    #[test]
    fn weekdays_only_skips_the_weekend() {
        let friday_evening = Utc.with_ymd_and_hms(2026, 11, 20, 18, 0, 0).unwrap();
        assert_eq!(next("0 9 * * 1-5", friday_evening).weekday(), Weekday::Mon);
        assert_eq!(next("0 9 * * mon-fri", friday_evening).weekday(), Weekday::Mon);
    }

    #[test]
    fn a_step_over_the_week_starts_on_sunday() {
        let mut run = thursday();
        let mut seen = Vec::new();
        for _ in 0..4 {
            run = next("0 0 * * */2", run);
            seen.push(run.weekday());
        }
        assert_eq!(seen, [Weekday::Sat, Weekday::Sun, Weekday::Tue, Weekday::Thu]);
    }

    #[test]
    fn both_day_fields_set_fire_when_either_matches() {
        // The 1st of the month, or any Monday.
        let schedule = parse_cron("0 0 1 * 1").unwrap();
        let after = Utc.with_ymd_and_hms(2026, 11, 24, 0, 0, 0).unwrap(); // a Tuesday
        let first = schedule.next_after(after, chrono_tz::UTC).unwrap();
        assert_eq!((first.month(), first.day(), first.weekday()), (11, 30, Weekday::Mon));
        let second = schedule.next_after(first, chrono_tz::UTC).unwrap();
        assert_eq!((second.month(), second.day()), (12, 1), "the 1st, a Tuesday");
    }

    #[test]
    fn cron_fields_are_read_in_the_configured_timezone() {
        let run = parse_cron("0 9 * * *").unwrap().next_after(thursday(), chrono_tz::Asia::Tokyo).unwrap();
        assert_eq!((run.hour(), run.minute()), (0, 0), "09:00 in Tokyo is midnight UTC");
    }

    #[test]
    fn six_fields_and_macros_are_accepted() {
        assert_eq!(next("30 0 12 * * *", thursday()).second(), 30);
        assert_eq!(next("@daily", thursday()).day(), 20);
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

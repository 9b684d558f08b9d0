//! Standard 5-field cron expressions (`0 */2 * * *`) on top of the `cron` crate, with next
//! runs computed in an IANA timezone. Shared by scheduled jobs and Dream's schedule.
//!
//! The `cron` crate wants a seconds field first, numbers days of the week 1 = Sunday … 7 =
//! Saturday (standard cron: 0 or 7 = Sunday, 1 = Monday), and fires only when *both* day
//! fields match where standard cron fires when *either* does. [`CronExpr::parse`] converts:
//! it prepends `0` seconds, rewrites the day-of-week field as an explicit list in the crate's
//! numbering, and splits an expression that restricts both day fields into two schedules
//! whose earliest run wins.

use std::str::FromStr;

use chrono::{DateTime, Utc};

/// An example shown in error messages.
pub const EXAMPLE: &str = "0 */2 * * *";

/// An expression that is not a cron expression oxibot understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{problem} in {expression:?}; expected 5 fields like \"{EXAMPLE}\" (minute hour day-of-month month day-of-week)"
)]
pub struct ExprError {
    /// The expression as given.
    pub expression: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A parsed cron expression with standard semantics.
#[derive(Debug, Clone)]
pub struct CronExpr {
    /// The crate's schedules; a run of any of them is a run of the expression.
    schedules: Vec<cron::Schedule>,
}

impl CronExpr {
    /// Parses a standard 5-field expression (or a 6-field one with seconds first, or a
    /// `@daily`-style macro).
    pub fn parse(expression: &str) -> Result<CronExpr, ExprError> {
        let bad = |problem: String| ExprError { expression: expression.to_owned(), problem };
        let text = expression.trim();
        if text.starts_with('@') {
            return cron::Schedule::from_str(text)
                .map(|s| CronExpr { schedules: vec![s] })
                .map_err(|e| bad(e.to_string()));
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        let (seconds, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            n => return Err(bad(format!("{n} fields"))),
        };
        let (minute, hour, day, month, weekday) = (rest[0], rest[1], rest[2], rest[3], rest[4]);
        // Said here in the 5-field terms the person wrote; the crate's own words are off by
        // one ("Minutes must be less than 59") and count a seconds field they never wrote.
        check_range("minute", minute, 0, 59)
            .and(check_range("hour", hour, 0, 23))
            .and(check_range("day of month", day, 1, 31))
            .and(check_range("month", month, 1, 12))
            .map_err(bad)?;
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
        Ok(CronExpr { schedules })
    }

    /// The first run strictly after `after`, with the fields read in `timezone`; `None` when
    /// the expression never fires again.
    pub fn next_after(&self, after: DateTime<Utc>, timezone: chrono_tz::Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&timezone);
        self.schedules.iter().filter_map(|s| s.after(&local).next()).map(|t| t.with_timezone(&Utc)).min()
    }
}

/// Every number in `field` (lists, ranges and steps' starts) is within `low..=high`.
fn check_range(name: &str, field: &str, low: u32, high: u32) -> Result<(), String> {
    for part in field.split(',') {
        let range = part.split_once('/').map_or(part, |(range, _)| range);
        for number in range.split('-').filter_map(|atom| atom.parse::<u32>().ok()) {
            if !(low..=high).contains(&number) {
                return Err(format!("{name} {number} is out of range ({low}–{high})"));
            }
        }
    }
    Ok(())
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

    use super::*;

    fn next(expression: &str, after: DateTime<Utc>) -> DateTime<Utc> {
        CronExpr::parse(expression).unwrap().next_after(after, chrono_tz::UTC).unwrap()
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
        let expr = CronExpr::parse("0 0 1 * 1").unwrap();
        let after = Utc.with_ymd_and_hms(2026, 11, 24, 0, 0, 0).unwrap(); // a Tuesday
        let first = expr.next_after(after, chrono_tz::UTC).unwrap();
        assert_eq!((first.month(), first.day(), first.weekday()), (11, 30, Weekday::Mon));
        let second = expr.next_after(first, chrono_tz::UTC).unwrap();
        assert_eq!((second.month(), second.day()), (12, 1), "the 1st, a Tuesday");
    }

    #[test]
    fn fields_are_read_in_the_given_timezone() {
        let run = CronExpr::parse("0 9 * * *").unwrap().next_after(thursday(), chrono_tz::Asia::Tokyo).unwrap();
        assert_eq!((run.hour(), run.minute()), (0, 0), "09:00 in Tokyo is midnight UTC");
    }

    #[test]
    fn six_fields_and_macros_are_accepted() {
        assert_eq!(next("30 0 12 * * *", thursday()).second(), 30);
        assert_eq!(next("@daily", thursday()).day(), 20);
    }

    #[test]
    fn a_bad_expression_says_what_is_wrong_and_what_was_expected() {
        let error = CronExpr::parse("every day").unwrap_err().to_string();
        assert!(error.contains("2 fields") && error.contains("5 fields like"), "{error}");
        let error = CronExpr::parse("0 0 * * 9").unwrap_err().to_string();
        assert!(error.contains("day of week 9"), "{error}");
        assert!(CronExpr::parse("61 * * * *").is_err());
    }

    // Issue 24, item 15: the crate said "Minutes must be less than 59" for minute 60.
    #[test]
    fn an_out_of_range_field_is_named_with_its_range_in_five_field_terms() {
        let error = CronExpr::parse("60 9 * * *").unwrap_err().to_string();
        assert!(error.starts_with("minute 60 is out of range (0–59)"), "{error}");
        let error = CronExpr::parse("0 8-24 * * *").unwrap_err().to_string();
        assert!(error.starts_with("hour 24 is out of range (0–23)"), "{error}");
        let error = CronExpr::parse("0 0 0 * *").unwrap_err().to_string();
        assert!(error.starts_with("day of month 0 is out of range (1–31)"), "{error}");
        let error = CronExpr::parse("0 0 1 13 *").unwrap_err().to_string();
        assert!(error.starts_with("month 13 is out of range (1–12)"), "{error}");
        assert!(CronExpr::parse("59 23 31 12 *").is_ok() && CronExpr::parse("*/15 0-23 1-31 jan-dec *").is_ok());
    }
}

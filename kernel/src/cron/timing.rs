//! Times of a schedule: the first run of a new job, the run after the next, one-shot times
//! written as ISO text, and schedules built from what a user or the model typed.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::expr::{CronExpr, ExprError};
use super::job::{Schedule, ScheduleKind};

/// Input that does not make a schedule; the message is meant for the person or model that
/// typed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not an IANA timezone name.
    #[error("unknown timezone '{0}' (use an IANA name such as Europe/Berlin)")]
    UnknownTimezone(String),
    /// Not a cron expression (the message says why; it is not repeated as a source).
    #[error("invalid cron expression: {0}")]
    Expr(ExprError),
    /// Not an ISO date-time.
    #[error("'{0}' is not an ISO date-time such as 2026-02-12T10:30:00")]
    BadTime(String),
    /// A local time the clocks skip (a daylight-saving gap).
    #[error("'{time}' does not exist in {tz} (the clocks skip it); pick another time")]
    SkippedTime {
        /// The time as given.
        time: String,
        /// The timezone it was read in.
        tz: String,
    },
    /// A one-shot time that has passed.
    #[error("'{time}' is in the past (it is now {now})")]
    InPast {
        /// The time as given.
        time: String,
        /// Now, in the same timezone.
        now: String,
    },
    /// An interval that is not a positive number of seconds.
    #[error("the interval must be a positive number of seconds, got {0}")]
    BadInterval(String),
    /// No schedule given.
    #[error("no schedule given: give an interval in seconds, a cron expression or a time")]
    NoSchedule,
    /// More than one schedule given.
    #[error("several schedules given: give only one of an interval, a cron expression or a time")]
    SeveralSchedules,
    /// A relative time that is not a number with a unit.
    #[error("'{0}' is not a delay such as 30s, 2m, 1h or 1h30m")]
    BadDelay(String),
    /// A schedule of a kind oxibot does not know, or without its value.
    #[error("the schedule of kind '{0}' is incomplete or unknown")]
    Incomplete(String),
}

impl From<ExprError> for ScheduleError {
    fn from(error: ExprError) -> ScheduleError {
        ScheduleError::Expr(error)
    }
}

/// What was typed for a schedule: exactly one of an interval, an expression, a time and a
/// delay must be given.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScheduleInput<'a> {
    /// Run every this many seconds.
    pub every_seconds: Option<i64>,
    /// Run on this cron expression.
    pub cron_expr: Option<&'a str>,
    /// The cron expression's timezone.
    pub tz: Option<&'a str>,
    /// Run once at this ISO time (naive times are in `tz`, else the default timezone).
    pub at: Option<&'a str>,
    /// Run once after this delay from now (`30s`, `2m`, `1h`, `1h30m`, `1d`).
    pub delay: Option<&'a str>,
}

impl ScheduleInput<'_> {
    /// The schedule, checked: the timezone exists, the expression parses, the time is in the
    /// future. A cron schedule stores its effective timezone (`tz`, else `default`); a naive
    /// `at` is read in that timezone; an interval or a delay ignores it.
    pub fn build(&self, now_ms: i64, default: Tz) -> Result<Schedule, ScheduleError> {
        let given = [self.every_seconds.is_some(), self.cron_expr.is_some(), self.at.is_some(), self.delay.is_some()];
        match given.iter().filter(|g| **g).count() {
            0 => return Err(ScheduleError::NoSchedule),
            1 => {}
            _ => return Err(ScheduleError::SeveralSchedules),
        }
        let tz = match self.tz {
            Some(name) => zone(name)?,
            None => default,
        };
        if let Some(seconds) = self.every_seconds {
            if seconds <= 0 || seconds > i64::MAX / 1000 {
                return Err(ScheduleError::BadInterval(seconds.to_string()));
            }
            return Ok(Schedule::every(seconds * 1000));
        }
        if let Some(text) = self.delay {
            return Ok(Schedule::at(now_ms.saturating_add(parse_delay(text)?)));
        }
        if let Some(expr) = self.cron_expr {
            CronExpr::parse(expr)?;
            return Ok(Schedule::cron(expr.trim(), Some(tz.name())));
        }
        let text = self.at.unwrap_or_default();
        let at_ms = parse_at(text, tz)?;
        if at_ms <= now_ms {
            return Err(ScheduleError::InPast { time: text.to_owned(), now: format_ms(now_ms, tz) });
        }
        Ok(Schedule::at(at_ms))
    }
}

/// A delay such as `90s`, `2m`, `1h30m`, `1d`, `2 minutes` or `1 hour`, in milliseconds.
pub fn parse_delay(text: &str) -> Result<i64, ScheduleError> {
    let bad = || ScheduleError::BadDelay(text.to_owned());
    let mut rest = text.trim();
    let mut total: i64 = 0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let count: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = rest[digits..].trim_start();
        let letters = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit_ms = match rest[..letters].to_ascii_lowercase().as_str() {
            "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            _ => return Err(bad()),
        };
        total = count.checked_mul(unit_ms).and_then(|ms| total.checked_add(ms)).ok_or_else(bad)?;
        rest = rest[letters..].trim_start_matches([' ', ',']);
    }
    if total > 0 { Ok(total) } else { Err(bad()) }
}

/// The timezone called `name`.
pub fn zone(name: &str) -> Result<Tz, ScheduleError> {
    name.trim().parse::<Tz>().map_err(|_| ScheduleError::UnknownTimezone(name.to_owned()))
}

/// The timezone a schedule's fields are read in: its own `tz`, else `default`.
pub fn schedule_zone(schedule: &Schedule, default: Tz) -> Result<Tz, ScheduleError> {
    match schedule.tz.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(name) => zone(name),
        None => Ok(default),
    }
}

/// Reads an ISO date-time: with an offset (`2026-02-12T10:30:00+01:00`, `…Z`) it is that
/// instant; without one (`2026-02-12T10:30`, `2026-02-12 10:30:00`, `2026-02-12`) it is a
/// wall-clock time in `tz` (the earlier one when the clocks go back).
pub fn parse_at(text: &str, tz: Tz) -> Result<i64, ScheduleError> {
    let t = text.trim();
    let bad = || ScheduleError::BadTime(text.to_owned());
    if let Ok(instant) = DateTime::parse_from_rfc3339(t) {
        return Ok(instant.timestamp_millis());
    }
    const NAIVE: [&str; 4] = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"];
    if let Some(utc) = t.strip_suffix(['Z', 'z']) {
        let naive = NAIVE.iter().find_map(|f| NaiveDateTime::parse_from_str(utc, f).ok()).ok_or_else(bad)?;
        return Ok(naive.and_utc().timestamp_millis());
    }
    if let Some(instant) = NAIVE.iter().find_map(|f| DateTime::parse_from_str(t, &format!("{f}%:z")).ok()) {
        return Ok(instant.timestamp_millis());
    }
    let naive = NAIVE
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .or_else(|| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)))
        .ok_or_else(bad)?;
    tz.from_local_datetime(&naive)
        .earliest()
        .map(|local| local.timestamp_millis())
        .ok_or_else(|| ScheduleError::SkippedTime { time: text.to_owned(), tz: tz.name().to_owned() })
}

/// The first run of a new or re-enabled job, strictly after `now_ms`; `None` when it will
/// not run (a one-shot time that has passed, a bad schedule).
pub fn first_run(schedule: &Schedule, now_ms: i64, default: Tz) -> Option<i64> {
    match schedule.kind {
        ScheduleKind::At => schedule.at_ms.filter(|at| *at > now_ms),
        ScheduleKind::Every => schedule.every_ms.filter(|every| *every > 0).map(|every| now_ms.saturating_add(every)),
        ScheduleKind::Cron => cron_after(schedule, now_ms, default),
        ScheduleKind::Other(_) => None,
    }
}

/// The run after one that was due at `due_ms`, evaluated at `now_ms`: an interval counts
/// from the due time (so runs do not drift) unless the run overran a whole interval; a cron
/// expression gives its first time after now. One-shot schedules have none.
pub fn run_after(schedule: &Schedule, due_ms: i64, now_ms: i64, default: Tz) -> Option<i64> {
    match schedule.kind {
        ScheduleKind::Every => {
            let every = schedule.every_ms.filter(|every| *every > 0)?;
            let next = due_ms.saturating_add(every);
            Some(if next > now_ms { next } else { now_ms.saturating_add(every) })
        }
        ScheduleKind::Cron => cron_after(schedule, due_ms.max(now_ms), default),
        ScheduleKind::At | ScheduleKind::Other(_) => None,
    }
}

fn cron_after(schedule: &Schedule, after_ms: i64, default: Tz) -> Option<i64> {
    let expr = CronExpr::parse(schedule.expr.as_deref()?).ok()?;
    let tz = schedule_zone(schedule, default).ok()?;
    let after = DateTime::<Utc>::from_timestamp_millis(after_ms)?;
    expr.next_after(after, tz).map(|t| t.timestamp_millis())
}

/// Checks a schedule read from a file or made elsewhere: `Ok` when it can run.
pub fn check(schedule: &Schedule, default: Tz) -> Result<(), ScheduleError> {
    let incomplete = || ScheduleError::Incomplete(schedule.kind.as_str().to_owned());
    match schedule.kind {
        ScheduleKind::At => schedule.at_ms.map(|_| ()).ok_or_else(incomplete),
        ScheduleKind::Every => schedule.every_ms.filter(|e| *e > 0).map(|_| ()).ok_or_else(incomplete),
        ScheduleKind::Cron => {
            CronExpr::parse(schedule.expr.as_deref().ok_or_else(incomplete)?)?;
            schedule_zone(schedule, default).map(|_| ())
        }
        ScheduleKind::Other(_) => Err(incomplete()),
    }
}

/// `ms` as `YYYY-MM-DD HH:MM` with the zone's abbreviation, in `tz`.
pub fn format_ms(ms: i64, tz: Tz) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(t) => t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string(),
        None => format!("{ms} ms"),
    }
}

/// A schedule for people: `every 2h`, `cron 0 9 * * 1-5 (Europe/Berlin)`, `at 2026-02-12 10:30 CET`.
pub fn describe(schedule: &Schedule, tz: Tz) -> String {
    match schedule.kind {
        ScheduleKind::Every => match schedule.every_ms {
            Some(ms) if ms > 0 && ms % 3_600_000 == 0 => format!("every {}h", ms / 3_600_000),
            Some(ms) if ms > 0 && ms % 60_000 == 0 => format!("every {}m", ms / 60_000),
            Some(ms) if ms > 0 && ms % 1000 == 0 => format!("every {}s", ms / 1000),
            Some(ms) => format!("every {ms}ms"),
            None => "every ?".to_owned(),
        },
        ScheduleKind::Cron => match &schedule.tz {
            Some(zone) => format!("cron {} ({zone})", schedule.expr.as_deref().unwrap_or("?")),
            None => format!("cron {}", schedule.expr.as_deref().unwrap_or("?")),
        },
        ScheduleKind::At => match schedule.at_ms {
            Some(ms) => format!("at {}", format_ms(ms, tz)),
            None => "at ?".to_owned(),
        },
        ScheduleKind::Other(ref kind) => kind.clone(),
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Datelike, Timelike, Weekday};
    use chrono_tz::America::New_York;

    use super::*;

    fn ms(y: i32, m: u32, d: u32, h: u32, min: u32) -> i64 {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0).unwrap().timestamp_millis()
    }

    fn utc(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(ms).unwrap()
    }

    #[test]
    fn weekday_mornings_in_new_york_stay_at_nine_local_across_the_dst_change() {
        // Daylight saving time ends on Sunday 2026-11-01: 09:00 is 13:00 UTC before, 14:00 after.
        let schedule = Schedule::cron("0 9 * * 1-5", Some("America/New_York"));
        let friday = ms(2026, 10, 30, 14, 0); // 10:00 in New York
        let monday = utc(first_run(&schedule, friday, chrono_tz::UTC).unwrap());
        assert_eq!((monday.weekday(), monday.day(), monday.hour()), (Weekday::Mon, 2, 14));
        let thursday = ms(2026, 10, 29, 12, 0); // 08:00 in New York, still daylight time
        assert_eq!(utc(first_run(&schedule, thursday, chrono_tz::UTC).unwrap()).hour(), 13);
        let local = monday.with_timezone(&New_York);
        assert_eq!((local.hour(), local.minute()), (9, 0));
    }

    #[test]
    fn a_cron_job_without_its_own_timezone_uses_the_default() {
        let schedule = Schedule::cron("0 9 * * *", None);
        let next = first_run(&schedule, ms(2026, 11, 19, 10, 0), chrono_tz::Asia::Tokyo).unwrap();
        assert_eq!(utc(next).hour(), 0, "09:00 in Tokyo is midnight UTC");
    }

    #[test]
    fn an_interval_counts_from_the_due_time_unless_a_run_overran_it() {
        let schedule = Schedule::every(60_000);
        assert_eq!(first_run(&schedule, 1_000, chrono_tz::UTC), Some(61_000));
        assert_eq!(run_after(&schedule, 61_000, 61_004, chrono_tz::UTC), Some(121_000));
        assert_eq!(run_after(&schedule, 61_000, 500_000, chrono_tz::UTC), Some(560_000));
    }

    #[test]
    fn a_one_shot_time_has_a_first_run_only_while_it_is_ahead() {
        let schedule = Schedule::at(5_000);
        assert_eq!(first_run(&schedule, 4_000, chrono_tz::UTC), Some(5_000));
        assert_eq!(first_run(&schedule, 5_000, chrono_tz::UTC), None);
        assert_eq!(run_after(&schedule, 5_000, 5_001, chrono_tz::UTC), None);
    }

    #[test]
    fn a_naive_time_is_read_in_the_default_timezone_and_an_offset_is_kept() {
        let berlin = chrono_tz::Europe::Berlin;
        assert_eq!(parse_at("2026-07-01T10:30:00", berlin).unwrap(), ms(2026, 7, 1, 8, 30));
        assert_eq!(parse_at("2026-07-01 10:30", berlin).unwrap(), ms(2026, 7, 1, 8, 30));
        assert_eq!(parse_at("2026-07-01T10:30:00+01:00", berlin).unwrap(), ms(2026, 7, 1, 9, 30));
        assert_eq!(parse_at("2026-07-01T10:30:00Z", berlin).unwrap(), ms(2026, 7, 1, 10, 30));
        assert_eq!(parse_at("2026-07-01T10:30Z", berlin).unwrap(), ms(2026, 7, 1, 10, 30));
        assert_eq!(parse_at("2026-07-01", chrono_tz::UTC).unwrap(), ms(2026, 7, 1, 0, 0));
        assert!(matches!(parse_at("tomorrow", berlin), Err(ScheduleError::BadTime(_))));
        assert!(matches!(parse_at("2026-03-29T02:30", berlin), Err(ScheduleError::SkippedTime { .. })));
    }

    #[test]
    fn typed_input_needs_exactly_one_schedule_and_a_valid_one() {
        let now = ms(2026, 11, 24, 12, 0);
        let build = |input: ScheduleInput| input.build(now, chrono_tz::UTC);
        assert_eq!(build(ScheduleInput::default()), Err(ScheduleError::NoSchedule));
        let two = ScheduleInput { every_seconds: Some(5), cron_expr: Some("* * * * *"), ..Default::default() };
        assert_eq!(build(two), Err(ScheduleError::SeveralSchedules));
        let tz_with_every = ScheduleInput { every_seconds: Some(5), tz: Some("UTC"), ..Default::default() };
        assert_eq!(build(tz_with_every), Ok(Schedule::every(5_000)), "an interval ignores the timezone");
        let mars = ScheduleInput { cron_expr: Some("0 9 * * *"), tz: Some("Mars/Base"), ..Default::default() };
        assert_eq!(build(mars), Err(ScheduleError::UnknownTimezone("Mars/Base".into())));
        assert!(matches!(
            build(ScheduleInput { cron_expr: Some("0 9 * *"), ..Default::default() }),
            Err(ScheduleError::Expr(_))
        ));
        let past = ScheduleInput { at: Some("2026-11-24T11:59:00"), ..Default::default() };
        assert!(matches!(build(past), Err(ScheduleError::InPast { .. })));
        assert!(matches!(
            build(ScheduleInput { every_seconds: Some(0), ..Default::default() }),
            Err(ScheduleError::BadInterval(_))
        ));
        let cron = build(ScheduleInput { cron_expr: Some(" 0 9 * * 1-5 "), ..Default::default() }).unwrap();
        assert_eq!((cron.expr.as_deref(), cron.tz.as_deref()), (Some("0 9 * * 1-5"), Some("UTC")));
        assert_eq!(
            build(ScheduleInput { every_seconds: Some(90), ..Default::default() }).unwrap(),
            Schedule::every(90_000)
        );
    }

    #[test]
    fn a_time_with_a_timezone_is_read_in_it_and_a_delay_counts_from_now() {
        let now = ms(2026, 11, 24, 12, 0);
        let build = |input: ScheduleInput| input.build(now, chrono_tz::UTC);
        let tokyo = ScheduleInput { at: Some("2026-11-25T09:00"), tz: Some("Asia/Tokyo"), ..Default::default() };
        assert_eq!(build(tokyo), Ok(Schedule::at(ms(2026, 11, 25, 0, 0))));
        let soon = ScheduleInput { delay: Some("2m"), tz: Some("Europe/Berlin"), ..Default::default() };
        assert_eq!(build(soon), Ok(Schedule::at(now + 120_000)));
        assert_eq!(parse_delay("1h30m"), Ok(5_400_000));
        assert_eq!(parse_delay("2 minutes"), Ok(120_000));
        assert_eq!(parse_delay(" 1 hour, 5 min"), Ok(3_900_000));
        for bad in ["", "soon", "0m", "5", "m", "2 fortnights"] {
            assert_eq!(parse_delay(bad), Err(ScheduleError::BadDelay(bad.into())), "{bad:?}");
        }
    }

    #[test]
    fn schedules_are_described_for_people() {
        assert_eq!(describe(&Schedule::every(7_200_000), chrono_tz::UTC), "every 2h");
        assert_eq!(describe(&Schedule::every(90_000), chrono_tz::UTC), "every 90s");
        assert_eq!(
            describe(&Schedule::cron("0 9 * * *", Some("Europe/Berlin")), chrono_tz::UTC),
            "cron 0 9 * * * (Europe/Berlin)"
        );
        assert_eq!(
            describe(&Schedule::at(ms(2026, 7, 1, 8, 30)), chrono_tz::Europe::Berlin),
            "at 2026-07-01 10:30 CEST"
        );
    }
}

//! When a routine fires: the schedule forms a person types, parsed once and
//! asked for the next fire time again and again.
//!
//! People write `every 30m`, `weekdays at 9am` or `in 2h`, and sometimes a
//! cron line or an ISO time; we take all of these. Times of day belong to the
//! user's time zone, not to UTC, so `every day at 18:30` in Paris stays 18:30
//! on the wall clock across a daylight-saving change (the gap in UTC is then
//! 23 or 25 hours). A local time that does not exist that day (the spring
//! forward gap) fires at the first instant after the gap; one that happens
//! twice (fall back) fires once, at the first.
//!
//! A schedule is stored as what the user wrote, its kind and its time zone
//! (plus the instant, for a once-schedule, since `in 30m` means something
//! else tomorrow), and is re-parsed from that when loaded.

use std::fmt::Write as _;
use std::str::FromStr;
use std::time::Duration;

use chrono::{
    DateTime, Datelike, Days, LocalResult, NaiveDateTime, NaiveTime, SubsecRound, TimeDelta,
    TimeZone, Timelike, Utc, Weekday,
};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;
use serde::{Deserialize, Serialize};

/// Every form a schedule may take, with an example; shown in parse errors.
pub const FORMS: &str = "\
Accepted schedules (times of day are in your time zone):
  every 30m, every 2h, every 1d, every 90 minutes   repeat at a fixed interval (m/min/minutes, h/hours, d/days, w/weeks; at least 1 minute)
  in 30m, in 2 hours                                once, that long from now
  every day at 18:30, daily at 7am                  every day at a time of day
  weekdays at 9am, weekends at 10:30                Monday to Friday, or Saturday and Sunday
  every monday at 9am, every mon and thu at 17:00   on given days of the week
  0 9 * * 1-5                                       cron: minute hour day-of-month month day-of-week
  2026-12-01T09:00:00Z, 2026-12-01 09:00            once, at that instant (without an offset: your time zone)";

/// The shortest interval an `every` schedule may have.
pub const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// The longest interval an `every` schedule may have (a year): past it the
/// next runs soon fall beyond the dates the clock can hold.
pub const MAX_INTERVAL: Duration = Duration::from_secs(366 * 86_400);

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The text matches none of the accepted forms.
    #[error("`{text}` is not a schedule I understand.\n{forms}", forms = FORMS)]
    Unrecognized {
        /// What was given.
        text: String,
    },
    /// The text has a recognised form but a bad part.
    #[error("`{text}`: {reason}.\n{forms}", forms = FORMS)]
    Invalid {
        /// What was given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A once-schedule whose time has passed.
    #[error("`{text}` is in the past ({at}, and it is now {now}): give a time still to come, or a repeating schedule")]
    Past {
        /// What was given.
        text: String,
        /// The instant it names.
        at: DateTime<Utc>,
        /// The time it was parsed at.
        now: DateTime<Utc>,
    },
    /// A stored schedule that no longer reads back (a corrupt row).
    #[error("stored schedule `{text}` ({kind}) cannot be read back: {reason}")]
    Stored {
        /// The stored text.
        text: String,
        /// The stored kind.
        kind: String,
        /// What went wrong.
        reason: String,
    },
}

/// A parsed schedule: what the user wrote, in which time zone, and what it means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Stored", into = "Stored")]
pub struct Schedule {
    text: String,
    tz: Tz,
    kind: ScheduleKind,
}

/// What a schedule means.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleKind {
    /// At a fixed interval, counted from the previous occurrence.
    Every(Duration),
    /// Once, at this instant.
    Once(DateTime<Utc>),
    /// On these days of the week (Monday first, no repeats), at this local time.
    Weekly {
        /// The days it fires on.
        days: Vec<Weekday>,
        /// The local time of day.
        at: NaiveTime,
    },
    /// A five-field cron expression, read in the schedule's time zone.
    Cron {
        /// The expression as given.
        expr: String,
        /// The parsed expression.
        cron: Box<Cron>,
    },
}

/// Parses `text` as a schedule in the user's time zone `tz`, `now` being
/// the current time (for `in 30m`, and to refuse a time already past).
///
/// # Examples
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use troupe_actors::routine::schedule::parse;
///
/// let now = Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap();
/// let daily = parse("every day at 18:30", now, chrono_tz::Europe::Paris).unwrap();
/// assert_eq!(daily.next_after(now), Some(Utc.with_ymd_and_hms(2026, 3, 2, 17, 30, 0).unwrap()));
/// ```
pub fn parse(text: &str, now: DateTime<Utc>, tz: Tz) -> Result<Schedule, ScheduleError> {
    let text = text.trim().to_string();
    let now = now.trunc_subsecs(0);
    let kind = parse_kind(&text, now, tz)?;
    if let ScheduleKind::Once(at) = kind {
        if at <= now {
            return Err(ScheduleError::Past { text, at, now });
        }
    }
    let schedule = Schedule { text, tz, kind };
    if schedule.next_after(now).is_none() {
        return Err(ScheduleError::Invalid {
            text: schedule.text,
            reason: "it never fires from now on".into(),
        });
    }
    Ok(schedule)
}

impl Schedule {
    /// What the user wrote (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The time zone its times of day are read in.
    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// What it means.
    pub fn kind(&self) -> &ScheduleKind {
        &self.kind
    }

    /// Whether it fires only once.
    pub fn is_once(&self) -> bool {
        matches!(self.kind, ScheduleKind::Once(_))
    }

    /// The first occurrence strictly after `after`; `None` once a
    /// once-schedule has fired.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            ScheduleKind::Every(every) => {
                let step = TimeDelta::from_std(*every).ok()?;
                after.checked_add_signed(step)
            }
            ScheduleKind::Once(at) => (*at > after).then_some(*at),
            ScheduleKind::Weekly { days, at } => {
                let today = after.with_timezone(&self.tz).date_naive();
                // A week and a day covers every weekday even when today's
                // occurrence has already passed.
                (0..=8u64).find_map(|offset| {
                    let date = today.checked_add_days(Days::new(offset))?;
                    if !days.contains(&date.weekday()) {
                        return None;
                    }
                    resolve_local(self.tz, date.and_time(*at)).filter(|t| *t > after)
                })
            }
            ScheduleKind::Cron { cron, .. } => cron
                .find_next_occurrence(&after.with_timezone(&self.tz), false)
                .ok()
                .map(|t| t.with_timezone(&Utc)),
        }
    }

    /// A sentence saying when it fires, e.g. `weekdays at 09:00 (America/New_York)`.
    pub fn describe(&self) -> String {
        let tz = self.tz.name();
        match &self.kind {
            ScheduleKind::Every(every) => format!("every {}", describe_duration(*every)),
            ScheduleKind::Once(at) => format!(
                "once, on {} ({tz})",
                at.with_timezone(&self.tz).format("%Y-%m-%d at %H:%M")
            ),
            ScheduleKind::Weekly { days, at } => {
                format!("{} at {} ({tz})", describe_days(days), at.format("%H:%M"))
            }
            ScheduleKind::Cron { expr, .. } => format!("on the cron schedule `{expr}` ({tz})"),
        }
    }

    /// The kind's name, as stored: `every`, `once`, `weekly` or `cron`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ScheduleKind::Every(_) => "every",
            ScheduleKind::Once(_) => "once",
            ScheduleKind::Weekly { .. } => "weekly",
            ScheduleKind::Cron { .. } => "cron",
        }
    }
}

/// The stored form of a schedule: its text, kind and time zone, and the
/// instant of a once-schedule.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    text: String,
    kind: String,
    tz: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<DateTime<Utc>>,
}

impl From<Schedule> for Stored {
    fn from(s: Schedule) -> Self {
        let at = match s.kind {
            ScheduleKind::Once(at) => Some(at),
            _ => None,
        };
        Stored {
            kind: s.kind_name().to_string(),
            text: s.text,
            tz: s.tz.name().to_string(),
            at,
        }
    }
}

impl TryFrom<Stored> for Schedule {
    type Error = ScheduleError;

    fn try_from(s: Stored) -> Result<Self, Self::Error> {
        let bad = |reason: String| ScheduleError::Stored {
            text: s.text.clone(),
            kind: s.kind.clone(),
            reason,
        };
        let tz = Tz::from_str(&s.tz).map_err(|e| bad(format!("time zone: {e}")))?;
        let kind = match (s.kind.as_str(), s.at) {
            ("once", Some(at)) => ScheduleKind::Once(at),
            ("once", None) => return Err(bad("a once-schedule without its instant".into())),
            (_, _) => {
                // Interval, weekly and cron forms do not depend on `now`.
                let kind = parse_kind(&s.text, DateTime::UNIX_EPOCH, tz)
                    .map_err(|e| bad(e.to_string()))?;
                if matches!(kind, ScheduleKind::Once(_)) {
                    return Err(bad("the text reads as a once-schedule".into()));
                }
                kind
            }
        };
        let schedule = Schedule {
            text: s.text.clone(),
            tz,
            kind,
        };
        if schedule.kind_name() != s.kind {
            return Err(bad(format!("the text reads as `{}`", schedule.kind_name())));
        }
        Ok(schedule)
    }
}

/// The instant a local wall-clock time names in `tz`: the earlier one when
/// it happens twice (fall back), the first instant after the gap when it
/// does not happen at all (spring forward).
pub fn resolve_local(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => {
            // Gaps start and end on whole minutes; walk minute by minute
            // (a gap is at most a few hours, a day at the very most).
            let mut probe = local.with_second(0)?.with_nanosecond(0)?;
            for _ in 0..(24 * 60) {
                probe = probe.checked_add_signed(TimeDelta::minutes(1))?;
                if let Some(t) = tz.from_local_datetime(&probe).earliest() {
                    return Some(t.with_timezone(&Utc));
                }
            }
            None
        }
    }
}

fn parse_kind(text: &str, now: DateTime<Utc>, tz: Tz) -> Result<ScheduleKind, ScheduleError> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let norm = words.join(" ");
    let unrecognized = || ScheduleError::Unrecognized {
        text: text.to_string(),
    };
    let invalid = |reason: String| ScheduleError::Invalid {
        text: text.to_string(),
        reason,
    };
    if norm.is_empty() {
        return Err(unrecognized());
    }
    if let Some(at) = parse_instant(text.trim(), tz) {
        return at.map(ScheduleKind::Once).ok_or_else(|| {
            invalid("that local time cannot be placed in the time zone".to_string())
        });
    }
    if looks_like_cron(&words) {
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .build()
            .parse(&norm)
            .map_err(|e| invalid(format!("not a valid cron expression ({e})")))?;
        return Ok(ScheduleKind::Cron {
            expr: norm,
            cron: Box::new(cron),
        });
    }
    if let Some(rest) = norm.strip_prefix("in ") {
        let span = parse_duration(rest).ok_or_else(unrecognized)?;
        let delta = TimeDelta::from_std(span).map_err(|_| invalid("too far away".into()))?;
        let at = now
            .checked_add_signed(delta)
            .ok_or_else(|| invalid("too far away".into()))?;
        return Ok(ScheduleKind::Once(at));
    }
    if let Some((days, time)) = norm.rsplit_once(" at ") {
        let days = parse_days(days).ok_or_else(unrecognized)?;
        let at = parse_time_of_day(time).ok_or_else(|| {
            invalid(format!(
                "`{time}` is not a time of day: write it like 9am, 9:30pm or 17:30"
            ))
        })?;
        return Ok(ScheduleKind::Weekly { days, at });
    }
    if let Some(rest) = norm.strip_prefix("every ") {
        let every = parse_duration(rest).ok_or_else(unrecognized)?;
        if every < MIN_INTERVAL {
            return Err(invalid(format!(
                "every {} is too often: the shortest interval is 1 minute",
                describe_duration(every)
            )));
        }
        if every > MAX_INTERVAL {
            return Err(invalid(format!(
                "every {} is too long: the longest interval is 366 days; for a single run, \
                 write its date (2027-03-01 09:00) or `in …`",
                describe_duration(every)
            )));
        }
        return Ok(ScheduleKind::Every(every));
    }
    Err(unrecognized())
}

/// An ISO date and time: `Some(Some(t))` when it is one, `Some(None)` when
/// it is a local time that cannot be placed, `None` when it is not ISO.
fn parse_instant(text: &str, tz: Tz) -> Option<Option<DateTime<Utc>>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(Some(t.with_timezone(&Utc)));
    }
    const LOCAL: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ];
    LOCAL
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .map(|local| resolve_local(tz, local))
}

/// Five fields of cron characters, or an `@daily`-style nickname.
fn looks_like_cron(words: &[&str]) -> bool {
    match words {
        [nick] => nick.starts_with('@'),
        [first, ..] if words.len() == 5 => {
            first
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == '*' || c == '?')
                && words.iter().all(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "*,/-?#".contains(c))
                })
        }
        _ => false,
    }
}

/// `30m`, `2 hours`, `1h30m`, `an hour`, `day` (one of the unit).
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let text = match text.split_once(' ') {
        Some(("a" | "an", rest)) => rest,
        _ => text,
    };
    let compact: String = text
        .split_whitespace()
        .filter(|w| *w != "and")
        .collect::<Vec<_>>()
        .join("");
    let mut chars = compact.chars().peekable();
    let mut total: u64 = 0;
    let mut parts = 0;
    while chars.peek().is_some() {
        let digits: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_digit)).collect();
        let unit: String =
            std::iter::from_fn(|| chars.next_if(char::is_ascii_alphabetic)).collect();
        let count: u64 = if digits.is_empty() {
            // A bare unit (`every hour`) means one of it, and only alone.
            if parts > 0 || chars.peek().is_some() {
                return None;
            }
            1
        } else {
            digits.parse().ok()?
        };
        let seconds = unit_seconds(&unit)?;
        total = total.checked_add(count.checked_mul(seconds)?)?;
        parts += 1;
    }
    (parts > 0 && total > 0).then(|| Duration::from_secs(total))
}

fn unit_seconds(unit: &str) -> Option<u64> {
    Some(match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "wk" | "wks" | "week" | "weeks" => 7 * 86_400,
        _ => return None,
    })
}

/// `every day`, `daily`, `weekdays`, `every mon and thu`, `on fridays`, …
fn parse_days(text: &str) -> Option<Vec<Weekday>> {
    let mut text = text.trim();
    for prefix in ["every ", "each ", "on "] {
        if let Some(rest) = text.strip_prefix(prefix) {
            text = rest;
            break;
        }
    }
    let mut days: Vec<Weekday> = Vec::new();
    for word in text
        .split(|c: char| c == ',' || c == '&' || c.is_whitespace())
        .filter(|w| !w.is_empty() && *w != "and")
    {
        match word {
            "day" | "days" | "daily" | "everyday" => days.extend(ALL_DAYS),
            "weekday" | "weekdays" => days.extend(&ALL_DAYS[..5]),
            "weekend" | "weekends" => days.extend(&ALL_DAYS[5..]),
            other => days.push(parse_weekday(other)?),
        }
    }
    if days.is_empty() {
        return None;
    }
    days.sort_by_key(Weekday::num_days_from_monday);
    days.dedup();
    Some(days)
}

const ALL_DAYS: [Weekday; 7] = [
    Weekday::Mon,
    Weekday::Tue,
    Weekday::Wed,
    Weekday::Thu,
    Weekday::Fri,
    Weekday::Sat,
    Weekday::Sun,
];

fn parse_weekday(word: &str) -> Option<Weekday> {
    let word = word.strip_suffix('s').unwrap_or(word);
    Some(match word {
        "mon" | "monday" => Weekday::Mon,
        "tue" | "tues" | "tuesday" => Weekday::Tue,
        "wed" | "weds" | "wednesday" => Weekday::Wed,
        "thu" | "thur" | "thurs" | "thursday" => Weekday::Thu,
        "fri" | "friday" => Weekday::Fri,
        "sat" | "saturday" => Weekday::Sat,
        "sun" | "sunday" => Weekday::Sun,
        _ => return None,
    })
}

/// `9am`, `9 am`, `9:30pm`, `17:30`, `noon`, `midnight`.
fn parse_time_of_day(text: &str) -> Option<NaiveTime> {
    let compact: String = text.split_whitespace().collect();
    match compact.as_str() {
        "noon" | "midday" => return NaiveTime::from_hms_opt(12, 0, 0),
        "midnight" => return NaiveTime::from_hms_opt(0, 0, 0),
        _ => {}
    }
    let (clock, meridiem) = if let Some(c) = compact.strip_suffix("am") {
        (c, Some(false))
    } else if let Some(c) = compact.strip_suffix("pm") {
        (c, Some(true))
    } else {
        (compact.as_str(), None)
    };
    let number = |s: &str| -> Option<u32> {
        let ok = (1..=2).contains(&s.len()) && s.chars().all(|c| c.is_ascii_digit());
        ok.then(|| s.parse().ok()).flatten()
    };
    let (hour, minute) = match clock.split_once([':', '.', 'h']) {
        Some((h, m)) if m.len() == 2 => (number(h)?, number(m)?),
        Some(_) => return None,
        // A bare hour needs am or pm: `at 7` could be either.
        None if meridiem.is_some() => (number(clock)?, 0),
        None => return None,
    };
    let hour = match meridiem {
        Some(pm) => {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour % 12 + if pm { 12 } else { 0 }
        }
        None => hour,
    };
    NaiveTime::from_hms_opt(hour, minute, 0)
}

fn describe_days(days: &[Weekday]) -> String {
    if days == ALL_DAYS {
        return "every day".into();
    }
    if days == &ALL_DAYS[..5] {
        return "weekdays".into();
    }
    if days == &ALL_DAYS[5..] {
        return "weekends".into();
    }
    let names: Vec<&str> = days.iter().map(|d| weekday_name(*d)).collect();
    match names.split_last() {
        Some((last, [])) => format!("every {last}"),
        Some((last, rest)) => format!("every {} and {last}", rest.join(", ")),
        None => "never".into(),
    }
}

fn weekday_name(day: Weekday) -> &'static str {
    match day {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// `30 minutes`, `2 hours`, `1 day 6 hours`, `week`.
fn describe_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    let mut out = String::new();
    for (unit, size) in [
        ("week", 7 * 86_400),
        ("day", 86_400),
        ("hour", 3600),
        ("minute", 60),
        ("second", 1),
    ] {
        let n = secs / size;
        secs %= size;
        if n > 0 {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "{n} {unit}{}", if n == 1 { "" } else { "s" });
        }
    }
    out
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;

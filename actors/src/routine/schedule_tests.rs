use chrono::{NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::America::New_York;
use chrono_tz::Asia::Kolkata;
use chrono_tz::Europe::Paris;
use chrono_tz::UTC;
use pretty_assertions::assert_eq;

use super::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

/// The first `n` occurrences after `from`.
fn fires(s: &Schedule, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut at = from;
    while out.len() < n {
        let Some(next) = s.next_after(at) else { break };
        out.push(next);
        at = next;
    }
    out
}

#[test]
fn every_forms_repeat_at_their_interval() {
    let now = utc(2026, 1, 10, 12, 0);
    for (text, secs) in [
        ("every 30m", 1800),
        ("every 30 min", 1800),
        ("Every 90 minutes", 5400),
        ("every 2h", 7200),
        ("every 2 hours", 7200),
        ("every hour", 3600),
        ("every 1h30m", 5400),
        ("every 1d", 86_400),
        ("every 3 days", 3 * 86_400),
        ("every week", 7 * 86_400),
    ] {
        let s = parse(text, now, Paris).unwrap();
        assert_eq!(
            s.kind(),
            &ScheduleKind::Every(Duration::from_secs(secs)),
            "{text}"
        );
        let step = TimeDelta::seconds(secs as i64);
        assert_eq!(
            fires(&s, now, 3),
            vec![now + step, now + step * 2, now + step * 3],
            "{text}"
        );
    }
}

#[test]
fn every_under_a_minute_is_refused() {
    let err = parse("every 45s", utc(2026, 1, 10, 12, 0), UTC).unwrap_err();
    assert_eq!(
        err,
        ScheduleError::Invalid {
            text: "every 45s".into(),
            reason: "every 45 seconds is too often: the shortest interval is 1 minute".into()
        }
    );
    assert!(err.to_string().contains(FORMS));
}

/// Found by the `schedule` fuzz target: `every 9999999w` was accepted, fired
/// once in the year 193679 and then had no next run (the date overflowed),
/// so a repeating routine silently stopped.
#[test]
fn every_over_a_year_is_refused() {
    let now = utc(2026, 1, 10, 12, 0);
    for text in ["every 9999999W9s", "every 53 weeks", "every 367 days"] {
        let err = parse(text, now, UTC).unwrap_err();
        assert!(
            matches!(&err, ScheduleError::Invalid { reason, .. } if reason.contains("too long: the longest interval is 366 days")),
            "{text}: {err}"
        );
    }
    let yearly = parse("every 52 weeks", now, UTC).unwrap();
    assert_eq!(yearly.next_after(now), Some(now + TimeDelta::weeks(52)));
}

#[test]
fn in_is_once_relative_to_now() {
    let now = utc(2026, 1, 10, 12, 0) + TimeDelta::milliseconds(250);
    let s = parse("in 30m", now, Kolkata).unwrap();
    let at = utc(2026, 1, 10, 12, 30);
    assert_eq!(
        s.kind(),
        &ScheduleKind::Once(at),
        "sub-seconds of now are dropped"
    );
    assert_eq!(s.next_after(now), Some(at));
    assert_eq!(
        s.next_after(at),
        None,
        "a once-schedule that has fired is over"
    );
    assert_eq!(
        parse("in 2 hours", now, UTC).unwrap().kind(),
        &ScheduleKind::Once(utc(2026, 1, 10, 14, 0))
    );
    assert_eq!(
        parse("in an hour", now, UTC).unwrap().kind(),
        &ScheduleKind::Once(utc(2026, 1, 10, 13, 0))
    );
}

#[test]
fn every_day_at_is_local_time_in_paris() {
    let now = utc(2026, 1, 10, 12, 0); // 13:00 in Paris (UTC+1)
    let s = parse("every day at 18:30", now, Paris).unwrap();
    assert_eq!(
        fires(&s, now, 3),
        vec![
            utc(2026, 1, 10, 17, 30),
            utc(2026, 1, 11, 17, 30),
            utc(2026, 1, 12, 17, 30)
        ]
    );
    let s = parse("daily at 7am", now, Paris).unwrap();
    assert_eq!(
        fires(&s, now, 2),
        vec![utc(2026, 1, 11, 6, 0), utc(2026, 1, 12, 6, 0)]
    );
}

#[test]
fn weekdays_at_skip_the_weekend_in_new_york() {
    let friday = utc(2026, 1, 9, 15, 0); // Friday 10:00 in New York (UTC-5)
    let s = parse("weekdays at 9am", friday, New_York).unwrap();
    assert_eq!(
        s.kind(),
        &ScheduleKind::Weekly {
            days: vec![
                Weekday::Mon,
                Weekday::Tue,
                Weekday::Wed,
                Weekday::Thu,
                Weekday::Fri
            ],
            at: NaiveTime::from_hms_opt(9, 0, 0).unwrap()
        }
    );
    assert_eq!(
        fires(&s, friday, 2),
        vec![utc(2026, 1, 12, 14, 0), utc(2026, 1, 13, 14, 0)]
    );
    let s = parse("weekdays at 17:30", friday, New_York).unwrap();
    assert_eq!(
        fires(&s, friday, 2),
        vec![utc(2026, 1, 9, 22, 30), utc(2026, 1, 12, 22, 30)]
    );
}

#[test]
fn named_days_in_kolkata() {
    let monday = utc(2026, 1, 12, 0, 0); // Monday 05:30 in Kolkata (UTC+5:30)
    let s = parse("every monday at 9am", monday, Kolkata).unwrap();
    assert_eq!(
        fires(&s, monday, 2),
        vec![utc(2026, 1, 12, 3, 30), utc(2026, 1, 19, 3, 30)]
    );
    let s = parse("every Mon and Thu at 9:15 pm", monday, Kolkata).unwrap();
    assert_eq!(
        fires(&s, monday, 3),
        vec![
            utc(2026, 1, 12, 15, 45),
            utc(2026, 1, 15, 15, 45),
            utc(2026, 1, 19, 15, 45)
        ]
    );
    let s = parse("weekends at noon", monday, Kolkata).unwrap();
    assert_eq!(
        fires(&s, monday, 2),
        vec![utc(2026, 1, 17, 6, 30), utc(2026, 1, 18, 6, 30)]
    );
}

#[test]
fn daily_time_stays_on_the_wall_clock_across_dst_in_paris() {
    // Spring forward: 2026-03-29 02:00 -> 03:00 (UTC+1 -> UTC+2).
    let s = parse("every day at 18:30", utc(2026, 3, 27, 0, 0), Paris).unwrap();
    let spring = fires(&s, utc(2026, 3, 27, 0, 0), 4);
    assert_eq!(
        spring,
        vec![
            utc(2026, 3, 27, 17, 30),
            utc(2026, 3, 28, 17, 30),
            utc(2026, 3, 29, 16, 30),
            utc(2026, 3, 30, 16, 30)
        ]
    );
    assert_eq!(spring[2] - spring[1], TimeDelta::hours(23));
    // Fall back: 2026-10-25 03:00 -> 02:00 (UTC+2 -> UTC+1).
    let fall = fires(&s, utc(2026, 10, 24, 0, 0), 2);
    assert_eq!(
        fall,
        vec![utc(2026, 10, 24, 16, 30), utc(2026, 10, 25, 17, 30)]
    );
    assert_eq!(fall[1] - fall[0], TimeDelta::hours(25));
}

#[test]
fn daily_time_across_dst_in_new_york() {
    // Spring forward 2026-03-08, fall back 2026-11-01.
    let s = parse("daily at 9am", utc(2026, 3, 6, 0, 0), New_York).unwrap();
    assert_eq!(
        fires(&s, utc(2026, 3, 7, 0, 0), 2),
        vec![utc(2026, 3, 7, 14, 0), utc(2026, 3, 8, 13, 0)]
    );
    assert_eq!(
        fires(&s, utc(2026, 10, 31, 0, 0), 2),
        vec![utc(2026, 10, 31, 13, 0), utc(2026, 11, 1, 14, 0)]
    );
}

#[test]
fn a_time_in_the_spring_gap_fires_when_the_gap_ends() {
    // 02:30 does not exist in Paris on 2026-03-29: the clock jumps from
    // 02:00 to 03:00, i.e. at 01:00 UTC.
    let s = parse("daily at 2:30am", utc(2026, 3, 27, 0, 0), Paris).unwrap();
    assert_eq!(
        fires(&s, utc(2026, 3, 28, 0, 0), 3),
        vec![
            utc(2026, 3, 28, 1, 30),
            utc(2026, 3, 29, 1, 0),
            utc(2026, 3, 30, 0, 30)
        ]
    );
}

#[test]
fn an_ambiguous_time_at_fall_back_fires_once() {
    // 02:30 happens twice in Paris on 2026-10-25: at 00:30 UTC (summer
    // time) and at 01:30 UTC (winter time). It fires at the first only.
    let s = parse("daily at 02:30", utc(2026, 10, 20, 0, 0), Paris).unwrap();
    assert_eq!(
        fires(&s, utc(2026, 10, 24, 0, 0), 3),
        vec![
            utc(2026, 10, 24, 0, 30),
            utc(2026, 10, 25, 0, 30),
            utc(2026, 10, 26, 1, 30)
        ]
    );
}

#[test]
fn cron_is_read_in_the_users_time_zone() {
    let friday = utc(2026, 1, 9, 15, 0);
    let s = parse("0 9 * * 1-5", friday, New_York).unwrap();
    assert_eq!(s.kind_name(), "cron");
    assert_eq!(
        fires(&s, friday, 2),
        vec![utc(2026, 1, 12, 14, 0), utc(2026, 1, 13, 14, 0)]
    );
    let s = parse("*/15 * * * *", utc(2026, 1, 9, 10, 7), UTC).unwrap();
    assert_eq!(
        fires(&s, utc(2026, 1, 9, 10, 7), 2),
        vec![utc(2026, 1, 9, 10, 15), utc(2026, 1, 9, 10, 30)]
    );
    let s = parse("30 18 * * *", utc(2026, 3, 28, 0, 0), Paris).unwrap();
    assert_eq!(
        fires(&s, utc(2026, 3, 28, 0, 0), 2),
        vec![utc(2026, 3, 28, 17, 30), utc(2026, 3, 29, 16, 30)]
    );
    let s = parse("30 2 * * *", utc(2026, 3, 28, 12, 0), Paris).unwrap();
    assert_eq!(
        s.next_after(utc(2026, 3, 28, 12, 0)),
        Some(utc(2026, 3, 29, 1, 0)),
        "a cron time in the spring gap fires when the gap ends"
    );
    assert_eq!(
        fires(&s, utc(2026, 10, 24, 12, 0), 2),
        vec![utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
        "a cron time that happens twice at fall back fires once"
    );
}

#[test]
fn iso_times_are_once() {
    let now = utc(2026, 1, 10, 12, 0);
    let s = parse("2026-12-01T09:00:00Z", now, Paris).unwrap();
    assert_eq!(s.kind(), &ScheduleKind::Once(utc(2026, 12, 1, 9, 0)));
    let s = parse("2026-12-01T09:00:00+05:30", now, Paris).unwrap();
    assert_eq!(s.kind(), &ScheduleKind::Once(utc(2026, 12, 1, 3, 30)));
    let s = parse("2026-12-01 09:00", now, Paris).unwrap();
    assert_eq!(
        s.kind(),
        &ScheduleKind::Once(utc(2026, 12, 1, 8, 0)),
        "local time in Paris"
    );
    let s = parse("2026-12-01T09:00", now, Kolkata).unwrap();
    assert_eq!(
        s.kind(),
        &ScheduleKind::Once(utc(2026, 12, 1, 3, 30)),
        "local time in Kolkata"
    );
    assert_eq!(s.next_after(now), Some(utc(2026, 12, 1, 3, 30)));
}

#[test]
fn a_past_iso_time_is_refused() {
    let now = utc(2026, 1, 10, 12, 0);
    let err = parse("2026-01-10 12:59", now, Paris).unwrap_err();
    assert_eq!(
        err,
        ScheduleError::Past {
            text: "2026-01-10 12:59".into(),
            at: utc(2026, 1, 10, 11, 59),
            now
        }
    );
    assert!(err.to_string().contains("is in the past"), "{err}");
}

#[test]
fn bad_schedules_show_every_accepted_form() {
    let now = utc(2026, 1, 10, 12, 0);
    for text in [
        "",
        "whenever",
        "every",
        "every blursday",
        "tomorrow",
        "every blursday at 9am",
        "weekdays at 25:00",
        "daily at 7",
        "daily at 13pm",
        "0 99 * * *",
        "in",
        "every 0m",
    ] {
        let err = parse(text, now, UTC).unwrap_err();
        let message = err.to_string();
        assert!(message.contains(FORMS), "{text}: {message}");
    }
    for example in [
        "every 30m",
        "in 30m",
        "every day at 18:30",
        "daily at 7am",
        "weekdays at 9am",
        "every monday at 9am",
        "0 9 * * 1-5",
        "2026-12-01T09:00:00Z",
        "2026-12-01 09:00",
    ] {
        assert!(FORMS.contains(example), "{example}");
        assert!(
            parse(example, now, UTC).is_ok(),
            "the example `{example}` parses"
        );
    }
    assert_eq!(
        parse("whenever", now, UTC).unwrap_err().to_string(),
        format!("`whenever` is not a schedule I understand.\n{FORMS}")
    );
    assert_eq!(
        parse("daily at 7", now, UTC).unwrap_err(),
        ScheduleError::Invalid {
            text: "daily at 7".into(),
            reason: "`7` is not a time of day: write it like 9am, 9:30pm or 17:30".into()
        }
    );
}

#[test]
fn a_cron_that_never_fires_is_refused() {
    let err = parse("0 0 30 2 *", utc(2026, 1, 10, 12, 0), UTC).unwrap_err();
    assert!(matches!(err, ScheduleError::Invalid { .. }), "{err}");
}

#[test]
fn schedules_store_as_text_kind_and_zone() {
    let now = utc(2026, 1, 10, 12, 0);
    let daily = parse("every day at 18:30", now, Paris).unwrap();
    let json = serde_json::to_value(&daily).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"text": "every day at 18:30", "kind": "weekly", "tz": "Europe/Paris"})
    );
    let once = parse("in 30m", now, Kolkata).unwrap();
    let json = serde_json::to_value(&once).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "text": "in 30m", "kind": "once", "tz": "Asia/Kolkata", "at": "2026-01-10T12:30:00Z"
        })
    );
    for s in [
        daily,
        once,
        parse("every 2h", now, UTC).unwrap(),
        parse("0 9 * * 1-5", now, New_York).unwrap(),
        parse("2026-12-01 09:00", now, Paris).unwrap(),
    ] {
        let text = serde_json::to_string(&s).unwrap();
        let back: Schedule = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }
    // A once-schedule reads back after its time has passed.
    let past: Schedule = serde_json::from_str(
        r#"{"text":"in 5m","kind":"once","tz":"UTC","at":"2020-01-01T00:05:00Z"}"#,
    )
    .unwrap();
    assert_eq!(past.next_after(now), None);
    let err = serde_json::from_str::<Schedule>(r#"{"text":"every 2h","kind":"cron","tz":"UTC"}"#)
        .unwrap_err();
    assert!(err.to_string().contains("reads as `every`"), "{err}");
}

#[test]
fn describe_says_when_it_fires() {
    let now = utc(2026, 1, 10, 12, 0);
    let cases = [
        ("every 30m", Paris, "every 30 minutes"),
        ("every 1h30m", Paris, "every 1 hour 30 minutes"),
        (
            "every day at 18:30",
            Paris,
            "every day at 18:30 (Europe/Paris)",
        ),
        (
            "weekdays at 9am",
            New_York,
            "weekdays at 09:00 (America/New_York)",
        ),
        (
            "every monday at 9am",
            Kolkata,
            "every Monday at 09:00 (Asia/Kolkata)",
        ),
        (
            "every mon, wed and fri at 5pm",
            UTC,
            "every Monday, Wednesday and Friday at 17:00 (UTC)",
        ),
        (
            "in 30m",
            Paris,
            "once, on 2026-01-10 at 13:30 (Europe/Paris)",
        ),
        (
            "0 9 * * 1-5",
            New_York,
            "on the cron schedule `0 9 * * 1-5` (America/New_York)",
        ),
    ];
    for (text, tz, expected) in cases {
        assert_eq!(parse(text, now, tz).unwrap().describe(), expected, "{text}");
    }
}

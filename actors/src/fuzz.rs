//! Fuzz target for the routines' schedule parser: a schedule is text a user
//! or a model writes (`every day at 9:00`, `in 10 minutes`, a cron line).
//!
//! The target parses in a time zone the first byte picks (UTC, one with
//! summer time, one with a 45-minute offset, one south of the equator), and
//! checks what a parsed schedule promises: it fires after now, each next
//! occurrence is later than the one before, and it can describe itself. The
//! raw test replays `src/__fuzz__/schedule/corpus/` then random bytes; the
//! `_edits` test edits those seeds; see `docs/testing.md`.

use std::path::Path;

use bolero::check;
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use troupe_fuzzing::Seeds;

use crate::routine::schedule::parse;

const ZONES: [Tz; 4] = [
    chrono_tz::UTC,
    chrono_tz::Europe::Paris,
    chrono_tz::Pacific::Chatham,
    chrono_tz::Australia::Sydney,
];

fn schedule(data: &[u8]) {
    let (tz, text) = match data.split_first() {
        Some((first, rest)) => (ZONES[usize::from(*first) % ZONES.len()], rest),
        None => (chrono_tz::UTC, data),
    };
    let text = String::from_utf8_lossy(text);
    // Just before a summer-time change in Paris and a month-end.
    #[allow(clippy::unwrap_used)]
    let now = Utc.with_ymd_and_hms(2026, 3, 29, 0, 30, 0).unwrap();
    let Ok(schedule) = parse(&text, now, tz) else {
        return;
    };
    assert!(!schedule.describe().is_empty());
    let mut at = now;
    for _ in 0..3 {
        match schedule.next_after(at) {
            Some(next) => {
                assert!(next > at, "{text:?} fires at {next} after {at}");
                at = next;
            }
            None => {
                assert!(schedule.is_once(), "{text:?} stopped firing after {at}");
                break;
            }
        }
    }
}

#[test]
fn fuzz_schedule() {
    check!(name = "schedule").for_each(schedule);
}

#[test]
fn fuzz_schedule_edits() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__/schedule/corpus");
    let tokens: &[&[u8]] = &[
        b"every ",
        b" at ",
        b"in ",
        b"m",
        b"h",
        b"d",
        b"s",
        b"weekdays",
        b"mon,",
        b"sun",
        b"-",
        b"*/",
        b"*",
        b" ",
        b",",
        b":",
        b"am",
        b"pm",
        b"0",
        b"99999999999999999999",
        b"24:00",
        b"2026-02-29 ",
        b"L",
        b"#",
        b"?",
        b"W",
    ];
    let seeds = Seeds::load(dir, tokens);
    check!(name = "schedule_edits").for_each(|script| schedule(&seeds.edited(script)));
}

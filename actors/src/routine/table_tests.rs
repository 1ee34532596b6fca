use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use pretty_assertions::assert_eq;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::Usage;
use troupe_runtime::rusqlite::TransactionBehavior;

use super::*;
use crate::routine::clock::{Clock, VirtualClock};
use crate::routine::schedule::parse;

const LEASE: Duration = Duration::from_secs(300);

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn open(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.pragma_update(None, "journal_mode", "wal").unwrap();
    conn
}

fn db() -> (tempfile::TempDir, PathBuf, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let conn = open(&path);
    conn.execute_batch(SCHEMA).unwrap();
    (dir, path, conn)
}

fn new(owner: &str, name: &str, schedule: &str, now: DateTime<Utc>, tz: Tz) -> NewRoutine {
    NewRoutine {
        owner_bot: owner.into(),
        name: name.into(),
        prompt: format!("Run the {name} routine."),
        schedule: parse(schedule, now, tz).unwrap(),
        catch_up: CatchUp::Skip,
    }
}

fn claim(conn: &mut Connection, now: DateTime<Utc>, holder: &str) -> Due {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let due = claim_due(&tx, now, holder, LEASE).unwrap();
    tx.commit().unwrap();
    due
}

fn restart(conn: &mut Connection, now: DateTime<Utc>, holder: &str) -> Due {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let due = recover(&tx, now, holder, LEASE).unwrap();
    tx.commit().unwrap();
    due
}

/// (status, scheduled_for) of a routine's runs, oldest first.
fn history(conn: &Connection, id: RoutineId) -> Vec<(RunStatus, DateTime<Utc>)> {
    let mut runs: Vec<_> = runs(conn, id, 1000)
        .unwrap()
        .into_iter()
        .map(|r| (r.status, r.scheduled_for))
        .collect();
    runs.reverse();
    runs
}

#[test]
fn create_get_and_list_by_owner() {
    let (_dir, _path, conn) = db();
    let now = utc(2026, 1, 10, 12, 0);
    let ada = create(&conn, new("ada", "digest", "every 1h", now, Tz::UTC), now).unwrap();
    let bob = create(
        &conn,
        new("bob", "digest", "daily at 7am", now, Tz::UTC),
        now,
    )
    .unwrap();
    let ada2 = create(&conn, new("ada", "backup", "every 2h", now, Tz::UTC), now).unwrap();
    assert_eq!(ada.next_fire_at, Some(utc(2026, 1, 10, 13, 0)));
    assert_eq!(bob.next_fire_at, Some(utc(2026, 1, 11, 7, 0)));

    assert_eq!(
        get_by_id_or_name(&conn, None, &ada.id.to_string()).unwrap(),
        ada
    );
    assert_eq!(
        get_by_id_or_name(&conn, Some("ada"), "digest").unwrap(),
        ada
    );
    assert_eq!(
        get_by_id_or_name(&conn, Some("bob"), " digest ").unwrap(),
        bob
    );
    assert_eq!(get_by_id_or_name(&conn, None, "bob/digest").unwrap(), bob);
    assert_eq!(get_by_id_or_name(&conn, None, "backup").unwrap(), ada2);
    let err = get_by_id_or_name(&conn, None, "digest").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "`digest` names several routines (ada/digest ({}), bob/digest ({})): give the id, or `owner/name`",
            ada.id, bob.id
        )
    );
    let err = get_by_id_or_name(&conn, Some("bob"), &ada.id.to_string()).unwrap_err();
    assert!(
        matches!(err, RoutineError::NotFound { .. }),
        "a bot sees only its own: {err}"
    );
    let err = get_by_id_or_name(&conn, Some("bob"), "backup").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no routine `backup` for `bob`: action `list` shows ids and names"
    );

    let names = |owner| -> Vec<(String, String)> {
        list(&conn, owner)
            .unwrap()
            .into_iter()
            .map(|r| (r.owner_bot, r.name))
            .collect()
    };
    assert_eq!(
        names(Some("ada")),
        vec![
            ("ada".into(), "backup".into()),
            ("ada".into(), "digest".into())
        ]
    );
    assert_eq!(names(None).len(), 3);
    assert_eq!(next_fire(&conn).unwrap(), Some(utc(2026, 1, 10, 13, 0)));
}

#[test]
fn create_refuses_empty_and_duplicate_names() {
    let (_dir, _path, conn) = db();
    let now = utc(2026, 1, 10, 12, 0);
    let err = create(&conn, new("ada", "  ", "every 1h", now, Tz::UTC), now).unwrap_err();
    assert!(matches!(err, RoutineError::BadName { .. }), "{err}");
    create(&conn, new("ada", "digest", "every 1h", now, Tz::UTC), now).unwrap();
    let err = create(&conn, new("ada", "digest", "every 2h", now, Tz::UTC), now).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`ada` already has a routine named `digest`: pick another name, or update that one"
    );
    create(&conn, new("bob", "digest", "every 2h", now, Tz::UTC), now).unwrap();
    let mut empty = new("ada", "other", "every 2h", now, Tz::UTC);
    empty.prompt = "\n".into();
    assert!(matches!(
        create(&conn, empty, now).unwrap_err(),
        RoutineError::EmptyPrompt
    ));
}

#[test]
fn pause_resume_update_and_remove() {
    let (_dir, _path, mut conn) = db();
    let clock = VirtualClock::new(utc(2026, 1, 10, 12, 0));
    let t0 = clock.now();
    let r = create(&conn, new("ada", "digest", "every 1h", t0, Tz::UTC), t0).unwrap();

    let paused = pause(&conn, Some("ada"), "digest", t0).unwrap();
    assert_eq!(
        (paused.status, paused.next_fire_at),
        (RoutineStatus::Paused, None)
    );
    assert_eq!(next_fire(&conn).unwrap(), None);
    let now = clock.advance(TimeDelta::hours(2));
    assert_eq!(
        claim(&mut conn, now, "a"),
        Due::default(),
        "a paused routine does not fire"
    );

    let now = clock.advance(TimeDelta::minutes(30));
    let resumed = resume(&conn, Some("ada"), "digest", now).unwrap();
    assert_eq!(resumed.status, RoutineStatus::Active);
    assert_eq!(
        resumed.next_fire_at,
        Some(utc(2026, 1, 10, 15, 30)),
        "from now, not caught up"
    );

    let changes = RoutineUpdate {
        name: Some("morning".into()),
        schedule: Some(parse("weekdays at 9am", now, Tz::Europe__Paris).unwrap()),
        ..RoutineUpdate::default()
    };
    let updated = update(&conn, None, &r.id.to_string(), changes, now).unwrap();
    assert_eq!(updated.name, "morning");
    assert_eq!(updated.schedule.text(), "weekdays at 9am");
    // Saturday 2026-01-10 -> Monday 09:00 in Paris.
    assert_eq!(updated.next_fire_at, Some(utc(2026, 1, 12, 8, 0)));
    assert_eq!(
        get_by_id_or_name(&conn, Some("ada"), "morning").unwrap(),
        updated
    );

    create(&conn, new("ada", "other", "every 1h", now, Tz::UTC), now).unwrap();
    let clash = RoutineUpdate {
        name: Some("other".into()),
        ..RoutineUpdate::default()
    };
    assert!(matches!(
        update(&conn, Some("ada"), "morning", clash, now).unwrap_err(),
        RoutineError::NameTaken { .. }
    ));

    let removed = remove(&conn, Some("ada"), "morning").unwrap();
    assert_eq!(removed.id, r.id);
    assert!(matches!(
        get_by_id_or_name(&conn, None, &r.id.to_string()).unwrap_err(),
        RoutineError::NotFound { .. }
    ));
    assert_eq!(history(&conn, r.id), vec![]);
}

#[test]
fn an_occurrence_is_claimed_once_and_the_next_one_scheduled() {
    let (_dir, _path, mut conn) = db();
    let clock = VirtualClock::new(utc(2026, 1, 10, 12, 0));
    let t0 = clock.now();
    let r = create(&conn, new("ada", "digest", "every 30m", t0, Tz::UTC), t0).unwrap();

    assert_eq!(
        claim(&mut conn, clock.advance(TimeDelta::minutes(29)), "a"),
        Due::default()
    );
    let now = clock.advance(TimeDelta::minutes(1) + TimeDelta::seconds(2));
    let due = claim(&mut conn, now, "a");
    assert_eq!(due.missed, vec![]);
    assert_eq!(
        due.claims,
        vec![Claim {
            run_id: due.claims[0].run_id,
            routine_id: r.id,
            owner_bot: "ada".into(),
            name: "digest".into(),
            prompt: "Run the digest routine.".into(),
            scheduled_for: utc(2026, 1, 10, 12, 30),
            lease_until: now + TimeDelta::minutes(5),
        }]
    );
    assert_eq!(
        claim(&mut conn, now, "a"),
        Due::default(),
        "claimed once only"
    );
    assert_eq!(
        next_fire(&conn).unwrap(),
        Some(utc(2026, 1, 10, 13, 0)),
        "keeps its phase"
    );

    let run = due.claims[0].run_id;
    let conversation = ConversationId::new();
    start_run(&conn, run, "a", conversation, now, LEASE).unwrap();
    let usage = Usage {
        input_tokens: 120,
        output_tokens: 40,
        ..Usage::default()
    };
    let end = clock.advance(TimeDelta::minutes(2));
    finish_run(
        &conn,
        run,
        RunStatus::Done,
        "sent the digest",
        Some(&usage),
        end,
    )
    .unwrap();
    assert_eq!(
        runs(&conn, r.id, 10).unwrap(),
        vec![Run {
            id: run,
            routine_id: r.id,
            scheduled_for: utc(2026, 1, 10, 12, 30),
            claimed_by: "a".into(),
            lease_until: Some(now + TimeDelta::minutes(5)),
            started_at: Some(now),
            ended_at: Some(end),
            status: RunStatus::Done,
            conversation_id: Some(conversation),
            summary: Some("sent the digest".into()),
            usage: Some(usage),
        }]
    );
    assert!(matches!(
        finish_run(&conn, run, RunStatus::Failed, "again", None, end).unwrap_err(),
        RoutineError::NotHeld {
            status: RunStatus::Done,
            ..
        }
    ));
    assert!(matches!(
        finish_run(&conn, run, RunStatus::Skipped, "", None, end).unwrap_err(),
        RoutineError::BadFinish(RunStatus::Skipped)
    ));
}

#[test]
fn a_once_routine_fires_once() {
    let (_dir, _path, mut conn) = db();
    let clock = VirtualClock::new(utc(2026, 1, 10, 12, 0));
    let t0 = clock.now();
    let r = create(&conn, new("ada", "remind", "in 30m", t0, Tz::UTC), t0).unwrap();
    let now = clock.advance(TimeDelta::minutes(30));
    let due = claim(&mut conn, now, "a");
    assert_eq!(due.claims.len(), 1);
    finish_run(
        &conn,
        due.claims[0].run_id,
        RunStatus::Done,
        "reminded",
        None,
        now,
    )
    .unwrap();
    assert_eq!(
        get_by_id_or_name(&conn, None, "remind")
            .unwrap()
            .next_fire_at,
        None
    );
    assert_eq!(next_fire(&conn).unwrap(), None);
    assert_eq!(
        claim(&mut conn, clock.advance(TimeDelta::days(1)), "a"),
        Due::default()
    );
    assert_eq!(
        history(&conn, r.id),
        vec![(RunStatus::Done, utc(2026, 1, 10, 12, 30))]
    );
}

#[test]
fn two_holders_on_one_database_fire_each_occurrence_once() {
    let (_dir, path, conn) = db();
    let t0 = utc(2026, 1, 10, 12, 0);
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let r = create(&conn, new("ada", name, "every 1m", t0, Tz::UTC), t0).unwrap();
        ids.push(r.id);
    }
    const MINUTES: i64 = 30;
    let barrier = Arc::new(Barrier::new(2));
    let holders: Vec<_> = ["node-1", "node-2"]
        .into_iter()
        .map(|holder| {
            let barrier = Arc::clone(&barrier);
            let path = path.clone();
            std::thread::spawn(move || {
                let mut conn = open(&path);
                let clock = VirtualClock::new(t0);
                let mut won = Vec::new();
                for _ in 0..MINUTES {
                    let now = clock.advance(TimeDelta::minutes(1));
                    barrier.wait();
                    let due = claim(&mut conn, now, holder);
                    assert_eq!(due.missed, vec![]);
                    won.extend(
                        due.claims
                            .into_iter()
                            .map(|c| (c.routine_id, c.scheduled_for)),
                    );
                }
                won
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in holders {
        all.extend(h.join().unwrap());
    }
    let expected: BTreeSet<_> = ids
        .iter()
        .flat_map(|id| (1..=MINUTES).map(move |m| (*id, t0 + TimeDelta::minutes(m))))
        .collect();
    assert_eq!(all.len(), expected.len(), "no occurrence claimed twice");
    assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), expected);
    for id in ids {
        assert_eq!(history(&conn, id).len(), MINUTES as usize);
    }
}

#[test]
fn a_holder_with_a_stale_view_cannot_claim_a_taken_occurrence() {
    let (_dir, path, mut conn) = db();
    let t0 = utc(2026, 1, 10, 12, 0);
    let r = create(&conn, new("ada", "digest", "every 1h", t0, Tz::UTC), t0).unwrap();
    let now = t0 + TimeDelta::hours(1);
    assert_eq!(claim(&mut conn, now, "node-1").claims.len(), 1);
    // node-2 acts on the next fire time it read before node-1 moved it.
    let mut other = open(&path);
    other
        .execute(
            "UPDATE routines SET next_fire_at = ?1",
            params![fmt_ts(t0 + TimeDelta::hours(1))],
        )
        .unwrap();
    assert_eq!(claim(&mut other, now, "node-2"), Due::default());
    assert_eq!(next_fire(&other).unwrap(), Some(t0 + TimeDelta::hours(2)));
    assert_eq!(history(&conn, r.id), vec![(RunStatus::Claimed, now)]);
}

/// A daily routine created on Saturday 08:00 UTC, and a restart the next
/// Tuesday at 12:00: the 09:00 occurrences of Sat, Sun, Mon and Tue passed.
fn overdue(catch_up: CatchUp) -> (tempfile::TempDir, Connection, RoutineId, Due) {
    let (dir, _path, mut conn) = db();
    let t0 = utc(2026, 1, 10, 8, 0);
    let mut routine = new("ada", "digest", "daily at 9am", t0, Tz::UTC);
    routine.catch_up = catch_up;
    let r = create(&conn, routine, t0).unwrap();
    let due = restart(&mut conn, utc(2026, 1, 13, 12, 0), "node-1");
    (dir, conn, r.id, due)
}

#[test]
fn restart_under_skip_records_and_reports_every_missed_occurrence() {
    let (_dir, conn, id, due) = overdue(CatchUp::Skip);
    assert_eq!(
        due,
        Due {
            claims: vec![],
            missed: vec![Missed {
                routine_id: id,
                owner_bot: "ada".into(),
                name: "digest".into(),
                count: 4,
                count_is_lower_bound: false,
                first: utc(2026, 1, 10, 9, 0),
                last: utc(2026, 1, 13, 9, 0),
                caught_up_by: None,
            }],
            interrupted: vec![],
        }
    );
    assert_eq!(
        history(&conn, id),
        (10..=13)
            .map(|d| (RunStatus::Skipped, utc(2026, 1, d, 9, 0)))
            .collect::<Vec<_>>()
    );
    assert_eq!(next_fire(&conn).unwrap(), Some(utc(2026, 1, 14, 9, 0)));
}

#[test]
fn restart_under_run_once_runs_the_latest_missed_occurrence_once() {
    let (_dir, conn, id, due) = overdue(CatchUp::RunOnce);
    assert_eq!(due.claims.len(), 1);
    let run = due.claims[0].run_id;
    assert_eq!(due.claims[0].scheduled_for, utc(2026, 1, 13, 9, 0));
    assert_eq!(
        due.missed,
        vec![Missed {
            routine_id: id,
            owner_bot: "ada".into(),
            name: "digest".into(),
            count: 3,
            count_is_lower_bound: false,
            first: utc(2026, 1, 10, 9, 0),
            last: utc(2026, 1, 12, 9, 0),
            caught_up_by: Some(run),
        }]
    );
    assert_eq!(
        history(&conn, id),
        vec![
            (RunStatus::Skipped, utc(2026, 1, 10, 9, 0)),
            (RunStatus::Skipped, utc(2026, 1, 11, 9, 0)),
            (RunStatus::Skipped, utc(2026, 1, 12, 9, 0)),
            (RunStatus::Claimed, utc(2026, 1, 13, 9, 0)),
        ]
    );
    assert_eq!(next_fire(&conn).unwrap(), Some(utc(2026, 1, 14, 9, 0)));
}

#[test]
fn a_late_wake_up_follows_the_catch_up_policy_but_a_little_late_is_on_time() {
    let (_dir, _path, mut conn) = db();
    let t0 = utc(2026, 1, 10, 8, 0);
    let r = create(&conn, new("ada", "digest", "daily at 9am", t0, Tz::UTC), t0).unwrap();
    // Five minutes late (a busy host): on time, run.
    let now = utc(2026, 1, 10, 9, 5);
    let due = claim(&mut conn, now, "node-1");
    assert_eq!(due.claims.len(), 1);
    finish_run(
        &conn,
        due.claims[0].run_id,
        RunStatus::Done,
        "ok",
        None,
        now,
    )
    .unwrap();
    // The host slept from before 09:00 to 11:00 the next day: missed, skipped.
    let due = claim(&mut conn, utc(2026, 1, 11, 11, 0), "node-1");
    assert_eq!(due.claims, vec![]);
    assert_eq!(due.missed.len(), 1);
    assert_eq!(
        history(&conn, r.id),
        vec![
            (RunStatus::Done, utc(2026, 1, 10, 9, 0)),
            (RunStatus::Skipped, utc(2026, 1, 11, 9, 0)),
        ]
    );
}

#[test]
fn an_expired_lease_is_settled_as_interrupted_not_rerun() {
    let (_dir, _path, mut conn) = db();
    let clock = VirtualClock::new(utc(2026, 1, 10, 12, 0));
    let t0 = clock.now();
    let r = create(&conn, new("ada", "digest", "every 1h", t0, Tz::UTC), t0).unwrap();
    let now = clock.advance(TimeDelta::hours(1));
    let run = claim(&mut conn, now, "node-1").claims[0].run_id;
    let conversation = ConversationId::new();
    start_run(&conn, run, "node-1", conversation, now, LEASE).unwrap();
    // A renewed lease keeps the run alive past its first lease.
    renew_lease(
        &conn,
        run,
        "node-1",
        clock.advance(TimeDelta::minutes(4)),
        LEASE,
    )
    .unwrap();
    let now = clock.advance(TimeDelta::minutes(4));
    assert_eq!(restart(&mut conn, now, "node-2").interrupted, vec![]);

    // node-1 dies; after its lease ran out, node-2 starts.
    let now = clock.advance(TimeDelta::minutes(10));
    let due = restart(&mut conn, now, "node-2");
    assert_eq!(
        due.interrupted,
        vec![Interrupted {
            run_id: run,
            routine_id: r.id,
            owner_bot: "ada".into(),
            name: "digest".into(),
            scheduled_for: utc(2026, 1, 10, 13, 0),
            claimed_by: "node-1".into(),
            conversation_id: Some(conversation),
        }]
    );
    assert_eq!(due.claims, vec![], "an interrupted run is not run again");
    let record = &runs(&conn, r.id, 1).unwrap()[0];
    assert_eq!(
        (record.status, record.ended_at),
        (RunStatus::Failed, Some(now))
    );
    assert!(
        record
            .summary
            .as_deref()
            .unwrap_or_default()
            .starts_with("interrupted: `node-1`"),
        "{record:?}"
    );
    // node-1 was only slow: its late report does not overwrite the verdict.
    let err = finish_run(&conn, run, RunStatus::Done, "done", None, now).unwrap_err();
    assert!(
        matches!(
            err,
            RoutineError::NotHeld {
                status: RunStatus::Failed,
                ..
            }
        ),
        "{err}"
    );
    let err = renew_lease(&conn, run, "node-1", now, LEASE).unwrap_err();
    assert!(matches!(err, RoutineError::NotHeld { .. }), "{err}");
}

#[test]
fn run_now_claims_outside_the_schedule() {
    let (_dir, _path, mut conn) = db();
    let t0 = utc(2026, 1, 10, 12, 0);
    let r = create(&conn, new("ada", "digest", "every 1h", t0, Tz::UTC), t0).unwrap();
    let now = t0 + TimeDelta::minutes(10);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let first = run_now(&tx, Some("ada"), "digest", now, "node-1", LEASE).unwrap();
    let second = run_now(&tx, Some("ada"), "digest", now, "node-1", LEASE).unwrap();
    tx.commit().unwrap();
    assert_eq!(first.scheduled_for, now);
    assert_eq!(second.scheduled_for, now + TimeDelta::milliseconds(1));
    assert_eq!(next_fire(&conn).unwrap(), Some(t0 + TimeDelta::hours(1)));
    assert_eq!(history(&conn, r.id).len(), 2);
}

#[test]
fn a_long_outage_of_a_frequent_routine_is_counted_but_recorded_in_part() {
    let (_dir, _path, mut conn) = db();
    let t0 = utc(2026, 1, 10, 12, 0);
    let r = create(&conn, new("ada", "tick", "every 1m", t0, Tz::UTC), t0).unwrap();
    let now = t0 + TimeDelta::days(3);
    let due = restart(&mut conn, now, "node-1");
    let missed = &due.missed[0];
    assert_eq!(
        (missed.count, missed.first, missed.last),
        (3 * 24 * 60, t0 + TimeDelta::minutes(1), now)
    );
    let recorded = history(&conn, r.id);
    assert_eq!(recorded.len(), MAX_SKIPPED_ROWS);
    assert_eq!(
        recorded.last(),
        Some(&(RunStatus::Skipped, now)),
        "the latest are kept"
    );
    assert_eq!(next_fire(&conn).unwrap(), Some(now + TimeDelta::minutes(1)));
}

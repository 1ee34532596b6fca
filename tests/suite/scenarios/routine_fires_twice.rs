//! **A routine fires twice.** An hourly routine lives through a restart
//! exactly at its fire time (before and after it fired), a second process
//! on its home, and the clock jumping back over an occurrence it already
//! ran and forward past several: each due occurrence runs once, and no
//! occurrence runs twice. (Two holders racing on one database are
//! `routine::table`'s `two_holders_on_one_database_fire_each_occurrence_once`;
//! a process killed mid-run is the crash harness, `crash.rs`.)

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use troupe::actors::routine::{Clock, RunStatus, VirtualClock};

use crate::suite::routines::{
    build, context, create, responder, routine_id, routine_notice, runs_of, start, tool,
};
use crate::suite::support::TestHome;

#[tokio::test]
async fn restarts_at_the_fire_time_and_clock_jumps_run_each_occurrence_once() {
    let home = TestHome::new();
    let clock = Arc::new(VirtualClock::new(start()));
    let nine = start() + TimeDelta::hours(1);
    let (first, _) = build(&home, responder(), &clock, "run_once").await;
    let made = tool(
        &context(&first, "assistant"),
        create("hourly", "every 1h", "say: counted"),
    )
    .await;
    let id = routine_id(&made);
    // A second process on the home is refused: it can fire nothing.
    let refused = home.builder(responder()).scheduler(true).build().await;
    assert!(refused.is_err(), "a second writer was let in");
    first.shutdown().await;
    drop(first);

    // The process comes back exactly at the fire time: the occurrence runs,
    // once.
    clock.set(nine);
    let (second, mut bus) = build(&home, responder(), &clock, "run_once").await;
    let (_, text) = routine_notice(&mut bus).await;
    assert!(
        text.starts_with("Routine `hourly` ran (scheduled for 2026-03-02 10:00 CET"),
        "{text}"
    );
    let scheduler = second.scheduler().unwrap();
    assert_eq!(scheduler.tick().await.unwrap().claims, vec![]);
    second.shutdown().await;
    drop(second);

    // And again at the same instant, after it ran: nothing runs.
    let (third, mut bus) = build(&home, responder(), &clock, "run_once").await;
    let recovered = third.scheduler().unwrap().recovered().clone();
    assert_eq!(
        (recovered.claims.len(), recovered.missed.len()),
        (0, 0),
        "{recovered:?}"
    );
    let scheduler = third.scheduler().unwrap();
    // The clock jumps back two hours, then forward over the occurrence
    // that ran: nothing is due.
    for at in [
        nine - TimeDelta::hours(2),
        nine,
        nine + TimeDelta::minutes(59),
    ] {
        clock.set(at);
        let due = scheduler.tick().await.unwrap();
        assert_eq!(due.claims, vec![], "at {at}: {due:?}");
    }
    // Forward to the next occurrence: one run.
    let mut ends = scheduler.subscribe();
    clock.set(nine + TimeDelta::hours(1));
    assert_eq!(scheduler.tick().await.unwrap().claims.len(), 1);
    crate::suite::routines::next_end(&mut ends).await;
    // Forward past four more: the latest runs, the three before it are
    // reported missed.
    clock.set(nine + TimeDelta::hours(5) + TimeDelta::minutes(30));
    let due = scheduler.tick().await.unwrap();
    assert_eq!(due.claims.len(), 1, "{due:?}");
    assert_eq!(due.missed.len(), 1, "{due:?}");
    assert_eq!(due.missed[0].count, 3, "{due:?}");
    crate::suite::routines::next_end(&mut ends).await;
    // The owner is told of the missed ones (and of the run).
    let mut told = Vec::new();
    while !told
        .iter()
        .any(|t: &String| t.contains("missed 3 occurrence(s)"))
    {
        told.push(routine_notice(&mut bus).await.1);
    }
    assert_eq!(scheduler.tick().await.unwrap().claims, vec![]);

    let runs = runs_of(&third, id).await;
    let mut times: Vec<DateTime<Utc>> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Done)
        .map(|r| r.scheduled_for)
        .collect();
    times.sort();
    let mut distinct = times.clone();
    distinct.dedup();
    assert_eq!(times, distinct, "an occurrence ran twice: {runs:?}");
    assert_eq!(times.len(), 3, "{runs:?}");
    assert_eq!(times[0], nine);
    assert!(clock.now() >= times[2]);
    third.shutdown().await;
}

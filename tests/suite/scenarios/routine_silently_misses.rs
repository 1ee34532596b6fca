//! **A routine silently misses.** The process is down for five days over
//! an hourly and a daily routine (catch-up `skip`). When it comes back,
//! every missed occurrence is recorded — the hourly one's 120 past the
//! row cap, counted all the same — and the owner's conversation is told
//! once per routine, in words the model reads on its next turn: how many,
//! from when to when, what was done. A second restart tells nobody again,
//! and both routines fire next on their schedules. (Each policy's words
//! on a two-evening outage are `routines.rs`'s
//! `a_restart_follows_each_catch_up_policy`.)

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use troupe::actors::events::NodeEvent;
use troupe::actors::routine::{table, RunStatus, VirtualClock};
use troupe::runtime::model::{ModelRequest, ScriptedProvider};
use troupe::runtime::protocol::Message;
use troupe::AgentEvent;

use troupe::runtime::id::RoutineId;
use troupe::Runtime;

use crate::suite::routines::{build, context, create, responder, routine_id, start, tool};
use crate::suite::support::*;

/// The notices of missed occurrences the model has read, in order.
fn told(model: &ScriptedProvider) -> Vec<String> {
    model
        .requests()
        .iter()
        .filter_map(|r: &ModelRequest| r.messages.last().map(Message::text))
        .filter(|text| text.starts_with("[notice: routine]") && text.contains(" missed "))
        .map(str::to_string)
        .collect()
}

/// Every recorded run of `id`, newest first.
async fn runs_of(runtime: &Runtime, id: RoutineId) -> Vec<table::Run> {
    runtime
        .node()
        .store()
        .read(move |c| Ok(table::runs(c, id, 1000).unwrap()))
        .await
        .unwrap()
}

#[tokio::test]
async fn five_days_down_are_recorded_and_told_once() {
    let home = TestHome::new();
    let clock = Arc::new(VirtualClock::new(start()));
    let (first, _) = build(&home, responder(), &clock, "skip").await;
    let ctx = context(&first, "assistant");
    let hourly = routine_id(&tool(&ctx, create("hourly", "every 1h", "say: tick")).await);
    let daily = routine_id(&tool(&ctx, create("daily", "every day at 18:30", "say: digest")).await);
    first.shutdown().await;
    drop(first);

    // Down from Monday 08:00 to Saturday 08:30 UTC: 120 hourly occurrences
    // (Monday 09:00 to Saturday 08:00) and 5 evenings.
    clock.set(Utc.with_ymd_and_hms(2026, 3, 7, 8, 30, 0).unwrap());
    let model = responder();
    let (second, mut bus) = build(&home, Arc::clone(&model), &clock, "skip").await;
    let recovered = second.scheduler().unwrap().recovered().clone();
    assert_eq!(recovered.claims, vec![], "skip runs nothing");
    let mut counts: Vec<(String, u64, bool)> = recovered
        .missed
        .iter()
        .map(|m| (m.name.clone(), m.count, m.count_is_lower_bound))
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        vec![("daily".into(), 5, false), ("hourly".into(), 120, false)]
    );
    // Recorded: each evening, and the latest hundred hours (the report
    // counts what the rows leave out).
    let statuses =
        |runs: &[table::Run]| -> Vec<RunStatus> { runs.iter().map(|r| r.status).collect() };
    assert_eq!(
        statuses(&runs_of(&second, daily).await),
        vec![RunStatus::Skipped; 5]
    );
    let hours = runs_of(&second, hourly).await;
    assert_eq!(
        statuses(&hours),
        vec![RunStatus::Skipped; table::MAX_SKIPPED_ROWS]
    );
    let span = |r: &table::Run| r.scheduled_for;
    assert_eq!(
        (span(&hours[0]), span(&hours[99])),
        (
            Utc.with_ymd_and_hms(2026, 3, 7, 8, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 3, 3, 5, 0, 0).unwrap()
        ),
        "the latest hundred hours, newest first"
    );

    // Told: the owner's conversation reads both notices, each once.
    let owner = second.bot("assistant").await.unwrap().conversation();
    while told(&model).len() < 2 {
        on_bus(&mut bus, |e: &NodeEvent| {
            (e.conversation == owner && matches!(e.event, AgentEvent::TurnFinished { .. }))
                .then_some(())
        })
        .await;
    }
    let mut notices = told(&model);
    notices.sort();
    assert_eq!(notices.len(), 2, "{notices:#?}");
    assert!(
        notices[0].contains(
            "Routine `daily` missed 5 occurrence(s) from 2026-03-02 18:30 CET (17:30 UTC) to \
             2026-03-06 18:30 CET"
        ),
        "{}",
        notices[0]
    );
    assert!(
        notices[1].contains(
            "Routine `hourly` missed 120 occurrence(s) from 2026-03-02 10:00 CET (09:00 UTC) to \
             2026-03-07 09:00 CET"
        ),
        "{}",
        notices[1]
    );
    for notice in &notices {
        assert!(
            notice.ends_with("They were skipped (catch-up: skip); it fires next as scheduled."),
            "{notice}"
        );
    }
    second.shutdown().await;
    drop(second);

    // Another restart at the same instant: nothing missed, nobody told
    // again, no model called.
    let model = responder();
    let (third, _) = build(&home, Arc::clone(&model), &clock, "skip").await;
    let recovered = third.scheduler().unwrap().recovered().clone();
    assert_eq!(
        (recovered.claims.len(), recovered.missed.len()),
        (0, 0),
        "{recovered:?}"
    );
    assert_eq!(runs_of(&third, daily).await.len(), 5);
    assert_eq!(model.calls(), 0, "{:#?}", model.requests());
    // Both fire next on their schedules: the coming hour and evening.
    let listed = tool(
        &context(&third, "assistant"),
        serde_json::json!({"action": "list"}),
    )
    .await;
    let mut next: Vec<(String, String)> = listed.data["routines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["next_fire_at"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    next.sort();
    assert_eq!(
        next,
        vec![
            ("daily".into(), "2026-03-07T17:30:00.000Z".into()),
            ("hourly".into(), "2026-03-07T09:00:00.000Z".into()),
        ]
    );
    third.shutdown().await;
}

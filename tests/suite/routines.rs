//! Routines end to end, on a virtual clock: `cronjob_manage` through the
//! turn loop and directly, every schedule form, the scheduler firing a run
//! as its own conversation and reporting it (or not, for `[SILENT]`), a
//! failing run, two runtimes on one home, catch-up after a restart, and
//! the recursion guard.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::broadcast;
use troupe::actors::events::NodeEvent;
use troupe::actors::routine::run::RunEnd;
use troupe::actors::routine::{table, Clock, RunStatus, VirtualClock};
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::{ActorKind, Address, Message, ToolResult};
use troupe::runtime::store::{conversations, mailbox};
use troupe::runtime::tool::{Tool, ToolContext};
use troupe::{AgentEvent, BotSpec, Runtime};

use super::support::*;

/// Monday 2 March 2026, 08:00 UTC (09:00 in Paris).
pub(super) fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap()
}

/// Answers from the latest message: a routine run says what its prompt
/// asks after `say: ` (or searches the tools when told), a notice is
/// acknowledged.
pub(super) fn responder() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|request: &ModelRequest| {
        let latest = request.messages.last().map(Message::text).unwrap_or("");
        if let Some(Message::Tool { name, .. }) = request.messages.last() {
            return Turn::text(format!("after {name}"));
        }
        if latest.starts_with("[routine `") {
            if latest.contains("search tools") {
                return Turn::tool_call(
                    "tool_search",
                    json!({"query": "cronjob_manage ask_user routine schedule ask", "limit": 10}),
                );
            }
            let said = latest.split("say: ").nth(1).unwrap_or("nothing");
            return Turn::text(said.to_string());
        }
        if latest.starts_with("[notice: routine]") {
            return Turn::text("noted");
        }
        Turn::text("ok")
    }))
}

struct Setup {
    home: TestHome,
    clock: Arc<VirtualClock>,
    runtime: Runtime,
    bus: broadcast::Receiver<NodeEvent>,
}

pub(super) async fn build(
    home: &TestHome,
    model: Arc<ScriptedProvider>,
    clock: &Arc<VirtualClock>,
    catch_up: &str,
) -> (Runtime, broadcast::Receiver<NodeEvent>) {
    let (bus, rx) = broadcast::channel(4096);
    let runtime = home
        .builder(model)
        .clock(Arc::clone(clock) as _)
        .scheduler(true)
        .event_bus(bus)
        .set("agent.timezone", "Europe/Paris")
        .set("routines.catch_up", catch_up)
        .build()
        .await
        .unwrap();
    (runtime, rx)
}

async fn setup(model: Arc<ScriptedProvider>) -> Setup {
    let home = TestHome::new();
    let clock = Arc::new(VirtualClock::new(start()));
    let (runtime, bus) = build(&home, model, &clock, "run_once").await;
    Setup {
        home,
        clock,
        runtime,
        bus,
    }
}

/// A tool context of `agent`'s conversation, with the node's services.
pub(super) fn context(runtime: &Runtime, agent: &str) -> ToolContext {
    let node = runtime.node();
    let bot = node.bot(agent).unwrap();
    ToolContext {
        agent: agent.into(),
        bot: bot.id,
        kind: bot.spec.kind(),
        services: node.services().fork(),
        ..ToolContext::standalone(node.home().clone(), node.settings().cwd.clone())
    }
}

/// Calls the `cronjob_manage` tool itself.
pub(super) async fn tool(ctx: &ToolContext, args: serde_json::Value) -> ToolResult {
    troupe::tools::cronjob_manage::cronjob_manage::tool()
        .call(args, ctx)
        .await
}

pub(super) fn create(name: &str, schedule: &str, prompt: &str) -> serde_json::Value {
    json!({"action": "create", "name": name, "schedule": schedule, "prompt": prompt})
}

pub(super) async fn next_end(ends: &mut broadcast::Receiver<RunEnd>) -> RunEnd {
    tokio::time::timeout(WAIT, ends.recv())
        .await
        .expect("timed out waiting for a run to end")
        .unwrap()
}

/// Waits for a `routine` notice on the bus; returns its conversation and text.
pub(super) async fn routine_notice(
    bus: &mut broadcast::Receiver<NodeEvent>,
) -> (troupe::runtime::id::ConversationId, String) {
    tokio::time::timeout(WAIT, async {
        loop {
            let e = bus.recv().await.unwrap();
            if let AgentEvent::Notice { topic, text } = e.event {
                if topic == "routine" {
                    return (e.conversation, text);
                }
            }
        }
    })
    .await
    .expect("timed out waiting for a routine notice")
}

pub(super) fn routine_id(result: &ToolResult) -> troupe::runtime::id::RoutineId {
    result.data["id"].as_str().unwrap().parse().unwrap()
}

pub(super) async fn runs_of(
    runtime: &Runtime,
    id: troupe::runtime::id::RoutineId,
) -> Vec<table::Run> {
    runtime
        .node()
        .store()
        .read(move |c| Ok(table::runs(c, id, 10).unwrap()))
        .await
        .unwrap()
}

#[tokio::test]
async fn cronjob_manage_creates_a_routine_through_the_turn_loop() {
    let model = script(vec![
        Turn::tool_call("tool_search", json!({"query": "cronjob_manage"})),
        Turn::tool_call(
            "cronjob_manage",
            create("digest", "every day at 18:30", "Summarise the news."),
        )
        .expecting("cronjob_manage"),
        Turn::text("Made it.").expecting("Routine created."),
    ]);
    let s = setup(Arc::clone(&model)).await;
    let bot = s.runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "every evening, summarise the news").await;
    assert_eq!(report.text, "Made it.");
    let requests = model.requests();
    check_invariants(&requests);
    let created = match requests[2].messages.last().unwrap() {
        Message::Tool { result, .. } => result.clone(),
        other => panic!("expected the tool result, got {other:?}"),
    };
    assert!(!created.is_error(), "{}", created.text);
    assert_eq!(
        created.text,
        format!(
            "Routine created.\n`digest` ({}) of `assistant`: every day at 18:30 (Europe/Paris); \
             next run 2026-03-02 18:30 CET (17:30 UTC).\nThe scheduler is running in this process.",
            created.data["id"].as_str().unwrap()
        )
    );
    assert_eq!(created.data["next_fire_at"], "2026-03-02T17:30:00.000Z");
    assert_eq!(created.data["catch_up"], "run_once");
    let listed = tool(&context(&s.runtime, "assistant"), json!({"action": "list"})).await;
    assert!(
        listed.text.starts_with("1 routine(s):\n- `digest`"),
        "{}",
        listed.text
    );
    assert!(listed.text.contains("never ran"), "{}", listed.text);
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn every_schedule_form_is_accepted_and_nonsense_is_refused() {
    let s = setup(responder()).await;
    let ctx = context(&s.runtime, "assistant");
    let accepted = [
        ("every 30m", "2026-03-02T08:30:00.000Z"),
        ("in 2 hours", "2026-03-02T10:00:00.000Z"),
        ("every day at 18:30", "2026-03-02T17:30:00.000Z"),
        ("weekdays at 9am", "2026-03-03T08:00:00.000Z"),
        ("every mon and thu at 17:00", "2026-03-02T16:00:00.000Z"),
        ("0 9 * * 1-5", "2026-03-03T08:00:00.000Z"),
        ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00.000Z"),
        ("2026-12-01 09:00", "2026-12-01T08:00:00.000Z"),
    ];
    for (n, (schedule, next)) in accepted.iter().enumerate() {
        let r = tool(&ctx, create(&format!("r{n}"), schedule, "Do it.")).await;
        assert!(!r.is_error(), "{schedule}: {}", r.text);
        assert_eq!(r.data["next_fire_at"], *next, "{schedule}");
    }
    for schedule in ["sometimes", "every 10s", "every 0m", "2020-01-01T00:00:00Z"] {
        let r = tool(&ctx, create("bad", schedule, "Do it.")).await;
        assert!(r.is_error(), "{schedule} was accepted");
        assert!(r.text.contains(schedule), "{schedule}: {}", r.text);
    }
    let r = tool(&ctx, create("bad", "sometimes", "Do it.")).await;
    assert!(r.text.contains("Accepted schedules"), "{}", r.text);
    assert!(r.text.contains("weekdays at 9am"), "{}", r.text);
    let r = tool(
        &ctx,
        json!({"action": "create", "name": "x", "schedule": "every 1h"}),
    )
    .await;
    assert_eq!(r.text, "`create` needs `prompt`.");
    let r = tool(&ctx, create("r0", "every 1h", "Again.")).await;
    assert!(
        r.text.contains("already has a routine named `r0`"),
        "{}",
        r.text
    );
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn pause_resume_update_run_and_remove() {
    let s = setup(responder()).await;
    // A bot manages its own routines; the main agent sees every bot's.
    s.runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Finds things."))
        .await
        .unwrap();
    let scout = context(&s.runtime, "scout");
    let main = context(&s.runtime, "assistant");
    let made = tool(&scout, create("watch", "every 1h", "say: watched")).await;
    assert_eq!(made.data["owner"], "scout");
    let mine = tool(&main, create("mine", "every 1h", "say: mine")).await;
    assert!(!mine.is_error());
    let listed = tool(&scout, json!({"action": "list"})).await;
    assert_eq!(
        listed.data["routines"].as_array().unwrap().len(),
        1,
        "{}",
        listed.text
    );
    let listed = tool(&main, json!({"action": "list"})).await;
    assert_eq!(
        listed.data["routines"].as_array().unwrap().len(),
        2,
        "{}",
        listed.text
    );
    let r = tool(&scout, json!({"action": "pause", "job_id": "mine"})).await;
    assert!(
        r.text.contains("no routine `mine` for `scout`"),
        "{}",
        r.text
    );

    let r = tool(&scout, json!({"action": "pause", "job_id": "watch"})).await;
    assert_eq!(
        (r.data["status"].clone(), r.data["next_fire_at"].clone()),
        (json!("paused"), json!(null))
    );
    assert!(r.text.contains("paused, no next run"), "{}", r.text);
    s.clock.advance(TimeDelta::minutes(90));
    let due = s.runtime.scheduler().unwrap().tick().await.unwrap();
    assert_eq!(due.claims.len(), 1, "only `mine` fires: {due:?}");
    assert_eq!(due.claims[0].name, "mine");

    let r = tool(&scout, json!({"action": "resume", "job_id": "watch"})).await;
    assert_eq!(r.data["status"], "active");
    assert_eq!(r.data["next_fire_at"], "2026-03-02T10:30:00.000Z");
    let r = tool(
        &scout,
        json!({"action": "update", "job_id": made.data["id"], "schedule": "every day at 18:30", "name": "evening"}),
    )
    .await;
    assert_eq!(
        (r.data["name"].clone(), r.data["next_fire_at"].clone()),
        (json!("evening"), json!("2026-03-02T17:30:00.000Z"))
    );
    let r = tool(
        &scout,
        json!({"action": "update", "job_id": "evening", "schedule": "whenever"}),
    )
    .await;
    assert!(
        r.is_error() && r.text.contains("Accepted schedules"),
        "{}",
        r.text
    );
    let r = tool(&scout, json!({"action": "update", "job_id": "evening"})).await;
    assert!(r.is_error(), "{}", r.text);

    let mut ends = s.runtime.scheduler().unwrap().subscribe();
    let r = tool(&scout, json!({"action": "run", "job_id": "evening"})).await;
    assert!(
        r.text.starts_with("Started a run of `evening` now"),
        "{}",
        r.text
    );
    let end = loop {
        let end = next_end(&mut ends).await;
        if end.name == "evening" {
            break end;
        }
    };
    assert_eq!(
        (end.status, end.summary.as_str(), end.notified),
        (RunStatus::Done, "watched", true)
    );
    let listed = tool(&scout, json!({"action": "list"})).await;
    assert!(listed.text.contains("(done)"), "{}", listed.text);
    assert_eq!(
        listed.data["routines"][0]["next_fire_at"], "2026-03-02T17:30:00.000Z",
        "a manual run leaves the schedule"
    );

    let r = tool(&scout, json!({"action": "remove", "job_id": "evening"})).await;
    assert_eq!(r.data["removed"], true);
    let listed = tool(&scout, json!({"action": "list"})).await;
    assert!(
        listed.text.starts_with("No routines yet."),
        "{}",
        listed.text
    );
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn a_due_routine_runs_as_its_own_conversation_and_notifies_its_owner() {
    let mut s = setup(responder()).await;
    let made = tool(
        &context(&s.runtime, "assistant"),
        create("weather", "every day at 18:30", "say: Sunny all day."),
    )
    .await;
    let scheduler = s.runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    assert_eq!(
        scheduler.tick().await.unwrap().claims,
        vec![],
        "not due yet"
    );
    s.clock
        .set(Utc.with_ymd_and_hms(2026, 3, 2, 17, 30, 0).unwrap());
    let due = scheduler.tick().await.unwrap();
    assert_eq!(due.claims.len(), 1);
    assert_eq!(due.claims[0].scheduled_for, s.clock.now());
    let end = next_end(&mut ends).await;
    assert_eq!(
        (end.status, end.summary.as_str(), end.notified),
        (RunStatus::Done, "Sunny all day.", true)
    );

    let run_conversation = end.conversation.unwrap();
    let node = s.runtime.node().clone();
    let (row, messages) = node
        .store()
        .read(move |c| {
            Ok((
                conversations::get_conversation(c, run_conversation)?.unwrap(),
                conversations::load_messages(c, run_conversation)?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(row.kind, ActorKind::RoutineRun.as_str());
    assert!(
        row.title
            .starts_with("routine weather — 2026-03-02 18:30 CET"),
        "{}",
        row.title
    );
    let first = messages[0].message.text();
    assert!(first.starts_with("[routine `weather`, run "), "{first}");
    assert!(first.ends_with("say: Sunny all day."), "{first}");

    let (conversation, text) = routine_notice(&mut s.bus).await;
    let owner = node.latest_conversation("assistant").await.unwrap();
    assert_eq!(
        conversation, owner,
        "the notice went to the owner's conversation"
    );
    assert_eq!(
        text,
        "Routine `weather` ran (scheduled for 2026-03-02 18:30 CET (17:30 UTC)).\n\nSunny all day."
    );

    let runs = runs_of(&s.runtime, routine_id(&made)).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status, runs[0].summary.as_deref()),
        (RunStatus::Done, Some("Sunny all day."))
    );
    assert_eq!(runs[0].conversation_id, Some(run_conversation));
    assert_eq!(runs[0].claimed_by, scheduler.holder());
    assert_eq!(
        node.live_conversations(),
        1,
        "the run's conversation was closed; the owner's is open"
    );
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn a_silent_run_notifies_nobody() {
    let mut s = setup(responder()).await;
    tool(
        &context(&s.runtime, "assistant"),
        create("quiet", "every 30m", "say: [SILENT] nothing new"),
    )
    .await;
    let scheduler = s.runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    s.clock.advance(TimeDelta::minutes(30));
    assert_eq!(scheduler.tick().await.unwrap().claims.len(), 1);
    let end = next_end(&mut ends).await;
    assert_eq!((end.status, end.notified), (RunStatus::Done, false));
    // A notice would have been committed before the run's end was told:
    // either still in the mailbox or already in the owner's conversation.
    let owner = s.runtime.node().bot("assistant").unwrap().id;
    let (pending, notices) = s
        .runtime
        .node()
        .store()
        .read(move |c| {
            let pending = mailbox::pending(c, &Address::Bot(owner), 10)?;
            let mut notices = 0;
            for row in conversations::list_conversations(c, Some(owner), 50)? {
                notices += conversations::load_messages(c, row.id)?
                    .iter()
                    .filter(|m| m.message.text().starts_with("[notice: routine]"))
                    .count();
            }
            Ok((pending, notices))
        })
        .await
        .unwrap();
    assert_eq!((pending.len(), notices), (0, 0));
    while let Ok(e) = s.bus.try_recv() {
        assert!(!matches!(e.event, AgentEvent::Notice { .. }), "{e:?}");
    }
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn a_failing_run_is_reported_to_its_owner() {
    // No turns: every model call fails.
    let mut s = setup(script(vec![])).await;
    let made = tool(
        &context(&s.runtime, "assistant"),
        create("broken", "every 30m", "say: never"),
    )
    .await;
    let scheduler = s.runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    s.clock.advance(TimeDelta::minutes(30));
    scheduler.tick().await.unwrap();
    let end = next_end(&mut ends).await;
    assert_eq!((end.status, end.notified), (RunStatus::Failed, true));
    assert!(
        end.summary.starts_with("the run failed: "),
        "{}",
        end.summary
    );
    let (_, text) = routine_notice(&mut s.bus).await;
    assert!(
        text.starts_with("Routine `broken` failed (scheduled for 2026-03-02 09:30 CET (08:30 UTC)): the run failed: "),
        "{text}"
    );
    let runs = runs_of(&s.runtime, routine_id(&made)).await;
    assert_eq!(runs[0].status, RunStatus::Failed);
    s.runtime.shutdown().await;
}

/// Two runtimes on one home used to share its routines through leases;
/// a home now has one owner, so the second is refused and the occurrence
/// fires once, in the owner (the leases themselves are tested on the table:
/// `two_holders_on_one_database_fire_each_occurrence_once`).
#[tokio::test]
async fn a_second_runtime_on_one_home_is_refused_and_an_occurrence_fires_once() {
    let s = setup(responder()).await;
    let refused = s
        .home
        .builder(responder())
        .clock(Arc::clone(&s.clock) as _)
        .scheduler(true)
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            troupe::RuntimeError::Home(troupe::runtime::home::LockError::InUse { .. })
        ),
        "{refused}"
    );
    let made = tool(
        &context(&s.runtime, "assistant"),
        create("once", "every 1h", "say: one of us"),
    )
    .await;
    let scheduler = s.runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    s.clock.advance(TimeDelta::hours(1));
    assert_eq!(scheduler.tick().await.unwrap().claims.len(), 1);
    assert_eq!(next_end(&mut ends).await.status, RunStatus::Done);
    assert_eq!(scheduler.tick().await.unwrap().claims, vec![]);
    let runs = runs_of(&s.runtime, routine_id(&made)).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunStatus::Done);
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn a_restart_follows_each_catch_up_policy() {
    for policy in ["skip", "run_once"] {
        let home = TestHome::new();
        let clock = Arc::new(VirtualClock::new(start()));
        let (first, _) = build(&home, responder(), &clock, policy).await;
        let made = tool(
            &context(&first, "assistant"),
            create("daily", "every day at 18:30", "say: caught up"),
        )
        .await;
        assert_eq!(made.data["catch_up"], policy);
        first.shutdown().await;
        drop(first);
        // Two evenings pass while nothing runs.
        clock.set(Utc.with_ymd_and_hms(2026, 3, 4, 8, 0, 0).unwrap());
        let (second, mut bus) = build(&home, responder(), &clock, policy).await;
        let recovered = second.scheduler().unwrap().recovered().clone();
        assert_eq!(recovered.missed.len(), 1, "{policy}: {recovered:?}");
        let missed = &recovered.missed[0];
        let runs = runs_of(&second, routine_id(&made)).await;
        if policy == "skip" {
            assert_eq!((recovered.claims.len(), missed.count), (0, 2));
            let (_, text) = routine_notice(&mut bus).await;
            assert!(text.starts_with("Routine `daily` missed 2 occurrence(s) from 2026-03-02 18:30 CET (17:30 UTC) to 2026-03-03 18:30 CET"), "{text}");
            assert!(
                text.ends_with("They were skipped (catch-up: skip); it fires next as scheduled."),
                "{text}"
            );
            let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
            assert_eq!(statuses, vec![RunStatus::Skipped, RunStatus::Skipped]);
        } else {
            assert_eq!((recovered.claims.len(), missed.count), (1, 1));
            assert_eq!(
                recovered.claims[0].scheduled_for,
                Utc.with_ymd_and_hms(2026, 3, 3, 17, 30, 0).unwrap()
            );
            let mut texts = vec![
                routine_notice(&mut bus).await.1,
                routine_notice(&mut bus).await.1,
            ];
            texts.sort();
            assert!(
                texts[0]
                    .starts_with("Routine `daily` missed 1 occurrence(s) at 2026-03-02 18:30 CET"),
                "{texts:?}"
            );
            assert!(texts[0].contains("One run ("), "{texts:?}");
            assert!(
                texts[1].starts_with("Routine `daily` ran (scheduled for 2026-03-03 18:30 CET"),
                "{texts:?}"
            );
            assert!(texts[1].ends_with("caught up"), "{texts:?}");
        }
        // The next occurrence is the coming evening, either way.
        let listed = tool(&context(&second, "assistant"), json!({"action": "list"})).await;
        assert_eq!(
            listed.data["routines"][0]["next_fire_at"],
            "2026-03-04T17:30:00.000Z"
        );
        second.shutdown().await;
    }
}

#[tokio::test]
async fn a_routine_run_cannot_make_routines_or_ask_the_user() {
    let model = responder();
    let s = setup(Arc::clone(&model)).await;
    let main = context(&s.runtime, "assistant");
    tool(&main, create("probe", "every 1h", "search tools")).await;
    let scheduler = s.runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    let r = tool(&main, json!({"action": "run", "job_id": "probe"})).await;
    assert!(!r.is_error(), "{}", r.text);
    let end = next_end(&mut ends).await;
    assert_eq!(
        (end.status, end.summary.as_str()),
        (RunStatus::Done, "after tool_search")
    );
    let run_requests: Vec<ModelRequest> = model
        .requests()
        .into_iter()
        .filter(|r| {
            r.messages
                .first()
                .is_some_and(|m| m.text().starts_with("[routine `probe`"))
        })
        .collect();
    assert_eq!(run_requests.len(), 2);
    for request in &run_requests {
        let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"tool_search"), "{names:?}");
        for withheld in ["cronjob_manage", "ask_user"] {
            assert!(
                !names.contains(&withheld),
                "a routine run was offered {withheld}: {names:?}"
            );
        }
    }
    let Some(Message::Tool { result, .. }) = run_requests[1].messages.last() else {
        panic!("the second request ends with the search's result");
    };
    let loaded: Vec<&str> = result
        .data
        .get("loaded")
        .and_then(|l| l.as_array())
        .map(|l| l.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default();
    for withheld in ["cronjob_manage", "ask_user"] {
        assert!(
            !loaded.contains(&withheld),
            "the search loaded {withheld}: {result:?}"
        );
    }
    let offered = result
        .text
        .split("The deferred tools are:")
        .nth(1)
        .unwrap_or_default();
    assert!(
        !offered.contains("cronjob_manage") && !offered.contains("ask_user"),
        "{}",
        result.text
    );
    // And called directly from a run's context, the backend refuses.
    let run_ctx = ToolContext {
        kind: ActorKind::RoutineRun,
        ..context(&s.runtime, "assistant")
    };
    let r = tool(&run_ctx, json!({"action": "list"})).await;
    assert_eq!(
        r.text,
        "a routine_run cannot manage routines; ask the owner's conversation to do it"
    );
    s.runtime.shutdown().await;
}

#[tokio::test]
async fn on_timers_the_scheduler_fires_without_being_told() {
    use troupe::actors::routine::scheduler::{SchedulerHandle, SchedulerOptions, Wake};

    let home = TestHome::new();
    let clock = Arc::new(VirtualClock::new(start()));
    let runtime = home
        .builder(responder())
        .clock(Arc::clone(&clock) as _)
        .build()
        .await
        .unwrap();
    assert!(runtime.scheduler().is_none(), "off unless asked for");
    let node = runtime.node().clone();
    let idle = tool(
        &context(&runtime, "assistant"),
        create("tick", "every 1m", "say: tock"),
    )
    .await;
    assert!(idle.text.ends_with("No scheduler runs in this process: routines fire while `troupe serve` (or `troupe chat`) runs on this home."), "{}", idle.text);
    // 50 ms of virtual time before it is due: the timer wakes after 55 ms
    // of real time, finds nothing (the virtual clock stood still), and
    // sleeps again until the clock has moved.
    clock.set(start() + TimeDelta::seconds(60) - TimeDelta::milliseconds(50));
    let scheduler = SchedulerHandle::start(
        &node,
        SchedulerOptions {
            clock: Arc::clone(&clock) as _,
            wake: Wake::Timers,
            ..SchedulerOptions::default()
        },
    )
    .await
    .unwrap();
    let mut ends = scheduler.subscribe();
    clock.advance(TimeDelta::milliseconds(50));
    let end = next_end(&mut ends).await;
    assert_eq!((end.name.as_str(), end.status), ("tick", RunStatus::Done));
    scheduler.stop().await;
    runtime.shutdown().await;
}

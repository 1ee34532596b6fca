//! **Idle token burn.** A home with a bot, a house where that bot listens
//! to everything, and routines (one paused) is used once, then left idle
//! for a day of its clock, across a passivation and a restart. Counting the
//! scripted model's calls: none happens that no message, routine or user
//! asked for. The only calls of the idle day are the routine's run and its
//! owner reading the routine's notice.

use std::sync::Arc;

use chrono::{TimeDelta, TimeZone, Utc};
use tokio::sync::broadcast;
use troupe::actors::events::NodeEvent;
use troupe::actors::routine::{Clock, VirtualClock};
use troupe::runtime::model::{ModelRequest, ScriptedProvider};
use troupe::runtime::protocol::house::ListenMode;
use troupe::runtime::protocol::Message;
use troupe::{AgentEvent, BotSpec, Runtime};

use crate::suite::routines::{context, create, next_end, responder, start, tool};
use crate::suite::support::*;

async fn boot(
    home: &TestHome,
    model: Arc<ScriptedProvider>,
    clock: &Arc<VirtualClock>,
) -> (Runtime, broadcast::Receiver<NodeEvent>) {
    let (bus, rx) = broadcast::channel(4096);
    let runtime = home
        .builder(model)
        .clock(Arc::clone(clock) as _)
        .scheduler(true)
        .event_bus(bus)
        .set("agent.timezone", "Europe/Paris")
        .set("router.idle_secs", "1")
        .build()
        .await
        .unwrap();
    (runtime, rx)
}

fn asked_by_the_routine(request: &ModelRequest) -> bool {
    let first = request.messages.first().map(Message::text).unwrap_or("");
    let last = request.messages.last().map(Message::text).unwrap_or("");
    first.starts_with("[routine `evening`") || last.starts_with("[notice: routine]")
}

#[tokio::test]
async fn an_idle_home_calls_no_model_unless_a_message_or_routine_asks() {
    let home = TestHome::new();
    let clock = Arc::new(VirtualClock::new(start()));
    let model = responder();
    let (runtime, mut bus) = boot(&home, Arc::clone(&model), &clock).await;

    // Used once: a house round, a routine made, a question asked.
    runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Answers in the house."))
        .await
        .unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    acme.add_human("ada", Some("Ada")).await.unwrap();
    acme.add_bot("scout", ListenMode::All).await.unwrap();
    let general = acme
        .create_thread(
            Some("general"),
            &[],
            "ada",
            &["ada".to_string(), "scout".to_string()],
        )
        .await
        .unwrap();
    let round = general
        .post_and_wait("ada", "hello all", WAIT)
        .await
        .unwrap();
    assert_eq!(round.len(), 1, "scout answered: {round:?}");
    let ctx = context(&runtime, "assistant");
    tool(&ctx, create("evening", "every day at 18:30", "say: digest")).await;
    tool(&ctx, create("paused", "every 30m", "say: never")).await;
    let paused = tool(
        &ctx,
        serde_json::json!({"action": "pause", "job_id": "paused"}),
    )
    .await;
    assert!(!paused.is_error(), "{}", paused.text);
    let main = runtime.bot("assistant").await.unwrap();
    ask(&main, "hi").await;
    let used = model.calls();
    assert_eq!(used, 2, "one house answer, one turn");

    // Idle: the conversation passivates, the clock runs to the evening.
    on_bus(&mut bus, |e| {
        (e.conversation == main.conversation() && matches!(e.event, AgentEvent::Passivated))
            .then_some(())
    })
    .await;
    let scheduler = runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    let mut at = start();
    while at < Utc.with_ymd_and_hms(2026, 3, 2, 17, 0, 0).unwrap() {
        at += TimeDelta::minutes(30);
        clock.set(at);
        assert_eq!(scheduler.tick().await.unwrap().claims, vec![], "at {at}");
    }
    assert_eq!(model.calls(), used, "nothing asked, nothing called");

    // The routine asks: its run, and its owner reading the notice.
    clock.set(Utc.with_ymd_and_hms(2026, 3, 2, 17, 30, 0).unwrap());
    assert_eq!(scheduler.tick().await.unwrap().claims.len(), 1);
    next_end(&mut ends).await;
    let owner = on_bus(&mut bus, |e| match &e.event {
        AgentEvent::Notice { topic, .. } if topic == "routine" => Some(e.conversation),
        _ => None,
    })
    .await;
    on_bus(&mut bus, |e| {
        (e.conversation == owner && matches!(e.event, AgentEvent::TurnFinished { .. }))
            .then_some(())
    })
    .await;
    let idle_day = model.requests()[used..].to_vec();
    assert_eq!(idle_day.len(), 2, "{idle_day:#?}");
    assert!(idle_day.iter().all(asked_by_the_routine), "{idle_day:#?}");
    runtime.shutdown().await;
    drop(runtime);

    // A restart, and the night and the next day until before the evening.
    let model = responder();
    let (runtime, _bus) = boot(&home, Arc::clone(&model), &clock).await;
    let scheduler = runtime.scheduler().unwrap();
    let mut at = clock.now();
    while at < Utc.with_ymd_and_hms(2026, 3, 3, 16, 30, 0).unwrap() {
        at += TimeDelta::minutes(30);
        clock.set(at);
        assert_eq!(scheduler.tick().await.unwrap().claims, vec![], "at {at}");
    }
    assert_eq!(model.calls(), 0, "{:#?}", model.requests());
    let read = runtime
        .house("acme")
        .await
        .unwrap()
        .thread("general")
        .await
        .unwrap()
        .read(0, 10)
        .await
        .unwrap();
    assert_eq!(read.len(), 2, "nobody spoke in the house: {read:?}");
    runtime.shutdown().await;
}

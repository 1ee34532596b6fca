//! Who sees and reaches a program's actors: a house's bots reach an
//! offered kind, each house its own keys (or shared ones, if the program
//! says so); the runtime's events name the actor they come from; a turn,
//! the runtime's events and a thread's messages are streams.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::{
    ActorError, ActorName, AgentEvent, BotSpec, Context, EventSource, HouseKeys, KindOptions,
    UserActor,
};

use super::support::{on_bus, TestHome, WAIT};

/// A tally: `n` adds n; the reply is the total.
struct Tally;

#[troupe::async_trait]
impl UserActor for Tally {
    type Msg = u64;
    type Reply = u64;
    type State = u64;

    async fn handle(&self, cx: &mut Context<'_, Self>, n: u64) -> Result<u64, ActorError> {
        *cx.state_mut() += n;
        cx.save();
        Ok(*cx.state())
    }
}

/// A bot's turn in a house thread: it adds `n` to the tally, then says so
/// when the tally's reply comes back.
fn adds(n: u64) -> Vec<Turn> {
    vec![
        Turn::tool_call(
            "message_agent",
            json!({"target": "tally", "message": n.to_string()}),
        ),
        Turn::text("sent").expecting("Delivered to `tally`"),
        Turn::text("noted").expecting("`tally/"),
    ]
}

/// Two houses whose bots each add to the tally offered with `keys`; the
/// totals of `main`, `acme:main` and `beta:main` after both replies came
/// back, and what acme's bot was told in its system prompt.
async fn two_houses_add(keys: HouseKeys) -> ([u64; 3], String) {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::per_bot(
        "houses".into(),
        vec![("anna".into(), adds(5)), ("bodo".into(), adds(7))],
    ));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let rt = home
        .builder(Arc::clone(&model))
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let tally = rt
        .register_with(
            "tally",
            KindOptions::default()
                .offer("a tally: send it a number to add")
                .house_keys(keys),
            |_: &str| Tally,
        )
        .await
        .unwrap();
    for (house, person, bot) in [("acme", "ada", "anna"), ("beta", "bob", "bodo")] {
        rt.spawn_bot(BotSpec::new(bot, bot, "A member."))
            .await
            .unwrap();
        let h = rt.create_house(house).await.unwrap();
        h.add_human(person, None).await.unwrap();
        h.add_bot(bot, ListenMode::All).await.unwrap();
        let thread = h
            .create_thread(Some("general"), &[], person, &[person.into(), bot.into()])
            .await
            .unwrap();
        thread
            .post_and_wait(person, "add yours", WAIT)
            .await
            .unwrap();
    }
    // Each bot's last turn ends on the tally's reply.
    for _ in ["anna", "bodo"] {
        on_bus(&mut events, |e| match &e.event {
            AgentEvent::TurnFinished { text, .. } if text == "noted" => Some(()),
            _ => None,
        })
        .await;
    }
    let mut totals = [0; 3];
    for (total, key) in totals.iter_mut().zip(["main", "acme:main", "beta:main"]) {
        *total = rt.call(&tally.address(key), 0).await.unwrap();
    }
    let system = model.bot("anna").unwrap().requests()[0].system.to_string();
    rt.shutdown().await;
    (totals, system)
}

#[tokio::test]
async fn a_house_bot_reaches_an_offered_kind_under_its_own_house_keys() {
    let (totals, system) = two_houses_add(HouseKeys::PerHouse).await;
    assert_eq!(totals, [0, 5, 7], "[main, acme:main, beta:main]");
    assert!(system.contains("- tally: a tally"), "{system}");
}

#[tokio::test]
async fn houses_share_an_offered_kind_s_keys_when_the_program_says_so() {
    let (totals, _) = two_houses_add(HouseKeys::Shared).await;
    assert_eq!(totals, [12, 0, 0], "[main, acme:main, beta:main]");
}

#[tokio::test]
async fn the_runtime_s_events_are_a_stream_naming_the_actor_or_conversation() {
    let home = TestHome::new();
    let rt = home
        .builder(Arc::new(ScriptedProvider::new(vec![Turn::text("hi")])))
        .build()
        .await
        .unwrap();
    let mut events = rt.events();
    let tally = rt.register("tally", |_: &str| Tally).await.unwrap();
    assert_eq!(rt.call(&tally.address("t1"), 2).await.unwrap(), 2);
    let bot = rt
        .spawn_bot(BotSpec::new("scout", "Scout", "Scouts."))
        .await
        .unwrap();
    let mut turn = bot.send("hello").await.unwrap();
    let mut last = None;
    while let Some(event) = tokio::time::timeout(WAIT, turn.next()).await.unwrap() {
        last = Some(event);
    }
    assert!(
        matches!(&last, Some(AgentEvent::TurnFinished { text, .. }) if text == "hi"),
        "{last:?}"
    );

    let expected = ActorName {
        kind: "tally".into(),
        key: "t1".into(),
    };
    let (mut actor_started, mut turn_finished) = (false, false);
    while !(actor_started && turn_finished) {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .unwrap()
            .expect("the runtime runs");
        match (event.source(), &event.event) {
            (EventSource::Actor(name), AgentEvent::ActorStarted { id, .. }) => {
                assert_eq!((name, id.as_str()), (&expected, "tally/t1"));
                actor_started = true;
            }
            (EventSource::Conversation(id), AgentEvent::TurnFinished { text, .. }) => {
                assert_eq!((id, text.as_str()), (bot.conversation(), "hi"));
                turn_finished = true;
            }
            (EventSource::Actor(name), other) => {
                panic!("{name} sent {other:?} before it started")
            }
            (EventSource::Conversation(_), _) => {}
        }
    }
    assert_eq!(events.missed(), 0);
    rt.shutdown().await;
    // Shut down: what was published before is handed out, then the end.
    let rest = tokio::time::timeout(WAIT, events.collect::<Vec<_>>())
        .await
        .expect("the stream ends with the runtime");
    assert!(
        rest.iter()
            .all(|e| !matches!(e.event, AgentEvent::TurnStarted { .. })),
        "{rest:?}"
    );
}

#[tokio::test]
async fn a_thread_s_messages_are_a_stream() {
    let home = TestHome::new();
    let rt = home
        .builder(Arc::new(ScriptedProvider::new(vec![Turn::text(
            "hello ada",
        )])))
        .build()
        .await
        .unwrap();
    rt.spawn_bot(BotSpec::new("duo", "Duo", "A member."))
        .await
        .unwrap();
    let house = rt.create_house("acme").await.unwrap();
    house.add_human("ada", None).await.unwrap();
    house.add_bot("duo", ListenMode::All).await.unwrap();
    let thread = house
        .create_thread(Some("general"), &[], "ada", &["ada".into(), "duo".into()])
        .await
        .unwrap();
    let messages = thread.messages();
    let events = thread.events();
    thread.post("ada", "hi duo").await.unwrap();
    let said: Vec<(String, String)> = tokio::time::timeout(
        WAIT,
        messages
            .take(2)
            .map(|m| (m.message.author, m.message.text))
            .collect(),
    )
    .await
    .unwrap();
    assert_eq!(
        said,
        vec![
            ("ada".to_string(), "hi duo".to_string()),
            ("duo".to_string(), "hello ada".to_string())
        ]
    );
    rt.shutdown().await;
    // The thread's events end with the runtime, the round's settling
    // among them.
    let seen = tokio::time::timeout(WAIT, events.collect::<Vec<_>>())
        .await
        .expect("the thread's events end with the runtime");
    assert!(
        matches!(seen.last(), Some(troupe::ThreadEvent::RoundSettled { .. })),
        "{seen:?}"
    );
}

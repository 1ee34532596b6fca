//! The house through the Rust API with per-bot scripts: the director's
//! rules, cross-thread posts, every thread tool's happy path and refusals,
//! isolation between houses, and a round cut by a restart.

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::house::{ListenMode, MemberKind, ThreadMessage};
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::{BotSpec, HouseRef, HouseRules, Runtime, ThreadRef};

use super::support::{TestHome, WAIT};

fn bots(scripts: Vec<(&str, Vec<Turn>)>) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        scripts
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
    ))
}

/// A runtime with the bots `names` (beside the main agent), a house
/// `acme` with the person `ada` and those bots at `listen`, and a thread
/// `general` where everyone takes part.
async fn house(
    home: &TestHome,
    model: Arc<ScriptedProvider>,
    names: &[(&str, ListenMode)],
) -> (Runtime, HouseRef, ThreadRef) {
    house_with(home, model, &[], names).await
}

/// Like [`house`], with settings (`section.key`, value) set.
async fn house_with(
    home: &TestHome,
    model: Arc<ScriptedProvider>,
    settings: &[(&str, &str)],
    names: &[(&str, ListenMode)],
) -> (Runtime, HouseRef, ThreadRef) {
    let mut builder = home.builder(model);
    for (k, v) in settings {
        builder = builder.set(*k, *v);
    }
    let runtime = builder.build().await.unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    acme.add_human("ada", Some("Ada")).await.unwrap();
    let mut people = vec!["ada".to_string()];
    for (name, listen) in names {
        if runtime.node().bot(name).is_err() {
            runtime
                .spawn_bot(BotSpec::new(*name, *name, "A member of the house."))
                .await
                .unwrap();
        }
        acme.add_bot(name, *listen).await.unwrap();
        people.push(name.to_string());
    }
    let general = acme
        .create_thread(Some("general"), &[], "ada", &people)
        .await
        .unwrap();
    (runtime, acme, general)
}

async fn post(thread: &ThreadRef, text: &str) -> Vec<ThreadMessage> {
    thread
        .post_and_wait("ada", text, WAIT)
        .await
        .expect("the round settles")
}

fn authors(messages: &[ThreadMessage]) -> Vec<String> {
    messages.iter().map(|m| m.author.clone()).collect()
}

/// The results of the tools `bot` called, in order, from its latest request.
fn results(model: &ScriptedProvider, bot: &str) -> Vec<(String, ToolResult)> {
    let requests = model.bot(bot).expect("scripted").requests();
    let last = requests.last().expect("the bot was called");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } => Some((name.clone(), result.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn listen_modes_and_mentions_decide_who_answers() {
    let home = TestHome::new();
    let model = bots(vec![
        (
            "alice",
            vec![Turn::text("alice here"), Turn::text("alice again")],
        ),
        ("bob", vec![Turn::text("bob here")]),
        ("carol", vec![]),
    ]);
    let (_rt, _acme, general) = house(
        &home,
        model.clone(),
        &[
            ("alice", ListenMode::All),
            ("bob", ListenMode::Mentions),
            ("carol", ListenMode::Off),
        ],
    )
    .await;
    // No mention: the bots listening to all answer.
    assert_eq!(authors(&post(&general, "good morning").await), ["alice"]);
    // A mention chooses who answers.
    assert_eq!(authors(&post(&general, "@bob, your view?").await), ["bob"]);
    // A bot that listens to nothing is not offered a turn, even when named.
    assert!(post(&general, "@carol are you there?").await.is_empty());
    assert_eq!(model.bot("carol").unwrap().calls(), 0);
    // The bots saw the thread: alice's second turn shows what came since.
    assert_eq!(authors(&post(&general, "bye").await), ["alice"]);
    let seen = model.bot("alice").unwrap().requests();
    let offer = seen.last().unwrap().messages.last().unwrap().text();
    assert!(
        offer.contains("[bob] bob here") && offer.contains("[ada] @carol are you there?"),
        "{offer}"
    );
    assert!(
        !offer.contains("[alice]"),
        "its own messages are not repeated: {offer}"
    );
}

#[tokio::test]
async fn a_chain_of_bots_stops_at_the_cap_and_the_loop_guard() {
    let ping = |n: usize, to: &str| {
        (0..n)
            .map(|i| Turn::text(format!("@{to} turn {i}")))
            .collect::<Vec<_>>()
    };
    // The chain bound: three bot turns from one person's message.
    let home = TestHome::new();
    let model = bots(vec![("alice", ping(5, "bob")), ("bob", ping(5, "alice"))]);
    let (_rt, acme, general) = house(
        &home,
        model,
        &[
            ("alice", ListenMode::Mentions),
            ("bob", ListenMode::Mentions),
        ],
    )
    .await;
    acme.set_rules(HouseRules {
        max_turns_per_round: 10,
        max_chain: 3,
        context_messages: 30,
    })
    .await
    .unwrap();
    let round = post(&general, "@alice start").await;
    assert_eq!(authors(&round), ["alice", "bob", "alice"]);

    // The pair guard: two exchanges between a pair, then it cools down.
    let home = TestHome::new();
    let model = bots(vec![("alice", ping(5, "bob")), ("bob", ping(5, "alice"))]);
    let (_rt, acme, general) = house_with(
        &home,
        model,
        &[("messaging.loop_max_exchanges", "2")],
        &[
            ("alice", ListenMode::Mentions),
            ("bob", ListenMode::Mentions),
        ],
    )
    .await;
    acme.set_rules(HouseRules {
        max_turns_per_round: 10,
        max_chain: 10,
        context_messages: 30,
    })
    .await
    .unwrap();
    let round = post(&general, "@alice start").await;
    // alice→bob and bob→alice pass; the third exchange is refused.
    assert_eq!(authors(&round), ["alice", "bob", "alice"]);
}

#[tokio::test]
async fn the_round_cap_bounds_the_bots_offered_on_one_message() {
    let home = TestHome::new();
    let one = |s: &str| vec![Turn::text(s)];
    let model = bots(vec![
        ("a1", one("1")),
        ("a2", one("2")),
        ("a3", one("3")),
        ("a4", one("4")),
    ]);
    let (_rt, acme, general) = house(
        &home,
        model,
        &[
            ("a1", ListenMode::All),
            ("a2", ListenMode::All),
            ("a3", ListenMode::All),
            ("a4", ListenMode::All),
        ],
    )
    .await;
    acme.set_rules(HouseRules {
        max_turns_per_round: 2,
        ..HouseRules::default()
    })
    .await
    .unwrap();
    let round = post(&general, "everyone?").await;
    assert_eq!(round.len(), 2, "{round:?}");
}

#[tokio::test]
async fn a_cross_thread_post_wakes_the_other_director_and_keeps_identity() {
    let home = TestHome::new();
    let model = bots(vec![
        (
            "alice",
            vec![
                Turn::tool_call(
                    "post_to_thread",
                    json!({"thread": "ops", "text": "@bob the deploy is blocked"}),
                ),
                Turn::text("I told ops."),
            ],
        ),
        ("bob", vec![Turn::text("On it.")]),
    ]);
    let (_rt, acme, general) = house(
        &home,
        model.clone(),
        &[("alice", ListenMode::All), ("bob", ListenMode::Mentions)],
    )
    .await;
    let ops = acme
        .create_thread(Some("ops"), &[], "ada", &["bob".into()])
        .await
        .unwrap();
    let mut events = ops.events();
    assert_eq!(authors(&post(&general, "tell ops").await), ["alice"]);
    // The other thread's round: alice's post, then bob's answer.
    let mut landed = Vec::new();
    tokio::time::timeout(WAIT, async {
        while let Some(e) = events.next().await {
            match e {
                troupe::ThreadEvent::Posted(p) => landed.push(p.message),
                troupe::ThreadEvent::RoundSettled { .. } if landed.len() == 2 => break,
                _ => {}
            }
        }
    })
    .await
    .expect("the ops round settles");
    assert_eq!(authors(&landed), ["alice", "bob"]);
    assert_eq!(landed[0].author_kind, MemberKind::Bot);
    assert_eq!(
        landed[0].via,
        Some(general.info.id),
        "it says where it came from"
    );
    let results = results(&model, "alice");
    assert!(
        results[0]
            .1
            .text
            .contains("Posted to thread `ops` as `alice`"),
        "{results:?}"
    );
}

#[tokio::test]
async fn the_thread_tools_work_and_refuse_what_they_should() {
    let home = TestHome::new();
    let call = |name: &str, args: serde_json::Value| Turn::tool_call(name, args);
    let model = bots(vec![(
        "alice",
        vec![
            call("create_thread", json!({"name": "launch", "tags": ["q3"]})),
            call("create_thread", json!({"name": "launch"})),
            call(
                "post_to_thread",
                json!({"thread": "launch", "text": "kickoff notes: PERIWINKLE"}),
            ),
            call(
                "post_to_thread",
                json!({"thread": "general", "text": "to myself"}),
            ),
            call("read_thread", json!({"ref": "launch"})),
            call("search_threads", json!({"query": "periwinkle"})),
            call("list_threads", json!({"mine": true})),
            call("list_thread_participants", json!({"thread": "launch"})),
            call(
                "add_thread_participant",
                json!({"thread": "launch", "agent": "ada"}),
            ),
            call(
                "add_thread_participant",
                json!({"thread": "launch", "agent": "ada"}),
            ),
            call(
                "add_thread_participant",
                json!({"thread": "launch", "agent": "nobody"}),
            ),
            call(
                "remove_thread_participant",
                json!({"thread": "launch", "agent": "ada"}),
            ),
            call("list_house_members", json!({})),
            call(
                "ask_thread",
                json!({"ref": "launch", "question": "what is the code word?"}),
            ),
            Turn::text("The code word is PERIWINKLE.").expecting("PERIWINKLE"),
            call("create_agent", json!({"name": "scribe", "trigger": "all"})),
            call(
                "create_agent",
                json!({"name": "scribe2", "trigger": "sometimes"}),
            ),
            call("read_thread", json!({"ref": "nowhere"})),
            call("archive_thread", json!({})),
            call("archive_thread", json!({})),
            Turn::text("done"),
        ],
    )]);
    let (rt, acme, general) = house(&home, model.clone(), &[("alice", ListenMode::All)]).await;
    post(&general, "please organise the launch").await;
    let r = results(&model, "alice");
    let names: Vec<&str> = r.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 19, "{names:?}");
    let ok = |i: usize| assert!(!r[i].1.is_error(), "{}: {}", r[i].0, r[i].1.text);
    let refused = |i: usize, says: &str| {
        assert!(
            r[i].1.is_error(),
            "{} should refuse: {}",
            r[i].0,
            r[i].1.text
        );
        assert!(r[i].1.text.contains(says), "{}: {}", r[i].0, r[i].1.text);
    };
    ok(0);
    assert_eq!(r[0].1.data["name"], "launch");
    assert!(r[0].1.data["link"]
        .as_str()
        .unwrap()
        .starts_with("troupe://thread/"));
    refused(1, "already");
    ok(2);
    refused(3, "that is this thread");
    ok(4);
    assert!(
        r[4].1.text.contains("[alice (posted from"),
        "{}",
        r[4].1.text
    );
    ok(5);
    assert!(
        r[5].1.text.contains("[PERIWINKLE]") || r[5].1.text.contains("PERIWINKLE"),
        "{}",
        r[5].1.text
    );
    ok(6);
    assert!(
        r[6].1.text.contains("`launch`") && r[6].1.text.contains("you are in it"),
        "{}",
        r[6].1.text
    );
    ok(7);
    assert!(r[7].1.text.contains("alice (bot"), "{}", r[7].1.text);
    ok(8);
    refused(9, "already");
    refused(10, "not a member");
    ok(11);
    ok(12);
    assert!(
        r[12].1.text.contains("ada (person")
            && r[12].1.text.contains("alice (bot, listens to all)")
    );
    ok(13);
    assert_eq!(r[13].1.text, "The code word is PERIWINKLE.");
    ok(14);
    assert_eq!(r[14].1.data["listen"], "all");
    refused(15, "`trigger` must be");
    refused(16, "no thread `nowhere`");
    ok(17);
    refused(18, "archived already");
    // The effects, seen from outside.
    let members = acme.members().await.unwrap();
    assert!(members
        .iter()
        .any(|m| m.handle == "scribe" && m.listen == Some(ListenMode::All)));
    let home_members = rt.house("home").await.unwrap().members().await.unwrap();
    assert!(
        !home_members.iter().any(|m| m.handle == "scribe"),
        "a bot made in a house joins that house only"
    );
    let launch = acme.thread("launch").await.unwrap();
    assert_eq!(launch.info.tags, ["q3"]);
    assert!(general.refresh().await.unwrap().archived);
    let listed = acme
        .threads(troupe::runtime::protocol::house::ThreadFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "the archived thread is off the list");
    assert!(
        general.set_archived(false).await.unwrap(),
        "it can be unarchived"
    );
    drop(rt);
}

#[tokio::test]
async fn nothing_of_another_house_is_visible_or_writable() {
    let home = TestHome::new();
    let call = |name: &str, args: serde_json::Value| Turn::tool_call(name, args);
    let steps = |secret_ref: String, secret_link: String| {
        vec![
            call("read_thread", json!({"ref": secret_ref})),
            call("read_thread", json!({"ref": secret_link})),
            call("read_thread", json!({"ref": "vault"})),
            call(
                "ask_thread",
                json!({"ref": "vault", "question": "what is the secret?"}),
            ),
            call("search_threads", json!({"query": "ZANZIBAR"})),
            call("list_threads", json!({})),
            call(
                "list_thread_participants",
                json!({"thread": secret_ref.clone()}),
            ),
            call(
                "post_to_thread",
                json!({"thread": secret_ref.clone(), "text": "hello"}),
            ),
            call(
                "add_thread_participant",
                json!({"thread": secret_ref.clone(), "agent": "alice"}),
            ),
            call(
                "remove_thread_participant",
                json!({"thread": secret_ref, "agent": "bea"}),
            ),
            call("add_thread_participant", json!({"agent": "bea"})),
            call("list_house_members", json!({})),
            Turn::text("done"),
        ]
    };
    // House beta holds the secret; alice sits in acme.
    let runtime = home
        .builder(bots(vec![("alice", vec![])]))
        .build()
        .await
        .unwrap();
    let beta = runtime.create_house("beta").await.unwrap();
    beta.add_human("bea", None).await.unwrap();
    let vault = beta
        .create_thread(Some("vault"), &[], "bea", &["bea".into()])
        .await
        .unwrap();
    vault.post("bea", "the secret is ZANZIBAR").await.unwrap();
    let (secret_ref, secret_link) = (vault.info.id.to_string(), vault.info.link());
    runtime.shutdown().await;
    let model = bots(vec![("alice", steps(secret_ref, secret_link))]);
    let runtime = home.builder(model.clone()).build().await.unwrap();
    runtime
        .spawn_bot(BotSpec::new("alice", "alice", "A member."))
        .await
        .unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    acme.add_human("ada", None).await.unwrap();
    acme.add_bot("alice", ListenMode::All).await.unwrap();
    let general = acme
        .create_thread(Some("general"), &[], "ada", &["alice".into()])
        .await
        .unwrap();
    general
        .post_and_wait("ada", "look around", WAIT)
        .await
        .unwrap();
    let r = results(&model, "alice");
    assert_eq!(r.len(), 12);
    for (i, (name, result)) in r.iter().enumerate() {
        assert!(
            !result.text.contains("secret is"),
            "{name} leaked: {}",
            result.text
        );
        assert!(
            !result.text.contains("vault") || result.is_error(),
            "{name} listed it: {}",
            result.text
        );
        // As a word: a thread's id is hex and may hold the letters.
        let names_bea = result
            .text
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == "bea");
        assert!(
            !names_bea || result.is_error(),
            "{name} showed bea: {}",
            result.text
        );
        match i {
            4 => assert!(result.text.contains("No messages"), "{}", result.text),
            5 | 11 => assert!(!result.is_error()),
            _ => assert!(
                result.is_error(),
                "{name} #{i} should refuse: {}",
                result.text
            ),
        }
    }
    // And beta's thread is untouched.
    let beta = runtime.house("beta").await.unwrap();
    let vault = beta.thread("vault").await.unwrap();
    assert_eq!(vault.read(0, 10).await.unwrap().len(), 1);
    assert_eq!(vault.info.participants, ["bea"]);
    // The Rust API is scoped the same way.
    assert!(acme.thread(&vault.info.id.to_string()).await.is_err());
    assert!(acme.search("ZANZIBAR", 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_round_cut_by_a_restart_posts_each_answer_once() {
    let home = TestHome::new();
    let gate = super::support::Gate::new("slow_lookup");
    let model = bots(vec![(
        "alice",
        vec![
            Turn::tool_call("slow_lookup", json!({})),
            Turn::text("Answer after the restart."),
        ],
    )]);
    let (runtime, _acme, general) = {
        let runtime = home
            .builder(model.clone())
            .tool(gate.clone())
            .build()
            .await
            .unwrap();
        runtime
            .spawn_bot(BotSpec::new("alice", "alice", "A member."))
            .await
            .unwrap();
        let acme = runtime.create_house("acme").await.unwrap();
        acme.add_human("ada", None).await.unwrap();
        acme.add_bot("alice", ListenMode::All).await.unwrap();
        let general = acme
            .create_thread(Some("general"), &[], "ada", &["alice".into()])
            .await
            .unwrap();
        (runtime, acme, general)
    };
    let round = general.post("ada", "look it up").await.unwrap();
    tokio::time::timeout(WAIT, gate.entered.notified())
        .await
        .expect("the bot's turn reaches its tool");
    // The process goes away mid-turn: the turn stays open in the store.
    runtime.shutdown().await;
    drop(runtime);
    let runtime = home
        .builder(model)
        .tool(gate.clone())
        .build()
        .await
        .unwrap();
    let general = runtime
        .house("acme")
        .await
        .unwrap()
        .thread("general")
        .await
        .unwrap();
    // Subscribe, then look: what landed before is in the store, what
    // lands after is an event.
    let mut events = general.events();
    tokio::time::timeout(WAIT, async {
        while general.read(0, 50).await.unwrap().len() < 2 {
            events.next().await;
        }
    })
    .await
    .expect("the resumed turn answers in the thread");
    let _ = round;
    let messages = general.read(0, 50).await.unwrap();
    assert_eq!(authors(&messages), ["ada", "alice"], "{messages:?}");
    assert_eq!(messages[1].text, "Answer after the restart.");
    assert_eq!(*gate.calls.lock(), 1, "the tool in flight is not run again");
}

#[tokio::test]
async fn a_bot_that_crashes_mid_round_is_restarted_and_answers_once() {
    let home = TestHome::new();
    let model = bots(vec![(
        "alice",
        vec![
            Turn::fault(troupe::runtime::model::Fault::Panic),
            Turn::text("Back, and here is the answer."),
        ],
    )]);
    let (_rt, _acme, general) = house(&home, model.clone(), &[("alice", ListenMode::All)]).await;
    let round = post(&general, "a question").await;
    assert_eq!(authors(&round), ["alice"]);
    assert_eq!(round[0].text, "Back, and here is the answer.");
    assert_eq!(
        general.read(0, 10).await.unwrap().len(),
        2,
        "one post, one answer"
    );
    assert_eq!(model.bot("alice").unwrap().calls(), 2);
}

#[tokio::test]
async fn a_bots_thread_conversation_is_not_its_own() {
    let home = TestHome::new();
    let model = bots(vec![(
        "alice",
        vec![Turn::text("in the thread"), Turn::text("in my own")],
    )]);
    let (rt, _acme, general) = house(&home, model, &[("alice", ListenMode::All)]).await;
    let own = rt.bot("alice").await.unwrap().conversation();
    post(&general, "hello").await;
    // Messages to the bot, and its conversation in the Rust API, stay its own.
    assert_eq!(rt.bot("alice").await.unwrap().conversation(), own);
    rt.shutdown().await;
    let model = bots(vec![("alice", vec![])]);
    let rt = home.builder(model).build().await.unwrap();
    assert_eq!(
        rt.bot("alice").await.unwrap().conversation(),
        own,
        "after a restart too"
    );
}

#[tokio::test]
async fn a_bot_in_two_houses_does_not_carry_one_into_the_other_by_search() {
    let home = TestHome::new();
    let model = bots(vec![(
        "alice",
        vec![
            Turn::text("Noted: the vault code is ZANZIBAR."),
            Turn::tool_call("tool_search", json!({"query": "conversation_search"})),
            Turn::tool_call("conversation_search", json!({"query": "zanzibar"})),
            Turn::text("nothing"),
        ],
    )]);
    let (rt, _acme, general) = house(&home, model.clone(), &[("alice", ListenMode::All)]).await;
    let beta = rt.create_house("beta").await.unwrap();
    beta.add_human("bea", None).await.unwrap();
    beta.add_bot("alice", ListenMode::All).await.unwrap();
    let vault = beta
        .create_thread(Some("vault"), &[], "bea", &["bea".into(), "alice".into()])
        .await
        .unwrap();
    vault
        .post_and_wait("bea", "remember the code ZANZIBAR", WAIT)
        .await
        .unwrap();
    post(&general, "what do you know?").await;
    let r = results(&model, "alice");
    let (name, found) = &r[1];
    assert_eq!(name, "conversation_search");
    assert!(!found.is_error(), "{}", found.text);
    assert!(!found.text.contains("ZANZIBAR"), "{}", found.text);
}

/// A person's post reaches its thread while its commit is under way
/// (`ThreadRef::post`): the thread applies a post only if it is in the
/// mailbox by then. So a post handed over that never committed is not
/// taken, and is taken once it has.
#[tokio::test]
async fn a_thread_takes_a_post_only_once_it_is_in_the_mailbox() {
    use troupe::runtime::id::MsgId;
    use troupe::runtime::protocol::house::Post;
    use troupe::runtime::protocol::{Address, Envelope, Payload};
    let home = TestHome::new();
    let model = bots(vec![(
        "alice",
        vec![Turn::text("one"), Turn::text("two"), Turn::text("three")],
    )]);
    let (rt, _acme, general) = house(&home, model, &[("alice", ListenMode::All)]).await;
    let node = rt.node();
    let envelope = Envelope {
        id: MsgId::new(),
        from: Address::Service("human:ada".into()),
        to: Address::Thread(general.info.id),
        body: Payload::Post(Post {
            author: "ada".into(),
            author_kind: MemberKind::Human,
            text: "not committed yet".into(),
            round: None,
            depth: 0,
            via: None,
            answers_offer: false,
            failed: None,
            attachments: Vec::new(),
        }),
        sent_at: chrono::Utc::now(),
    };
    node.route(envelope.clone()).await.unwrap();
    // The next post's round comes after whatever the first one did.
    assert_eq!(authors(&post(&general, "hello").await), ["alice"]);
    let texts = |messages: Vec<ThreadMessage>| -> Vec<String> {
        messages.into_iter().map(|m| m.text).collect()
    };
    assert_eq!(texts(general.read(0, 50).await.unwrap()), ["hello", "one"]);
    // Committed, then handed over again: taken, once.
    node.store().send(envelope.clone()).await.unwrap();
    node.route(envelope.clone()).await.unwrap();
    node.route(envelope).await.unwrap();
    post(&general, "bye").await;
    let all = texts(general.read(0, 50).await.unwrap());
    assert_eq!(
        all.iter().filter(|t| *t == "not committed yet").count(),
        1,
        "{all:?}"
    );
    assert_eq!(&all[..3], ["hello", "one", "not committed yet"], "{all:?}");
}

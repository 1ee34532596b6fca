//! Tests of `conversation_search` against a real store.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe_runtime::home::Home;
use troupe_runtime::id::BotId;
use troupe_runtime::protocol::Message;
use troupe_runtime::store::conversations::{self, NewConversation};
use troupe_runtime::store::{timestamp, Store};

use super::*;
use crate::recall::parse_when;
use troupe_runtime::tool::Tool as _;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    ctx: ToolContext,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().into());
    ctx.services.node().set_store(store.clone());
    Fixture {
        _dir: dir,
        store,
        ctx,
    }
}

/// A conversation of `bot` titled `title`, its messages dated `age_days` ago.
async fn conversation(
    store: &Store,
    bot: BotId,
    title: &str,
    age_days: i64,
    messages: Vec<Message>,
) -> (ConversationId, Vec<MsgId>) {
    let conv = ConversationId::new();
    let title = title.to_string();
    store
        .write(move |tx| {
            let mut new = NewConversation::new(conv, bot, "main");
            new.title = title.clone();
            conversations::create_conversation(tx, &new)?;
            let mut ids = Vec::new();
            for m in &messages {
                let id = MsgId::new();
                conversations::append_message_with_id(tx, id, conv, m)?;
                ids.push(id);
            }
            let at = timestamp(Utc::now() - chrono::Duration::days(age_days));
            tx.execute(
                "UPDATE messages SET created_at = ?2 WHERE conversation_id = ?1",
                rusqlite::params![conv.to_string(), at],
            )?;
            tx.execute(
                "UPDATE conversations SET created_at = ?2, updated_at = ?2 WHERE id = ?1",
                rusqlite::params![conv.to_string(), at],
            )?;
            Ok((conv, ids))
        })
        .await
        .unwrap()
}

async fn call(ctx: &ToolContext, args: serde_json::Value) -> ToolResult {
    conversation_search::tool().call(args, ctx).await
}

fn ids(result: &ToolResult) -> Vec<String> {
    let data = &result.data;
    data["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

fn tool(text: &str) -> Message {
    Message::Tool {
        call_id: "c".into(),
        name: "run_command".into(),
        result: ToolResult::ok(text),
    }
}

#[tokio::test]
async fn discovery_shows_the_best_in_full_and_the_others_by_their_matches() {
    let f = fixture();
    let bot = f.ctx.bot;
    let (best, best_ids) = conversation(
        &f.store,
        bot,
        "deploys",
        1,
        vec![
            Message::user("the deploy script fails on the server"),
            Message::assistant("set the deploy token, then run the deploy script again"),
            Message::user("it works now"),
        ],
    )
    .await;
    let (other, _) = conversation(&f.store, bot, "misc", 2, vec![
        Message::user("an unrelated chat about lunch, the deploy script and many other words to dilute it"),
        Message::assistant("unrelated answer"),
    ])
    .await;
    // Other talk, so that the searched words are rare as in a real store.
    for i in 0..6 {
        conversation(
            &f.store,
            bot,
            "filler",
            3,
            vec![
                Message::user(format!("weather report {i}")),
                Message::assistant("sunny"),
            ],
        )
        .await;
    }
    let r = call(&f.ctx, json!({"query": "deploy script"})).await;
    assert!(!r.is_error(), "{}", r.text);
    assert_eq!(
        ids(&r),
        vec![best.to_string(), other.to_string()],
        "{}",
        r.text
    );
    assert!(
        r.text.contains("it works now"),
        "the best is shown whole: {}",
        r.text
    );
    assert!(
        r.text.contains(&best_ids[2].to_string()),
        "every message shows its id"
    );
    assert!(
        !r.text.contains("unrelated answer"),
        "the others only by their match: {}",
        r.text
    );
    assert!(r.text.contains("[deploy] [script]"), "{}", r.text);
    assert!(
        r.text.contains(&format!("» [{} · user", best_ids[0])),
        "matches are marked in the full transcript: {}",
        r.text
    );

    let full = call(&f.ctx, json!({"query": "deploy script", "detail": "full"})).await;
    assert!(full.text.contains("unrelated answer"), "{}", full.text);
    let one = call(
        &f.ctx,
        json!({"query": "deploy", "limit": 1, "sort": "oldest"}),
    )
    .await;
    assert_eq!(ids(&one), vec![other.to_string()]);
}

#[tokio::test]
async fn accents_are_ignored_both_ways() {
    let f = fixture();
    let bot = f.ctx.bot;
    let (accented, _) = conversation(
        &f.store,
        bot,
        "a",
        2,
        vec![Message::user("meet at the café")],
    )
    .await;
    let (plain, _) = conversation(
        &f.store,
        bot,
        "b",
        1,
        vec![Message::user("meet at the cafe")],
    )
    .await;
    for query in ["cafe", "café"] {
        let r = call(&f.ctx, json!({"query": query, "sort": "oldest"})).await;
        assert_eq!(
            ids(&r),
            vec![accented.to_string(), plain.to_string()],
            "{query}"
        );
    }
}

#[tokio::test]
async fn tool_output_is_searched_only_when_asked() {
    let f = fixture();
    let bot = f.ctx.bot;
    let (conv, _) = conversation(
        &f.store,
        bot,
        "t",
        1,
        vec![
            Message::user("run the tests"),
            tool("stack overflow in parser"),
        ],
    )
    .await;
    let r = call(&f.ctx, json!({"query": "overflow"})).await;
    assert_eq!(ids(&r), Vec::<String>::new());
    assert!(r.text.contains("add `tool` to role_filter"), "{}", r.text);
    let r = call(
        &f.ctx,
        json!({"query": "overflow", "role_filter": "user,assistant,tool"}),
    )
    .await;
    assert_eq!(ids(&r), vec![conv.to_string()]);
    assert!(r.text.contains("(result of run_command)"), "{}", r.text);
}

#[tokio::test]
async fn dates_filter_with_iso_and_relative_forms() {
    let f = fixture();
    let bot = f.ctx.bot;
    let (old, _) = conversation(
        &f.store,
        bot,
        "old",
        30,
        vec![Message::user("invoice sent")],
    )
    .await;
    let (week, _) = conversation(
        &f.store,
        bot,
        "week",
        6,
        vec![Message::user("invoice sent")],
    )
    .await;
    let (today, _) = conversation(
        &f.store,
        bot,
        "today",
        0,
        vec![Message::user("invoice sent")],
    )
    .await;
    let search = |extra: serde_json::Value| {
        let mut args = json!({"query": "invoice", "sort": "oldest", "limit": 10});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let ctx = f.ctx.clone();
        async move { ids(&call(&ctx, args).await) }
    };
    assert_eq!(
        search(json!({"after": "7d"})).await,
        vec![week.to_string(), today.to_string()]
    );
    assert_eq!(
        search(json!({"after": "2w", "before": "24h"})).await,
        vec![week.to_string()]
    );
    assert_eq!(search(json!({"before": "3w"})).await, vec![old.to_string()]);
    let iso = |days: i64| {
        (Utc::now() - chrono::Duration::days(days))
            .format("%Y-%m-%d")
            .to_string()
    };
    assert_eq!(
        search(json!({"after": iso(10), "before": iso(2)})).await,
        vec![week.to_string()]
    );
    let rfc = timestamp(Utc::now() - chrono::Duration::days(10));
    assert_eq!(search(json!({"before": rfc})).await, vec![old.to_string()]);
}

#[tokio::test]
async fn excluded_ids_are_left_out() {
    let f = fixture();
    let bot = f.ctx.bot;
    let (a, _) = conversation(&f.store, bot, "a", 2, vec![Message::user("roadmap draft")]).await;
    let (b, _) = conversation(&f.store, bot, "b", 1, vec![Message::user("roadmap draft")]).await;
    let r = call(
        &f.ctx,
        json!({"query": "roadmap", "exclude_conversation_ids": [a.to_string()]}),
    )
    .await;
    assert_eq!(ids(&r), vec![b.to_string()]);
    let r = call(
        &f.ctx,
        json!({"exclude_conversation_ids": [b.to_string()], "limit": 10}),
    )
    .await;
    assert_eq!(ids(&r), vec![a.to_string()]);
}

#[tokio::test]
async fn a_bot_sees_only_its_own_conversations_and_the_main_agent_all() {
    let f = fixture();
    let (mine, theirs) = (BotId::new(), BotId::new());
    let (a, _) = conversation(&f.store, mine, "a", 2, vec![Message::user("secret plans")]).await;
    let (b, _) = conversation(
        &f.store,
        theirs,
        "b",
        1,
        vec![Message::user("secret plans")],
    )
    .await;
    let mut bot_ctx = f.ctx.clone();
    bot_ctx.agent = "researcher".into();
    bot_ctx.bot = mine;
    assert_eq!(
        ids(&call(&bot_ctx, json!({"query": "secret", "limit": 10})).await),
        vec![a.to_string()]
    );
    assert_eq!(
        ids(&call(&bot_ctx, json!({"limit": 10})).await),
        vec![a.to_string()]
    );
    let denied = call(&bot_ctx, json!({"conversation_id": b.to_string()})).await;
    assert_eq!(
        denied.text,
        format!("there is no conversation {b} among yours: search or browse to find its id.")
    );
    let all = call(
        &f.ctx,
        json!({"query": "secret", "sort": "oldest", "limit": 10}),
    )
    .await;
    assert_eq!(ids(&all), vec![a.to_string(), b.to_string()]);
}

#[tokio::test]
async fn scroll_read_and_browse_shapes() {
    let f = fixture();
    let bot = f.ctx.bot;
    let messages: Vec<Message> = (0..30)
        .map(|i| Message::user(format!("line number {i}")))
        .collect();
    let (conv, msg_ids) = conversation(&f.store, bot, "long", 1, messages).await;

    let r = call(&f.ctx, json!({"conversation_id": conv.to_string(), "around_message_id": msg_ids[10].to_string(), "window": 2})).await;
    assert!(!r.is_error(), "{}", r.text);
    let data = r.data.clone();
    let shown: Vec<&str> = data["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = msg_ids[8..13].iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(
        (data["more_before"].as_bool(), data["more_after"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(
        r.text.contains(&format!("» [{} · user", msg_ids[10])),
        "the anchor is marked: {}",
        r.text
    );

    let read = call(&f.ctx, json!({"conversation_id": conv.to_string()})).await;
    assert!(
        read.text.contains("line number 0") && read.text.contains("line number 29"),
        "{}",
        read.text
    );
    assert_eq!(read.data["total"], 30);
    let page = call(
        &f.ctx,
        json!({"conversation_id": conv.to_string(), "offset": 28}),
    )
    .await;
    assert_eq!(page.data["messages"].as_array().unwrap().len(), 2);

    let browse = call(&f.ctx, json!({})).await;
    assert!(
        browse.text.starts_with("The 1 latest conversations"),
        "{}",
        browse.text
    );
    assert!(
        browse.text.contains("first: line number 0"),
        "{}",
        browse.text
    );
    assert_eq!(browse.data["conversations"][0]["message_count"], 30);
}

#[tokio::test]
async fn bad_combinations_say_what_to_do() {
    let f = fixture();
    let conv = ConversationId::new().to_string();
    let cases = [
        (json!({"around_message_id": MsgId::new().to_string()}),
         "`around_message_id` needs `conversation_id`: give the conversation the message is in (a search result shows both)."),
        (json!({"conversation_id": conv, "around_message_id": MsgId::new().to_string(), "window": 21}),
         "`window` must be between 1 and 20, not 21. Messages each side of `around_message_id`."),
        (json!({"query": "x", "limit": 11}), "`limit` must be between 1 and 10, not 11."),
        (json!({"query": "x", "after": "yesterday"}),
         "`after` is not a date or an age: `yesterday`. Give an ISO date (2026-03-01, 2026-03-01T14:00:00Z) or an age such as 7d, 24h, 2w or 30m."),
        (json!({"query": "x", "role_filter": "user,system"}),
         "`role_filter` has an unknown role `system`: use user, assistant and tool, comma separated."),
        (json!({"query": "x", "conversation_id": conv}),
         "give `query` to search, or `conversation_id` to read one conversation, not both."),
        (json!({"conversation_id": "nope"}),
         "`nope` is not a conversation id: give one as shown in a result (`conv_` and 32 hex digits)."),
    ];
    for (args, expected) in cases {
        let r = call(&f.ctx, args.clone()).await;
        assert!(r.is_error(), "{args}");
        assert_eq!(r.text, expected, "{args}");
    }
}

#[test]
fn relative_and_iso_dates_parse() {
    let now = DateTime::parse_from_rfc3339("2026-03-15T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let at = |s: &str| parse_when("after", s, now).map(|t| t.to_rfc3339());
    assert_eq!(at("7d"), Ok("2026-03-08T12:00:00+00:00".into()));
    assert_eq!(at("24h"), Ok("2026-03-14T12:00:00+00:00".into()));
    assert_eq!(at("2w"), Ok("2026-03-01T12:00:00+00:00".into()));
    assert_eq!(at("2026-03-01"), Ok("2026-03-01T00:00:00+00:00".into()));
    assert_eq!(
        at("2026-03-01T08:30:00+02:00"),
        Ok("2026-03-01T06:30:00+00:00".into())
    );
    assert_eq!(
        at("2026-03-01 08:30"),
        Ok("2026-03-01T08:30:00+00:00".into())
    );
    assert!(at("7y").is_err());
    assert!(at("").is_err());
}

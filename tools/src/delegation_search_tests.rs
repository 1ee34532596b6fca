//! Tests of `delegation_search`, with the record written straight into its
//! tables (as the delegation actor would).

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe_runtime::home::Home;
use troupe_runtime::id::{BotId, MsgId};
use troupe_runtime::protocol::{Message, ToolCall};
use troupe_runtime::store::conversations::{self, NewConversation};
use troupe_runtime::store::{timestamp, Store};

use super::*;
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

struct Recorded {
    delegation: String,
    subagent: String,
    conversation: ConversationId,
    seqs: Vec<i64>,
}

/// A delegation of `bot`, `age_days` old, with one subagent working in
/// `folder` whose conversation holds `messages`, and the record `entries`.
async fn record(
    store: &Store,
    bot: BotId,
    age_days: i64,
    folder: &str,
    entries: &[(&str, &str)],
    messages: Vec<Message>,
) -> Recorded {
    let delegation = DelegationId::new().to_string();
    let subagent = SubagentId::new().to_string();
    let conversation = ConversationId::new();
    let folder = folder.to_string();
    let entries: Vec<(String, String)> = entries
        .iter()
        .map(|(k, t)| (k.to_string(), t.to_string()))
        .collect();
    let (d, s) = (delegation.clone(), subagent.clone());
    let seqs = store
        .write(move |tx| {
            let at = timestamp(Utc::now() - chrono::Duration::days(age_days));
            let mut new = NewConversation::new(conversation, bot, "subagent");
            new.title = "sub".into();
            conversations::create_conversation(tx, &new)?;
            for m in &messages {
                conversations::append_message_with_id(tx, MsgId::new(), conversation, m)?;
            }
            tx.execute(
                "UPDATE messages SET created_at = ?2 WHERE conversation_id = ?1",
                rusqlite::params![conversation.to_string(), at],
            )?;
            tx.execute(
                "INSERT INTO delegations (id, parent_conversation, bot_id, status, created_at, ended_at)
                 VALUES (?1, 'conv_parent', ?2, 'reported', ?3, ?3)",
                rusqlite::params![d, bot.to_string(), at],
            )?;
            tx.execute(
                "INSERT INTO subagents (id, delegation_id, conversation_id, position, goal, context, folder, status, result, created_at, ended_at)
                 VALUES (?1, ?2, ?3, 0, 'port the parser', '', ?4, 'done', 'parser ported', ?5, ?5)",
                rusqlite::params![s, d, conversation.to_string(), folder, at],
            )?;
            let mut seqs = Vec::new();
            for (kind, text) in &entries {
                tx.execute(
                    "INSERT INTO delegation_events (delegation_id, subagent_id, kind, text, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    rusqlite::params![d, s, kind, text, at],
                )?;
                seqs.push(tx.last_insert_rowid());
            }
            Ok(seqs)
        })
        .await
        .unwrap();
    Recorded {
        delegation,
        subagent,
        conversation,
        seqs,
    }
}

async fn call(ctx: &ToolContext, args: serde_json::Value) -> ToolResult {
    delegation_search::tool().call(args, ctx).await
}

fn ids(result: &ToolResult) -> Vec<String> {
    result.data["delegations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

fn tool_call_and_result() -> Vec<Message> {
    vec![
        Message::user("port the parser to the new grammar"),
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "run_command".into(),
                arguments: json!({"command": "cargo test"}),
            }],
        },
        Message::Tool {
            call_id: "c1".into(),
            name: "run_command".into(),
            result: ToolResult::ok("42 tests passed"),
        },
        Message::assistant("the parser is ported"),
    ]
}

#[tokio::test]
async fn discovery_shows_the_best_whole_and_the_others_by_their_match() {
    let f = fixture();
    let bot = f.ctx.bot;
    let best = record(
        &f.store,
        bot,
        2,
        "/work/parser",
        &[
            ("task", "port the parser to the new grammar"),
            ("steer", "keep the old parser tests"),
            ("final", "the parser now uses the new grammar"),
            ("files", "src/parser.rs"),
        ],
        Vec::new(),
    )
    .await;
    let other = record(
        &f.store,
        bot,
        1,
        "/work/docs",
        &[
            (
                "task",
                "document the grammar for the users of the tool in the wiki pages",
            ),
            ("final", "docs written"),
        ],
        Vec::new(),
    )
    .await;
    for _ in 0..5 {
        record(
            &f.store,
            bot,
            3,
            "/work/other",
            &[("task", "rename the files"), ("final", "renamed")],
            Vec::new(),
        )
        .await;
    }
    let r = call(&f.ctx, json!({"query": "grammar"})).await;
    assert!(!r.is_error(), "{}", r.text);
    assert_eq!(
        ids(&r),
        vec![best.delegation.clone(), other.delegation.clone()]
    );
    assert!(
        r.text.contains("src/parser.rs"),
        "the best with every entry: {}",
        r.text
    );
    assert!(
        !r.text.contains("docs written"),
        "the others by their match only: {}",
        r.text
    );
    assert!(r.text.contains("[grammar]"), "{}", r.text);
    let accents = call(&f.ctx, json!({"query": "grammär"})).await;
    assert_eq!(ids(&accents).len(), 2);
}

#[tokio::test]
async fn filters_narrow_discovery_and_browse() {
    let f = fixture();
    let bot = f.ctx.bot;
    let old = record(
        &f.store,
        bot,
        20,
        "/repo/api",
        &[("task", "fix the login bug")],
        Vec::new(),
    )
    .await;
    let new = record(
        &f.store,
        bot,
        1,
        "/repo/web",
        &[("task", "fix the login page")],
        Vec::new(),
    )
    .await;
    let search = |args: serde_json::Value| {
        let ctx = f.ctx.clone();
        async move { ids(&call(&ctx, args).await) }
    };
    assert_eq!(
        search(json!({"query": "login", "folder": "repo/api"})).await,
        vec![old.delegation.clone()]
    );
    assert_eq!(
        search(json!({"query": "login", "after": "7d"})).await,
        vec![new.delegation.clone()]
    );
    assert_eq!(
        search(json!({"before": "2w"})).await,
        vec![old.delegation.clone()]
    );
    assert_eq!(
        search(json!({})).await,
        vec![new.delegation.clone(), old.delegation.clone()]
    );
    let mut other_bot = f.ctx.clone();
    other_bot.agent = "writer".into();
    other_bot.bot = BotId::new();
    assert_eq!(
        search_with(&other_bot, json!({})).await,
        Vec::<String>::new()
    );
}

async fn search_with(ctx: &ToolContext, args: serde_json::Value) -> Vec<String> {
    ids(&call(ctx, args).await)
}

#[tokio::test]
async fn a_read_shows_the_record_and_the_ends_of_the_subagents_conversation() {
    let f = fixture();
    let bot = f.ctx.bot;
    let rec = record(
        &f.store,
        bot,
        1,
        "/w",
        &[("task", "port the parser"), ("final", "ported")],
        tool_call_and_result(),
    )
    .await;
    let r = call(&f.ctx, json!({"instance_id": rec.delegation})).await;
    assert!(!r.is_error(), "{}", r.text);
    assert!(
        r.text.contains(&format!("#{} [task]", rec.seqs[0])),
        "{}",
        r.text
    );
    assert!(
        r.text.contains(&format!(
            "{} conversation {} (3 messages)",
            rec.subagent, rec.conversation
        )),
        "{}",
        r.text
    );
    assert!(r.text.contains("the parser is ported"), "{}", r.text);
    assert!(
        !r.text.contains("42 tests passed"),
        "no tools unless asked: {}",
        r.text
    );

    let with_tools = call(
        &f.ctx,
        json!({"instance_id": rec.subagent, "include_tools": true}),
    )
    .await;
    assert!(
        with_tools.text.contains("(result of run_command)"),
        "{}",
        with_tools.text
    );
    assert!(
        with_tools
            .text
            .contains(r#"(calls run_command {"command":"cargo test"})"#),
        "{}",
        with_tools.text
    );
    assert_eq!(with_tools.data["subagent"], json!(rec.subagent));
}

#[tokio::test]
async fn a_scroll_shows_the_entries_around_one() {
    let f = fixture();
    let bot = f.ctx.bot;
    let entries: Vec<(String, String)> = (0..9)
        .map(|i| ("steer".to_string(), format!("steer number {i}")))
        .collect();
    let entries: Vec<(&str, &str)> = entries
        .iter()
        .map(|(k, t)| (k.as_str(), t.as_str()))
        .collect();
    let rec = record(&f.store, bot, 1, "/w", &entries, tool_call_and_result()).await;
    let r = call(&f.ctx, json!({"instance_id": rec.delegation, "around": rec.seqs[4], "window": 2, "include_tools": true})).await;
    assert!(!r.is_error(), "{}", r.text);
    let data = r.data.clone();
    let seqs: Vec<i64> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, rec.seqs[2..7].to_vec());
    assert_eq!(
        (data["more_before"].as_bool(), data["more_after"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(r.text.contains("tools in this span"), "{}", r.text);
    let missing = call(
        &f.ctx,
        json!({"instance_id": rec.delegation, "around": 999_999}),
    )
    .await;
    assert_eq!(
        missing.text,
        format!(
            "{} has no entry #999999: take the entry number from a result about {}.",
            rec.delegation, rec.delegation
        )
    );
}

#[tokio::test]
async fn bad_arguments_say_what_to_do() {
    let f = fixture();
    let cases = [
        (json!({"around": 3}), "`around` needs `instance_id`: give the delegation or subagent the entry belongs to (a result shows both)."),
        (json!({"instance_id": DelegationId::new().to_string(), "around": 3, "window": 30}), "`window` must be between 1 and 20, not 30. Entries each side of `around`."),
        (json!({"query": "x", "limit": 12}), "`limit` must be between 1 and 10, not 12."),
        (json!({"instance_id": "conv_1"}), "`conv_1` is not a delegation or subagent id: give one as shown in a result (`deleg_…` or `sub_…`)."),
        (json!({"query": "x", "before": "last week"}), "`before` is not a date or an age: `last week`. Give an ISO date (2026-03-01, 2026-03-01T14:00:00Z) or an age such as 7d, 24h, 2w or 30m."),
    ];
    for (args, expected) in cases {
        let r = call(&f.ctx, args.clone()).await;
        assert!(r.is_error(), "{args}");
        assert_eq!(r.text, expected, "{args}");
    }
    let unknown = DelegationId::new().to_string();
    let r = call(&f.ctx, json!({"instance_id": unknown})).await;
    assert_eq!(r.text, format!("there is no delegation or subagent {unknown} among yours: search or browse to find its id."));
}

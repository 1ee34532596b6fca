//! Tests of the search SQL on a real SQLite file.

use chrono::{DateTime, TimeZone, Utc};
use pretty_assertions::assert_eq;

use super::delegations::{self, DelegationFilter};
use super::*;
use crate::protocol::{Message, ToolCall, ToolResult};
use crate::store::conversations::{self, NewConversation};
use crate::store::Store;

fn day(d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, d, 12, 0, 0).single().unwrap()
}

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    (dir, store)
}

/// Writes a conversation of `bot` with `messages`, each dated `at` (a day of March 2026).
fn conversation(
    store: &Store,
    bot: BotId,
    at: u32,
    messages: Vec<Message>,
) -> (ConversationId, Vec<MsgId>) {
    let conv = ConversationId::new();
    store
        .write_blocking(move |tx| {
            conversations::create_conversation(tx, &NewConversation::new(conv, bot, "main"))?;
            let mut ids = Vec::new();
            for m in &messages {
                let id = MsgId::new();
                conversations::append_message_with_id(tx, id, conv, m)?;
                ids.push(id);
            }
            let at = timestamp(day(at));
            tx.execute(
                "UPDATE messages SET created_at = ?2 WHERE conversation_id = ?1",
                params![conv.to_string(), at],
            )?;
            tx.execute(
                "UPDATE conversations SET created_at = ?2, updated_at = ?2 WHERE id = ?1",
                params![conv.to_string(), at],
            )?;
            // Searchable now, as `Store::catch_up` makes them before a search.
            crate::store::catch_up::catch_up(tx)?;
            Ok((conv, ids))
        })
        .unwrap()
}

fn tool_result(text: &str) -> Message {
    Message::Tool {
        call_id: "c1".into(),
        name: "run_command".into(),
        result: ToolResult::ok(text),
    }
}

fn user_assistant() -> Filter {
    Filter {
        roles: vec!["user".into(), "assistant".into()],
        ..Filter::default()
    }
}

fn found_ids(found: &[Found]) -> Vec<ConversationId> {
    found.iter().map(|f| f.conversation.id).collect()
}

#[test]
fn discovery_groups_matches_by_conversation_best_first() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (weak, _) = conversation(
        &store,
        bot,
        1,
        vec![
            Message::user("the deploy script and a long story about many other things entirely"),
            Message::assistant("nothing here"),
        ],
    );
    let (strong, ids) = conversation(
        &store,
        bot,
        2,
        vec![
            Message::user("deploy script fails"),
            Message::assistant("the deploy script needs a token"),
            Message::user("thanks"),
        ],
    );
    let found = store
        .read_blocking(|conn| {
            find_conversations(
                conn,
                "deploy script",
                &user_assistant(),
                Order::Relevance,
                10,
                3,
            )
        })
        .unwrap();
    assert_eq!(found_ids(&found), vec![strong, weak]);
    assert_eq!(found[0].matches, 2);
    assert_eq!(found[0].conversation.messages, 3);
    assert_eq!(
        found[0].conversation.first_user_message.as_deref(),
        Some("deploy script fails")
    );
    let hit_ids: Vec<MsgId> = found[0].hits.iter().map(|h| h.id).collect();
    assert!(
        hit_ids.contains(&ids[0]) && hit_ids.contains(&ids[1]),
        "{hit_ids:?}"
    );
    assert!(
        found[0].hits[0].snippet.contains("[deploy] [script]"),
        "{:?}",
        found[0].hits
    );

    let newest = store
        .read_blocking(|conn| {
            find_conversations(conn, "deploy", &user_assistant(), Order::Oldest, 10, 1)
        })
        .unwrap();
    assert_eq!(found_ids(&newest), vec![weak, strong]);
    let none = store
        .read_blocking(|conn| {
            find_conversations(
                conn,
                "deploy zebra",
                &user_assistant(),
                Order::Relevance,
                10,
                1,
            )
        })
        .unwrap();
    assert!(none.is_empty(), "every word is required");
}

#[test]
fn accents_are_ignored_both_ways() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (accented, _) = conversation(&store, bot, 1, vec![Message::user("un café à Montréal")]);
    let (plain, _) = conversation(&store, bot, 2, vec![Message::user("a cafe in Montreal")]);
    for query in ["cafe", "café", "CAFÉ montreal"] {
        let mut got = store
            .read_blocking(move |conn| {
                find_conversations(conn, query, &user_assistant(), Order::Oldest, 10, 1)
            })
            .map(|f| found_ids(&f))
            .unwrap();
        got.truncate(2);
        assert_eq!(got, vec![accented, plain], "{query}");
    }
}

#[test]
fn tool_output_is_searched_only_with_the_tool_role() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (conv, _) = conversation(
        &store,
        bot,
        1,
        vec![
            Message::user("run it"),
            tool_result("segmentation fault in libfoo"),
        ],
    );
    let search = |roles: &[&str]| {
        let filter = Filter {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            ..Filter::default()
        };
        store
            .read_blocking(move |conn| {
                find_conversations(conn, "segmentation", &filter, Order::Relevance, 3, 1)
            })
            .map(|f| found_ids(&f))
            .unwrap()
    };
    assert_eq!(search(&["user", "assistant"]), Vec::<ConversationId>::new());
    assert_eq!(search(&["user", "assistant", "tool"]), vec![conv]);
}

#[test]
fn date_filters_bound_the_messages_searched() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (early, _) = conversation(&store, bot, 1, vec![Message::user("budget review")]);
    let (mid, _) = conversation(&store, bot, 10, vec![Message::user("budget review")]);
    let (late, _) = conversation(&store, bot, 20, vec![Message::user("budget review")]);
    let search = |after: Option<u32>, before: Option<u32>| {
        let filter = Filter {
            after: after.map(day),
            before: before.map(day),
            ..user_assistant()
        };
        store
            .read_blocking(move |conn| {
                find_conversations(conn, "budget", &filter, Order::Oldest, 10, 1)
            })
            .map(|f| found_ids(&f))
            .unwrap()
    };
    assert_eq!(search(None, None), vec![early, mid, late]);
    assert_eq!(search(Some(5), None), vec![mid, late]);
    assert_eq!(search(None, Some(15)), vec![early, mid]);
    assert_eq!(search(Some(5), Some(15)), vec![mid]);
}

#[test]
fn excluded_conversations_and_other_bots_are_left_out() {
    let (_dir, store) = open();
    let (mine, theirs) = (BotId::new(), BotId::new());
    let (a, _) = conversation(&store, mine, 1, vec![Message::user("quarterly numbers")]);
    let (b, _) = conversation(&store, mine, 2, vec![Message::user("quarterly numbers")]);
    let (c, _) = conversation(&store, theirs, 3, vec![Message::user("quarterly numbers")]);
    let search = |filter: Filter| {
        store
            .read_blocking(move |conn| {
                find_conversations(conn, "quarterly", &filter, Order::Oldest, 10, 1)
            })
            .map(|f| found_ids(&f))
            .unwrap()
    };
    assert_eq!(search(user_assistant()), vec![a, b, c]);
    assert_eq!(
        search(Filter {
            exclude: vec![b],
            ..user_assistant()
        }),
        vec![a, c]
    );
    assert_eq!(
        search(Filter {
            bot: Some(mine),
            ..user_assistant()
        }),
        vec![a, b]
    );
    let latest = store
        .read_blocking(move |conn| {
            latest_conversations(
                conn,
                &Filter {
                    bot: Some(theirs),
                    ..Filter::default()
                },
                5,
            )
        })
        .unwrap();
    assert_eq!(latest.iter().map(|s| s.id).collect::<Vec<_>>(), vec![c]);
}

#[test]
fn a_conversation_is_read_in_pages_and_scrolled_by_message_id() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let mut messages: Vec<Message> = (0..10)
        .map(|i| Message::user(format!("message {i}")))
        .collect();
    messages.insert(
        5,
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "a.txt"}),
            }],
        },
    );
    messages.insert(6, tool_result("file text"));
    let (conv, ids) = conversation(&store, bot, 1, messages);
    let roles = vec!["user".to_string(), "assistant".to_string()];
    let page = store
        .read_blocking({
            let roles = roles.clone();
            move |conn| read_messages(conn, conv, &roles, 0, 4)
        })
        .unwrap();
    assert_eq!(
        page.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
        vec!["message 0", "message 1", "message 2", "message 3"]
    );
    let next = store
        .read_blocking({
            let roles = roles.clone();
            move |conn| read_messages(conn, conv, &roles, 4, 2)
        })
        .unwrap();
    assert_eq!(next[1].role, "assistant");
    assert_eq!(next[1].tools, r#"read_file {"path":"a.txt"}"#);
    assert_eq!(
        store
            .read_blocking(move |conn| count_messages(conn, conv, &[]))
            .unwrap(),
        12
    );

    let anchor = ids[6];
    let around = store
        .read_blocking({
            let roles = roles.clone();
            move |conn| messages_around(conn, conv, anchor, 2, &roles)
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        around.anchor.role, "tool",
        "the anchor shows whatever its role"
    );
    assert_eq!(around.anchor.tools, "run_command");
    let texts = |lines: &[Line]| lines.iter().map(|l| l.text.clone()).collect::<Vec<_>>();
    assert_eq!(
        texts(&around.before),
        vec!["message 4".to_string(), String::new()]
    );
    assert_eq!(
        texts(&around.after),
        vec!["message 5".to_string(), "message 6".to_string()]
    );
    assert!(around.more_before && around.more_after);
    let missing = store
        .read_blocking(move |conn| messages_around(conn, ConversationId::new(), anchor, 2, &[]))
        .unwrap();
    assert!(missing.is_none());
    let last = store
        .read_blocking(move |conn| last_messages(conn, conv, &roles, 2))
        .unwrap();
    assert_eq!(
        texts(&last),
        vec!["message 8".to_string(), "message 9".to_string()]
    );
}

#[test]
fn latest_conversations_come_newest_first_with_their_counts() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (old, _) = conversation(
        &store,
        bot,
        1,
        vec![Message::assistant("hi"), Message::user("first question")],
    );
    let (new, _) = conversation(&store, bot, 9, vec![Message::user("second")]);
    let latest = store
        .read_blocking(|conn| latest_conversations(conn, &Filter::default(), 10))
        .unwrap();
    assert_eq!(
        latest
            .iter()
            .map(|s| (s.id, s.messages))
            .collect::<Vec<_>>(),
        vec![(new, 1), (old, 2)]
    );
    assert_eq!(
        latest[1].first_user_message.as_deref(),
        Some("first question")
    );
    let after = store
        .read_blocking(|conn| {
            latest_conversations(
                conn,
                &Filter {
                    after: Some(day(5)),
                    ..Filter::default()
                },
                10,
            )
        })
        .unwrap();
    assert_eq!(after.iter().map(|s| s.id).collect::<Vec<_>>(), vec![new]);
}

/// Inserts a delegation of `bot` with one subagent in `folder` and `entries`
/// (kind, text), all dated day `at`; returns (delegation id, subagent id, seqs).
fn delegation(
    store: &Store,
    bot: BotId,
    at: u32,
    folder: &str,
    conversation: ConversationId,
    entries: &[(&str, &str)],
) -> (String, String, Vec<i64>) {
    let deleg = crate::id::DelegationId::new().to_string();
    let sub = crate::id::SubagentId::new().to_string();
    let folder = folder.to_string();
    let entries: Vec<(String, String)> = entries
        .iter()
        .map(|(k, t)| (k.to_string(), t.to_string()))
        .collect();
    let (d, s) = (deleg.clone(), sub.clone());
    let seqs = store
        .write_blocking(move |tx| {
            let at = timestamp(day(at));
            tx.execute(
                "INSERT INTO delegations (id, parent_conversation, bot_id, status, created_at) VALUES (?1, 'conv_x', ?2, 'reported', ?3)",
                params![d, bot.to_string(), at],
            )?;
            tx.execute(
                "INSERT INTO subagents (id, delegation_id, conversation_id, position, goal, context, folder, status, result, created_at)
                 VALUES (?1, ?2, ?3, 0, 'the goal', '', ?4, 'done', 'all good', ?5)",
                params![s, d, conversation.to_string(), folder, at],
            )?;
            let mut seqs = Vec::new();
            for (kind, text) in &entries {
                tx.execute(
                    "INSERT INTO delegation_events (delegation_id, subagent_id, kind, text, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![d, s, kind, text, at],
                )?;
                seqs.push(tx.last_insert_rowid());
            }
            // Searchable now, as `delegation_search` makes them first.
            crate::store::catch_up::catch_up(tx)?;
            Ok(seqs)
        })
        .unwrap();
    (deleg, sub, seqs)
}

/// The delegations `query` finds, by id.
fn delegations_found(store: &Store, query: &str) -> Vec<String> {
    let query = query.to_string();
    store
        .read_blocking(move |conn| {
            delegations::find_delegations(conn, &query, &DelegationFilter::default(), 10, 5)
        })
        .unwrap()
        .into_iter()
        .map(|found| found.delegation.id)
        .collect()
}

#[test]
fn delegation_entries_are_searchable_once_caught_up_and_leave_the_index_cleanly() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (kept, _, _) = delegation(
        &store,
        bot,
        1,
        "/a",
        ConversationId::new(),
        &[("task", "polish the quartz")],
    );
    let (gone, _, _) = delegation(
        &store,
        bot,
        2,
        "/b",
        ConversationId::new(),
        &[("task", "polish the granite")],
    );
    let (kept_id, gone_id) = (kept.clone(), gone.clone());
    store
        .write_blocking(move |tx| {
            // Appended without a catch-up, as the writer leaves them.
            for (deleg, text) in [(&kept_id, "quartz again"), (&gone_id, "granite again")] {
                tx.execute(
                    "INSERT INTO delegation_events (delegation_id, kind, text, created_at)
                     VALUES (?1, 'steer', ?2, '2026-01-03T00:00:00Z')",
                    params![deleg, text],
                )?;
            }
            Ok(())
        })
        .unwrap();
    let waiting = store
        .read_blocking(crate::store::catch_up::unindexed)
        .unwrap();
    assert_eq!(waiting, 2, "the new entries wait for the catch-up");
    let hits = store
        .read_blocking(|conn| {
            delegations::find_delegations(conn, "again", &DelegationFilter::default(), 10, 5)
        })
        .unwrap();
    assert!(hits.is_empty(), "indexed before the catch-up: {hits:?}");

    // One delegation goes with its indexed and its unindexed entries.
    store
        .write_blocking(move |tx| {
            tx.execute("DELETE FROM delegations WHERE id = ?1", [&gone])?;
            Ok(())
        })
        .unwrap();
    store
        .write_blocking(crate::store::catch_up::catch_up)
        .unwrap();
    assert_eq!(delegations_found(&store, "again"), vec![kept.clone()]);
    assert_eq!(delegations_found(&store, "polish"), vec![kept]);
    assert!(delegations_found(&store, "granite").is_empty());
    crate::store::catch_up::tests::assert_index_matches(&store, "delegation_fts");
}

#[test]
fn delegations_are_found_listed_read_and_scrolled() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (sub_conv, _) = conversation(
        &store,
        bot,
        1,
        vec![Message::user("task text"), Message::assistant("done it")],
    );
    let (a, sub_a, seqs) = delegation(
        &store,
        bot,
        1,
        "/src/app",
        sub_conv,
        &[
            ("task", "migrate the database schema"),
            ("steer", "keep the old columns"),
            ("final", "the schéma was migrated"),
            ("files", "db/schema.sql"),
        ],
    );
    let (b, _, _) = delegation(
        &store,
        bot,
        5,
        "/docs",
        ConversationId::new(),
        &[("task", "write the schema docs")],
    );
    let (c, _, _) = delegation(
        &store,
        BotId::new(),
        9,
        "/src/other",
        ConversationId::new(),
        &[("task", "schema")],
    );

    let found = store
        .read_blocking(|conn| {
            delegations::find_delegations(conn, "schema", &DelegationFilter::default(), 10, 2)
        })
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|f| f.delegation.id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.contains(&a.as_str()) && ids.contains(&b.as_str()) && ids.contains(&c.as_str()));
    let fa = found.iter().find(|f| f.delegation.id == a).unwrap();
    assert_eq!(fa.matches, 3, "accents ignored: schéma matches too");
    assert_eq!(fa.hits.len(), 2);
    assert_eq!(fa.delegation.subagents[0].id, sub_a);

    let filtered = |filter: DelegationFilter| {
        store
            .read_blocking(move |conn| {
                delegations::find_delegations(conn, "schema", &filter, 10, 1)
            })
            .map(|f| f.into_iter().map(|f| f.delegation.id).collect::<Vec<_>>())
            .unwrap()
    };
    assert_eq!(
        filtered(DelegationFilter {
            folder: Some("src/app".into()),
            ..Default::default()
        }),
        vec![a.clone()]
    );
    assert_eq!(
        filtered(DelegationFilter {
            bot: Some(bot),
            after: Some(day(3)),
            ..Default::default()
        }),
        vec![b.clone()]
    );
    assert_eq!(
        filtered(DelegationFilter {
            before: Some(day(3)),
            ..Default::default()
        }),
        vec![a.clone()]
    );

    let latest = store
        .read_blocking(|conn| {
            delegations::latest_delegations(conn, &DelegationFilter::default(), 2)
        })
        .unwrap();
    assert_eq!(
        latest.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        vec![c, b]
    );

    let of = store.read_blocking({
        let s = sub_a.clone();
        move |conn| delegations::delegation_of_subagent(conn, &s)
    });
    assert_eq!(of.unwrap(), Some(a.clone()));
    let events = store
        .read_blocking({
            let a = a.clone();
            move |conn| delegations::events(conn, &a, None)
        })
        .unwrap();
    assert_eq!(
        events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        vec!["task", "steer", "final", "files"]
    );
    let around = store
        .read_blocking({
            let a = a.clone();
            let at = seqs[1];
            move |conn| delegations::events_around(conn, &a, None, at, 1)
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        around.0.iter().map(|e| e.seq).collect::<Vec<_>>(),
        seqs[0..3].to_vec()
    );
    assert_eq!((around.1, around.2), (false, true));
}

#[test]
fn matches_past_the_candidate_cut_are_found_when_filters_drop_the_rest() {
    let (_dir, store) = open();
    let (busy, quiet) = (BotId::new(), BotId::new());
    let (old, _) = conversation(&store, quiet, 1, vec![Message::user("alpha once")]);
    let many = (CANDIDATES + 100) as usize;
    conversation(
        &store,
        busy,
        2,
        (0..many)
            .map(|i| Message::user(format!("alpha {i}")))
            .collect(),
    );
    for order in [Order::Newest, Order::Relevance] {
        let filter = Filter {
            bot: Some(quiet),
            ..user_assistant()
        };
        let found = store
            .read_blocking(move |conn| find_conversations(conn, "alpha", &filter, order, 3, 1))
            .unwrap();
        assert_eq!(found_ids(&found), vec![old], "{order:?}");
    }
}

#[test]
fn deleted_messages_leave_the_index_whether_indexed_yet_or_not() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (gone, _) = conversation(&store, bot, 1, vec![Message::user("ephemeral words")]);
    let (kept, _) = conversation(&store, bot, 2, vec![Message::user("ephemeral words")]);
    store
        .write_blocking(move |tx| {
            tx.execute(
                "DELETE FROM conversations WHERE id = ?1",
                [gone.to_string()],
            )?;
            // Appended and deleted in one batch: never indexed, never unindexed.
            let seq = conversations::append_message(tx, kept, &Message::user("ephemeral too"))?;
            tx.execute("DELETE FROM messages WHERE seq = ?1", [seq])?;
            Ok(())
        })
        .unwrap();
    let found = store
        .read_blocking(|conn| {
            find_conversations(
                conn,
                "ephemeral",
                &user_assistant(),
                Order::Relevance,
                10,
                5,
            )
        })
        .unwrap();
    assert_eq!(found_ids(&found), vec![kept]);
    assert_eq!(found[0].matches, 1);
    // FTS5 checks its index against the content table; a wrong delete fails it.
    store
        .write_blocking(|tx| {
            tx.execute(
                "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)",
                [],
            )?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_seq_given_again_after_the_newest_messages_are_deleted_is_indexed() {
    let (_dir, store) = open();
    let bot = BotId::new();
    let (kept, _) = conversation(&store, bot, 1, vec![Message::user("quince jam")]);
    let (gone, _) = conversation(
        &store,
        bot,
        2,
        vec![Message::user("quince tart"), Message::user("quince pie")],
    );
    let search = |store: &Store| {
        store
            .read_blocking(|conn| {
                let hits = conversations::search_messages(conn, "quince", 10)?;
                Ok(hits
                    .into_iter()
                    .map(|h| (h.seq, h.snippet))
                    .collect::<Vec<_>>())
            })
            .unwrap()
    };
    assert_eq!(search(&store).len(), 3);

    // The two newest messages (indexed) go with their conversation; the
    // next appends are given their `seq` again.
    let reused = store
        .write_blocking(move |tx| {
            tx.execute(
                "DELETE FROM conversations WHERE id = ?1",
                [gone.to_string()],
            )?;
            let a = conversations::append_message(tx, kept, &Message::user("quince cake"))?;
            let b = conversations::append_message(tx, kept, &Message::user("plum cake"))?;
            crate::store::catch_up::catch_up(tx)?;
            tx.execute(
                "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)",
                [],
            )?;
            Ok([a, b])
        })
        .unwrap();
    assert_eq!(reused, [2, 3], "the deleted messages' seq are given again");
    let mut found = search(&store);
    found.sort();
    assert_eq!(
        found,
        [
            (1, "[quince] jam".to_string()),
            (2, "[quince] cake".to_string())
        ]
    );
}

use std::time::Duration;

use pretty_assertions::assert_eq;

use super::conversations::{self, NewConversation};
use super::*;
use crate::id::{BotId, ConversationId, MsgId};
use crate::protocol::{Message, ToolCall, ToolResult};

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    (dir, path)
}

fn tables(store: &Store) -> Vec<String> {
    store
        .read_blocking(|conn| {
            let mut stmt = conn.prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
                 AND name NOT LIKE 'messages_fts_%' AND name NOT LIKE 'delegation_fts_%'
                 AND name NOT LIKE 'thread_fts_%' AND name NOT LIKE 'house_file_fts_%' ORDER BY name",
            )?;
            let names = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(names)
        })
        .unwrap()
}

fn user_version(store: &Store) -> i64 {
    store
        .read_blocking(|conn| Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?))
        .unwrap()
}

fn new_conversation(store: &Store) -> (BotId, ConversationId) {
    let (bot, conv) = (BotId::new(), ConversationId::new());
    store
        .write_blocking(move |tx| {
            conversations::create_conversation(tx, &NewConversation::new(conv, bot, "main"))
        })
        .unwrap();
    (bot, conv)
}

async fn new_conversation_async(store: &Store) -> (BotId, ConversationId) {
    let (bot, conv) = (BotId::new(), ConversationId::new());
    store
        .write(move |tx| {
            conversations::create_conversation(tx, &NewConversation::new(conv, bot, "main"))
        })
        .await
        .unwrap();
    (bot, conv)
}

fn texts(store: &Store, conv: ConversationId) -> Vec<String> {
    store
        .read_blocking(move |conn| conversations::load_messages(conn, conv))
        .unwrap()
        .into_iter()
        .map(|m| m.message.text().to_string())
        .collect()
}

/// The first column of every row `sql` selects.
fn column<T: rusqlite::types::FromSql + Send + 'static>(
    store: &Store,
    sql: &'static str,
) -> Vec<T> {
    store
        .read_blocking(move |conn| {
            Ok(conn
                .prepare(sql)?
                .query_map([], |r| r.get::<_, T>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .unwrap()
}

#[test]
fn migrates_an_empty_file_and_reopens_it_unchanged() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    assert_eq!(user_version(&store), migrations::latest());
    assert_eq!(
        tables(&store),
        [
            "bots",
            "cluster_bots",
            "cluster_houses",
            "cluster_kinds",
            "cluster_outbox",
            "cluster_peers",
            "cluster_received",
            "cluster_routes",
            "conversations",
            "delegation_events",
            "delegation_fts",
            "delegations",
            "environment_commands",
            "environment_threads",
            "environments",
            "executor_limits",
            "executor_usage",
            "file_contents",
            "file_pieces",
            "house_fences",
            "house_file_chunks",
            "house_file_fts",
            "house_file_revisions",
            "house_file_usage",
            "house_file_versions",
            "house_files",
            "house_members",
            "house_move_parts",
            "houses",
            "kv",
            "mailbox",
            "member_tokens",
            "messages",
            "messages_fts",
            "openings",
            "proposals",
            "routine_runs",
            "routines",
            "running_subagents",
            "segments",
            "subagents",
            "thread_fts",
            "thread_messages",
            "thread_participants",
            "thread_rounds",
            "thread_seats",
            "threads",
            "usage",
            "usage_pending"
        ]
    );
    let (_, conv) = new_conversation(&store);
    store
        .write_blocking(move |tx| conversations::append_message(tx, conv, &Message::user("kept")))
        .unwrap();
    drop(store);

    let store = Store::open(&path).unwrap();
    assert_eq!(user_version(&store), migrations::latest());
    assert_eq!(texts(&store, conv), ["kept"]);
    let settings = store
        .read_blocking(|conn| {
            let get = |p: &str| {
                conn.query_row(&format!("PRAGMA {p}"), [], |r| {
                    r.get_ref(0)?.as_str().map_or_else(
                        |_| r.get::<_, i64>(0).map(|n| n.to_string()),
                        |s| Ok(s.to_string()),
                    )
                })
            };
            Ok([
                get("journal_mode")?,
                get("foreign_keys")?,
                get("synchronous")?,
            ])
        })
        .unwrap();
    assert_eq!(settings, ["wal", "1", "1"]);
}

#[test]
fn synchronous_full_is_applied_when_asked() {
    let (_dir, path) = temp_db();
    let options = OpenOptions {
        synchronous_full: true,
        ..OpenOptions::default()
    };
    let store = Store::open_with(&path, options).unwrap();
    let sync: i64 = store
        .read_blocking(|conn| Ok(conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(sync, 2);
}

#[test]
fn a_newer_schema_is_refused_with_upgrade_advice() {
    let (_dir, path) = temp_db();
    drop(Store::open(&path).unwrap());
    let newer = migrations::latest() + 3;
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(&format!("PRAGMA user_version = {newer}"))
        .unwrap();

    let err = Store::open(&path).unwrap_err();
    match &err {
        StoreError::NewerSchema {
            path: p,
            found,
            known,
        } => {
            assert_eq!((p, *found, *known), (&path, newer, migrations::latest()));
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    assert!(err.to_string().contains("upgrade troupe"), "{err}");
}

fn assert_refused_untouched(bytes: &[u8]) {
    let (dir, path) = temp_db();
    std::fs::write(&path, bytes).unwrap();
    let err = Store::open(&path).unwrap_err();
    match &err {
        StoreError::Corrupt { path: p, .. } => assert_eq!(p, &path),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("left it untouched"), "{text}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file was changed");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["troupe.db"]);
}

#[test]
fn a_garbage_file_is_refused_and_left_untouched() {
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 31 % 251) as u8).collect();
    assert_refused_untouched(&garbage);
    assert_refused_untouched(b"short");
}

#[test]
fn a_damaged_database_behind_a_valid_header_is_refused_and_left_untouched() {
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend((0..4080u32).map(|i| (i * 17 % 253) as u8));
    assert_refused_untouched(&bytes);
}

#[test]
fn a_writer_held_past_the_busy_timeout_is_a_clear_error() {
    let (_dir, path) = temp_db();
    let options = OpenOptions {
        busy_timeout: Duration::from_millis(50),
        ..OpenOptions::default()
    };
    let store = Store::open_with(&path, options).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();

    let err = store
        .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('a', 'b')", [])?))
        .unwrap_err();
    match &err {
        StoreError::Locked { path: p } => assert_eq!(p, &path),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(err.to_string().contains("another writer"), "{err}");

    other.execute_batch("COMMIT").unwrap();
    let n = store
        .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('a', 'b')", [])?))
        .unwrap();
    assert_eq!(n, 1, "the store works again once the lock is released");
}

#[test]
fn two_stores_may_open_the_same_file() {
    let (_dir, path) = temp_db();
    let first = Store::open(&path).unwrap();
    let second = Store::open(&path).unwrap();
    let (_, conv) = new_conversation(&first);
    second
        .write_blocking(move |tx| {
            conversations::append_message(tx, conv, &Message::user("from two"))
        })
        .unwrap();
    assert_eq!(texts(&first, conv), ["from two"]);
}

/// The test's `kv` keys, without the store's own (the checkpointer's
/// `store:log_restarted_at`, written whenever the store is idle).
fn kv_keys(conn: &rusqlite::Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT key FROM kv WHERE key NOT LIKE 'store:%' ORDER BY key")?;
    let keys = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(keys)
}

/// The writer, held inside a batch of its own until released: jobs sent
/// meanwhile queue up and are drained together into the next transaction.
struct HeldWriter {
    release: std::sync::mpsc::Sender<()>,
    done: tokio::sync::oneshot::Receiver<Result<()>>,
}

fn hold_writer(store: &Store) -> HeldWriter {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let (blocker, done) = writer::TypedJob::boxed(move |_tx| {
        started_tx.send(()).unwrap();
        release_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Ok(())
    });
    store.writes().unwrap().try_send(blocker).unwrap();
    started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    HeldWriter { release, done }
}

impl HeldWriter {
    /// Lets the writer go on, once its batch has committed.
    fn release(self) {
        self.release.send(()).unwrap();
        self.done.blocking_recv().unwrap().unwrap();
    }
}

#[test]
fn a_failing_job_rolls_back_only_itself_within_its_batch() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();

    let held = hold_writer(&store);

    let (a, a_done) =
        writer::TypedJob::boxed(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('a', '1')", [])?));
    let (b, b_done) = writer::TypedJob::boxed(|tx| -> Result<usize> {
        tx.execute("INSERT INTO kv VALUES ('b', '1')", [])?;
        Err(StoreError::Invalid("b refuses".into()))
    });
    let (c, c_done) = writer::TypedJob::boxed(|tx| {
        tx.execute("INSERT INTO kv VALUES ('c', '1')", [])?;
        // Same transaction: a's row is visible, b's was rolled back.
        kv_keys(tx)
    });
    let (d, d_done) = writer::TypedJob::boxed(|_tx| -> Result<()> { panic!("d panics") });
    for job in [a, b, c, d] {
        store.writes().unwrap().try_send(job).unwrap();
    }
    held.release();
    assert_eq!(a_done.blocking_recv().unwrap().unwrap(), 1);
    let b_err = b_done.blocking_recv().unwrap().unwrap_err();
    assert_eq!(b_err.to_string(), "b refuses");
    assert_eq!(c_done.blocking_recv().unwrap().unwrap(), ["a", "c"]);
    let d_err = d_done.blocking_recv().unwrap().unwrap_err();
    assert!(
        matches!(&d_err, StoreError::Panicked(m) if m == "d panics"),
        "{d_err:?}"
    );

    assert_eq!(store.read_blocking(kv_keys).unwrap(), ["a", "c"]);
    // The writer survived the panic.
    store
        .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('e', '1')", [])?))
        .unwrap();
    assert_eq!(store.read_blocking(kv_keys).unwrap(), ["a", "c", "e"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_see_committed_writes() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let (bot, conv) = new_conversation_async(&store).await;
    for i in 0..5 {
        let text = format!("message {i}");
        let seq = store
            .write(move |tx| conversations::append_message(tx, conv, &Message::user(text.clone())))
            .await
            .unwrap();
        let last = store
            .read(move |conn| conversations::load_messages(conn, conv))
            .await
            .unwrap();
        assert_eq!(last.len(), i + 1);
        assert_eq!(last[i].seq, seq);
        assert_eq!(last[i].message, Message::user(format!("message {i}")));
    }
    let listed = store
        .read(move |conn| conversations::list_conversations(conn, Some(bot), 10))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id, listed[0].bot, listed[0].kind.as_str()),
        (conv, bot, "main")
    );
    assert!(listed[0].updated_at >= listed[0].created_at);
}

#[test]
fn search_ignores_accents_and_case() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let (_, conv) = new_conversation(&store);
    store
        .write_blocking(move |tx| {
            conversations::append_message(tx, conv, &Message::user("Un café à Paris"))?;
            conversations::append_message(tx, conv, &Message::assistant("tea in London"))
        })
        .unwrap();
    // Not indexed yet: the writer defers the index until enough waits.
    let before = store
        .read_blocking(|conn| conversations::search_messages(conn, "cafe", 10))
        .unwrap();
    assert!(before.is_empty());
    store.write_blocking(catch_up::catch_up).unwrap();
    for query in ["cafe", "CAFÉ", "paris cafe", "a"] {
        let hits = store
            .read_blocking(move |conn| conversations::search_messages(conn, query, 10))
            .unwrap();
        assert_eq!(hits.len(), 1, "{query}");
        assert_eq!(
            (hits[0].conversation, hits[0].role.as_str()),
            (conv, "user")
        );
    }
    assert_eq!(
        store
            .read_blocking(|conn| conversations::search_messages(conn, "\"cafe\" OR NEAR(", 10))
            .unwrap()
            .len(),
        0,
        "operators are taken as words"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_writers_all_land() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let (_, conv) = new_conversation_async(&store).await;
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..25 {
                    let text = format!("{t}:{i}");
                    let seq = store
                        .write(move |tx| {
                            conversations::append_message(tx, conv, &Message::user(text.clone()))
                        })
                        .await
                        .unwrap();
                    seqs.push(seq);
                }
                seqs
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        let seqs = task.await.unwrap();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "a task's writes land in order"
        );
        all.extend(seqs);
    }
    let stored = store
        .read(move |conn| conversations::load_messages(conn, conv))
        .await
        .unwrap();
    assert_eq!(stored.len(), 64 * 25);
    all.sort_unstable();
    assert_eq!(stored.iter().map(|m| m.seq).collect::<Vec<_>>(), all);
}

#[test]
fn kv_values_are_set_replaced_and_removed() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store
        .write_blocking(|tx| {
            kv::set(tx, "lease", "node-a")?;
            kv::set(tx, "lease", "node-b")?;
            kv::set(tx, "gone", "x")?;
            kv::remove(tx, "gone")
        })
        .unwrap();
    let values = store
        .read_blocking(|conn| Ok((kv::get(conn, "lease")?, kv::get(conn, "gone")?)))
        .unwrap();
    assert_eq!(values, (Some("node-b".to_string()), None));
}

#[test]
fn a_version_1_store_keeps_its_messages_and_index_through_migrations_2_and_3() {
    let (_dir, path) = temp_db();
    let (bot, conv) = (BotId::new(), ConversationId::new());
    {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for sql in migrations::MIGRATIONS[0] {
            tx.execute_batch(sql).unwrap();
        }
        tx.execute_batch("PRAGMA user_version = 1").unwrap();
        conversations::create_conversation(&tx, &NewConversation::new(conv, bot, "main")).unwrap();
        // As version 1 wrote them: with the bot, and the text in the body too.
        for text in ["lentil soup", "barley bread", "lentil stew"] {
            let body = serde_json::to_string(&Message::user(text)).unwrap();
            tx.execute(
                "INSERT INTO messages (id, conversation_id, bot_id, role, body, text, created_at)
                 VALUES (?1, ?2, ?3, 'user', ?4, ?5, '2026-01-01T00:00:00Z')",
                rusqlite::params![
                    MsgId::new().to_string(),
                    conv.to_string(),
                    bot.to_string(),
                    body,
                    text
                ],
            )
            .unwrap();
        }
        catch_up::catch_up_messages(&tx).unwrap();
        tx.commit().unwrap();
    }

    let store = Store::open(&path).unwrap();
    assert_eq!(user_version(&store), migrations::latest());
    assert_eq!(
        texts(&store, conv),
        ["lentil soup", "barley bread", "lentil stew"]
    );
    let seqs: Vec<i64> = column(&store, "SELECT seq FROM messages ORDER BY seq");
    assert_eq!(seqs, [1, 2, 3]);
    let sequence_rows: Vec<i64> = column(
        &store,
        "SELECT count(*) FROM sqlite_sequence WHERE name = 'messages'",
    );
    assert_eq!(sequence_rows, [0], "no AUTOINCREMENT bookkeeping is left");
    let hits = store
        .read_blocking(|conn| conversations::search_messages(conn, "lentil", 10))
        .unwrap();
    assert_eq!(hits.len(), 2);

    let seq = store
        .write_blocking(move |tx| {
            let seq = conversations::append_message(tx, conv, &Message::user("lentil pie"))?;
            catch_up::catch_up(tx)?;
            tx.execute(
                "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)",
                [],
            )?;
            Ok(seq)
        })
        .unwrap();
    assert_eq!(seq, 4);
    assert_eq!(
        texts(&store, conv),
        ["lentil soup", "barley bread", "lentil stew", "lentil pie"]
    );
    let columns: Vec<String> = column(&store, "SELECT name FROM pragma_table_info('messages')");
    assert!(!columns.iter().any(|c| c == "bot_id"), "{columns:?}");
}

#[test]
fn a_message_text_is_stored_once_and_read_back_whole() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let (_, conv) = new_conversation(&store);
    let messages = [
        Message::user("a question about lentils"),
        Message::Assistant {
            content: "let me look".into(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "lentils.md"}),
            }],
        },
        Message::Tool {
            call_id: "call_1".into(),
            name: "read_file".into(),
            result: ToolResult::ok("Lentils: 200 g, soaked"),
        },
        Message::assistant(""),
    ];
    let appended = messages.clone();
    store
        .write_blocking(move |tx| {
            appended
                .iter()
                .try_for_each(|m| conversations::append_message(tx, conv, m).map(drop))
        })
        .unwrap();
    let bodies: Vec<String> = column(&store, "SELECT body FROM messages ORDER BY seq");
    for (body, message) in bodies.iter().zip(&messages) {
        let text = message.text();
        assert!(text.is_empty() || !body.contains(text), "{body}");
    }
    let loaded: Vec<Message> = store
        .read_blocking(move |conn| conversations::load_messages(conn, conv))
        .unwrap()
        .into_iter()
        .map(|m| m.message)
        .collect();
    assert_eq!(loaded, messages);
}

#[tokio::test]
async fn a_read_only_store_reads_beside_the_writer_and_refuses_writes() {
    let (_dir, path) = temp_db();
    assert!(matches!(
        Store::open_read_only(&path, OpenOptions::default()),
        Err(StoreError::NoDatabase { .. })
    ));
    let writer = Store::open(&path).unwrap();
    let (_, conv) = new_conversation_async(&writer).await;
    writer
        .write(move |tx| conversations::append_message(tx, conv, &Message::user("hello")))
        .await
        .unwrap();
    let reader = Store::open_read_only(&path, OpenOptions::default()).unwrap();
    assert!(reader.is_read_only());
    let history = reader
        .read(move |c| conversations::load_messages(c, conv))
        .await
        .unwrap();
    assert_eq!(history[0].message, Message::user("hello"));
    let refused = reader
        .write(move |tx| conversations::append_message(tx, conv, &Message::user("no")))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, StoreError::ReadOnly { .. }),
        "{refused:?}"
    );
    reader.catch_up().await.unwrap();
    // What the writer commits next is seen by the reader.
    writer
        .write(move |tx| conversations::append_message(tx, conv, &Message::user("again")))
        .await
        .unwrap();
    let count = reader
        .read(move |c| conversations::load_messages(c, conv))
        .await
        .unwrap()
        .len();
    assert_eq!(count, 2);
}

/// A cached statement with a bound `LIMIT` runs as prepared, whatever the
/// bound value, on the writer's connection and on a reader's.
#[test]
fn a_bound_limit_does_not_re_prepare_its_statement() {
    use rusqlite::StatementStatus;
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    fn bound_three_times(conn: &Connection) -> Result<i32> {
        let sql = "SELECT key FROM kv WHERE key > ?1 ORDER BY key LIMIT ?2";
        for limit in [1_i64, 5, 2] {
            let mut stmt = conn.prepare_cached(sql)?;
            stmt.query_map(rusqlite::params!["", limit], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
        }
        Ok(conn
            .prepare_cached(sql)?
            .get_status(StatementStatus::RePrepare))
    }
    assert_eq!(store.write_blocking(|tx| bound_three_times(tx)).unwrap(), 0);
    assert_eq!(store.read_blocking(bound_three_times).unwrap(), 0);
}

/// A write that finds the database locked by someone else.
#[path = "lock_tests.rs"]
mod lock;

/// The writer's deferred work: done when it idles, in a batch when far behind.
#[path = "idle_tests.rs"]
mod idle;

/// Model usage: appended per call, folded per conversation, day and model.
#[path = "usage_tests.rs"]
mod usage_folded;

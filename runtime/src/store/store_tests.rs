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
fn usage_adds_up_per_conversation_and_day() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let (bot, conv) = (BotId::new(), ConversationId::new());
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let call = crate::protocol::Usage {
        input_tokens: 100,
        output_tokens: 10,
        cache_read_tokens: 5,
        cache_write_tokens: 1,
    };
    // Three calls: two to one model, one to another.
    let three_calls = || {
        store
            .write_blocking(move |tx| {
                usage::add(tx, conv, bot, "m1", &call, 0.25, at)?;
                usage::add(tx, conv, bot, "m1", &call, 0.25, at)?;
                usage::add(tx, conv, bot, "m2", &call, 1.0, at)
            })
            .unwrap()
    };
    three_calls();
    let totals = || {
        store
            .read_blocking(move |conn| {
                Ok((
                    usage::for_conversation(conn, conv)?,
                    usage::for_bot_on(conn, bot, "2026-03-01")?,
                    usage::for_day(conn, "2026-03-02")?,
                    usage::by_bot_and_day(conn)?,
                ))
            })
            .unwrap()
    };
    let times = |n: u64| usage::UsageTotal {
        calls: 3 * n,
        usage: crate::protocol::Usage {
            input_tokens: 300 * n,
            output_tokens: 30 * n,
            cache_read_tokens: 15 * n,
            cache_write_tokens: 3 * n,
        },
        cost_usd: 1.5 * n as f64,
    };
    let rows = || column::<i64>(&store, "SELECT calls FROM usage ORDER BY model");
    let waiting = || column::<i64>(&store, "SELECT count(*) FROM usage_pending");
    // Counted from their commit, while they wait to be folded.
    let (total, day, other_day, daily) = totals();
    assert_eq!(total, times(1));
    assert_eq!(day, times(1));
    assert_eq!(other_day, usage::UsageTotal::default());
    assert_eq!((daily.len(), &daily[0].total), (1, &times(1)));
    assert_eq!((rows(), waiting()), (vec![], vec![3]));

    // Folded into a row per conversation, day and model: the same totals.
    store.write_blocking(catch_up::catch_up).unwrap();
    assert_eq!((rows(), waiting()), (vec![2, 1], vec![0]));
    assert_eq!(totals().0, times(1));
    // More calls count beside the folded ones, and fold into their rows.
    three_calls();
    assert_eq!(totals().1, times(2));
    store.write_blocking(catch_up::catch_up).unwrap();
    assert_eq!((rows(), waiting()), (vec![4, 2], vec![0]));
    let (total, day, _, daily) = totals();
    assert_eq!(
        (total, day, &daily[0].total),
        (times(2), times(2), &times(2))
    );
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

/// A store whose writer goes idle, for the index, after `idle`.
fn open_idle_after(path: &std::path::Path, idle: Duration) -> Store {
    let options = OpenOptions {
        index_when_idle: idle,
        ..OpenOptions::default()
    };
    Store::open_with(path, options).unwrap()
}

/// Messages with "lentil" found by a search that does not catch up first.
fn lentils(store: &Store) -> usize {
    store
        .read_blocking(|conn| conversations::search_messages(conn, "lentil", 100_000))
        .unwrap()
        .len()
}

/// Appends `n` messages with "lentil" in one job.
fn append_lentils(store: &Store, conv: ConversationId, n: i64) {
    store
        .write_blocking(move |tx| {
            for _ in 0..n {
                conversations::append_message(tx, conv, &Message::user("lentil soup"))?;
            }
            Ok(())
        })
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_catches_up_by_itself_once_enough_messages_wait_and_the_writer_is_idle() {
    let (_dir, path) = temp_db();
    let store = open_idle_after(&path, Duration::from_millis(1));
    let mut indexed = store.idle_indexed().unwrap();
    let (_, conv) = new_conversation_async(&store).await;
    // Each message waits twice: for its index and for its conversation.
    let n = catch_up::CATCH_UP_ROWS / 2;
    let blocking = store.clone();
    tokio::task::spawn_blocking(move || append_lentils(&blocking, conv, n - 1))
        .await
        .unwrap();
    // Too few to be worth a catch-up: the writer waits for jobs, not idle.
    let fewer = store.clone();
    let found = tokio::task::spawn_blocking(move || lentils(&fewer))
        .await
        .unwrap();
    assert_eq!(found, 0, "deferred until enough waits");
    assert_eq!(*indexed.borrow_and_update(), 0);

    // Enough: indexed in steps once no job comes, all of them.
    let (more, total) = (store.clone(), n + 3);
    tokio::task::spawn_blocking(move || append_lentils(&more, conv, 4))
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        indexed.wait_for(|&seq| seq >= total),
    )
    .await
    .expect("the idle writer indexes what waits")
    .unwrap();
    let all = store.clone();
    let found = tokio::task::spawn_blocking(move || lentils(&all))
        .await
        .unwrap();
    assert_eq!(found, total as usize);
}

/// What SQLite's allocations hold now, and the most they have held.
#[allow(unsafe_code)]
fn sqlite_memory() -> (i64, i64) {
    // SAFETY: both read SQLite's own counters; nothing else.
    unsafe {
        (
            rusqlite::ffi::sqlite3_memory_used(),
            rusqlite::ffi::sqlite3_memory_highwater(0),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_writer_gives_back_the_pages_a_burst_left_in_its_cache() {
    let (_dir, path) = temp_db();
    let store = open_idle_after(&path, Duration::from_millis(1));
    let mut given_back = store.idle_given_back().unwrap();
    let (_, conv) = new_conversation_async(&store).await;
    let before = *given_back.borrow_and_update();
    // About 16 MB of messages: every page written stays in the cache.
    let text = "lentil ".repeat(600);
    for _ in 0..4 {
        let text = text.clone();
        store
            .write(move |tx| {
                for _ in 0..1000 {
                    conversations::append_message(tx, conv, &Message::user(text.as_str()))?;
                }
                Ok(())
            })
            .await
            .unwrap();
    }
    // Once nothing is left to do (the idle catch-up of 4,000 messages
    // included), the cache goes back.
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            given_back.changed().await.unwrap();
            if store.read(catch_up::unindexed).await.unwrap() == 0 {
                break;
            }
        }
    })
    .await
    .expect("the idle writer gives its cache back");
    assert!(*given_back.borrow() > before);
    let (held, most) = sqlite_memory();
    assert!(most > 16 << 20, "the burst's pages were cached: {most}");
    assert!(held < most / 4, "{held} of {most} bytes still held");
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

#[test]
fn a_writer_that_never_idles_indexes_in_a_batch_only_when_far_behind() {
    let (_dir, path) = temp_db();
    // Never idle long enough: as in a long burst of writes.
    let store = open_idle_after(&path, Duration::from_secs(3600));
    let (_, conv) = new_conversation(&store);
    append_lentils(&store, conv, catch_up::CATCH_UP_ROWS_MOST - 1);
    assert_eq!(lentils(&store), 0, "a burst leaves the index for later");
    append_lentils(&store, conv, 1);
    assert_eq!(
        lentils(&store),
        catch_up::CATCH_UP_ROWS_MOST as usize,
        "far behind, the batch catches up before it commits"
    );
    // The conversation's `updated_at` is not rewritten in the burst.
    let updated = || column::<String>(&store, "SELECT updated_at FROM conversations");
    let newest = || column::<String>(&store, "SELECT max(created_at) FROM messages");
    assert_ne!(updated(), newest(), "left for an idle writer");
    // A search's catch-up takes what waits at any time.
    append_lentils(&store, conv, 3);
    store.write_blocking(catch_up::catch_up).unwrap();
    assert_eq!(lentils(&store), catch_up::CATCH_UP_ROWS_MOST as usize + 3);
    assert_eq!(updated(), newest(), "and moves the conversation too");
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

/// Someone else holding a lock on the database: a second connection's
/// write transaction, or another process's `fcntl` read lock on the
/// `-shm` file's write-lock byte (what a sandboxed command did).
enum Locker {
    Connection(rusqlite::Connection),
    Process(std::process::Child),
}

impl Locker {
    fn hold(kind: &str, path: &Path) -> Locker {
        match kind {
            "connection" => {
                let other = rusqlite::Connection::open(path).unwrap();
                other.execute_batch("BEGIN IMMEDIATE").unwrap();
                Locker::Connection(other)
            }
            _ => {
                // WAL_WRITE_LOCK is byte 120 of the -shm file. The process
                // says "held" once it holds it, and lets go when told.
                let shm = format!("{}-shm", path.display());
                let mut child = std::process::Command::new("python3")
                    .args([
                        "-c",
                        "import fcntl, os, sys\n\
                         fd = os.open(sys.argv[1], os.O_RDWR)\n\
                         fcntl.lockf(fd, fcntl.LOCK_SH, 1, 120)\n\
                         print('held', flush=True)\n\
                         sys.stdin.read()\n",
                        &shm,
                    ])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut line = String::new();
                std::io::BufRead::read_line(
                    &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
                    &mut line,
                )
                .unwrap();
                assert_eq!(line, "held\n");
                Locker::Process(child)
            }
        }
    }

    fn release(self) {
        match self {
            Locker::Connection(other) => other.execute_batch("ROLLBACK").unwrap(),
            Locker::Process(mut child) => {
                drop(child.stdin.take());
                child.wait().unwrap();
            }
        }
    }
}

fn python3_present() -> bool {
    std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_write_that_finds_the_database_locked_is_run_again_once_the_lock_goes() {
    use std::sync::atomic::Ordering;
    let _serial = LOCK_TESTS.lock();
    for kind in ["connection", "shm read lock"] {
        if kind != "connection" && !python3_present() {
            eprintln!("skipping the -shm lock form: no python3 here");
            continue;
        }
        let (_dir, path) = temp_db();
        let options = OpenOptions {
            busy_timeout: Duration::from_millis(200),
            ..OpenOptions::default()
        };
        let store = Store::open_with(&path, options).unwrap();
        // The -shm file exists once the store has written.
        store
            .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('before', 'x')", [])?))
            .unwrap();
        let locker = Locker::hold(kind, &path);
        let retried = writer::LOCKED_RETRIES.load(Ordering::SeqCst);
        let writing = {
            let store = store.clone();
            std::thread::spawn(move || {
                store.write_blocking(|tx| {
                    Ok(tx.execute("INSERT INTO kv VALUES ('result', 'saved')", [])?)
                })
            })
        };
        // The lock goes once the writer has found it and tried again.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while writer::LOCKED_RETRIES.load(Ordering::SeqCst) == retried {
            assert!(
                std::time::Instant::now() < deadline,
                "{kind}: no retry seen"
            );
            std::thread::yield_now();
        }
        locker.release();
        assert_eq!(writing.join().unwrap().unwrap(), 1, "{kind}");
        let saved: Vec<String> = store
            .read_blocking(|c| {
                let mut s = c.prepare("SELECT key FROM kv WHERE value = 'saved'")?;
                let keys = s
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                Ok(keys)
            })
            .unwrap();
        assert_eq!(saved, ["result"], "{kind}: saved once, nothing lost");
    }
}

#[test]
fn a_lock_that_never_goes_is_a_clear_error_after_every_try() {
    let _serial = LOCK_TESTS.lock();
    for kind in ["connection", "shm read lock"] {
        if kind != "connection" && !python3_present() {
            continue;
        }
        let (_dir, path) = temp_db();
        let options = OpenOptions {
            busy_timeout: Duration::from_millis(50),
            ..OpenOptions::default()
        };
        let store = Store::open_with(&path, options).unwrap();
        store
            .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('before', 'x')", [])?))
            .unwrap();
        let locker = Locker::hold(kind, &path);
        let err = store
            .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('result', 'x')", [])?))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, StoreError::Locked { .. })
                && text.contains(&format!("{} tries", writer::LOCKED_TRIES))
                && text.contains("nothing was written"),
            "{kind}: {text}"
        );
        locker.release();
        // Nothing half-written, and the store works again.
        store
            .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('result', 'y')", [])?))
            .unwrap();
    }
}

/// The retry counter is process-wide: the lock tests take turns.
static LOCK_TESTS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

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

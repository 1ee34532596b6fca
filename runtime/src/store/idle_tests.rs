//! The writer's deferred work: the full-text index and the conversations'
//! `updated_at` caught up when it idles (or in a batch once far behind), and
//! SQLite's page cache given back once idle.

use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;

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

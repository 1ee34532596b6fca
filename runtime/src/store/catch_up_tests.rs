use rusqlite::{params, Connection};

use super::*;
use crate::store::search::delegations::{self, DelegationFilter};
use crate::store::{migrations, Store};

/// Adds a delegation with one entry per text, as the record writes them.
fn record(tx: &Connection, texts: &[&str]) -> rusqlite::Result<String> {
    let id = crate::id::DelegationId::new().to_string();
    tx.execute(
        "INSERT INTO delegations (id, parent_conversation, bot_id, status, created_at)
         VALUES (?1, 'conv_x', 'bot_x', 'reported', '2026-01-01T00:00:00Z')",
        [&id],
    )?;
    for text in texts {
        tx.execute(
            "INSERT INTO delegation_events (delegation_id, kind, text, created_at)
             VALUES (?1, 'task', ?2, '2026-01-01T00:00:00Z')",
            params![id, text],
        )?;
    }
    Ok(id)
}

/// Makes conversation `conv`.
fn new_conversation(
    tx: &rusqlite::Transaction<'_>,
    conv: crate::id::ConversationId,
) -> Result<(), StoreError> {
    crate::store::conversations::create_conversation(
        tx,
        &crate::store::conversations::NewConversation::new(conv, crate::id::BotId::new(), "main"),
    )
}

fn found(store: &Store, query: &'static str) -> usize {
    store
        .read_blocking(move |conn| {
            delegations::find_delegations(conn, query, &DelegationFilter::default(), 10, 5)
        })
        .unwrap()
        .len()
}

/// Fails unless the full-text index `fts` matches its content table:
/// FTS5 checks it row by row, so a wrong delete or a row indexed twice
/// fails it.
pub(crate) fn assert_index_matches(store: &Store, fts: &'static str) {
    store
        .write_blocking(move |tx| {
            tx.execute(
                &format!("INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)"),
                [],
            )?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn entries_indexed_by_the_old_trigger_are_marked_and_the_new_ones_wait_for_the_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    // The version before the entries' index was deferred.
    let before = migrations::MIGRATIONS
        .iter()
        .position(|m| m.contains(&migrations::DELEGATION_EVENTS_DEFERRED))
        .unwrap();
    {
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for sql in migrations::MIGRATIONS[..before]
            .iter()
            .flat_map(|m| m.iter())
        {
            tx.execute_batch(sql).unwrap();
        }
        tx.execute_batch(&format!("PRAGMA user_version = {before}"))
            .unwrap();
        // Indexed as they are written, by the trigger of that version.
        record(&tx, &["sand the oak", "oil the oak"]).unwrap();
        tx.commit().unwrap();
    }

    let store = Store::open(&path).unwrap();
    let mark: Vec<String> = store
        .read_blocking(|conn| {
            Ok(conn
                .prepare("SELECT value FROM kv WHERE key = 'store.delegation_fts_seq'")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?)
        })
        .unwrap();
    assert_eq!(mark, ["2"], "the entries the trigger indexed are marked");
    assert_eq!(store.read_blocking(unindexed).unwrap(), 0);
    assert_eq!(found(&store, "oak"), 1);

    store
        .write_blocking(|tx| Ok(record(tx, &["varnish the elm"])?))
        .unwrap();
    assert_eq!(found(&store, "elm"), 0, "no trigger indexes it any more");
    assert_eq!(store.read_blocking(unindexed).unwrap(), 1);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(store.catch_up())
        .unwrap();
    assert_eq!(found(&store, "elm"), 1);
    assert_eq!(found(&store, "oak"), 1, "nothing indexed twice or lost");
    assert_index_matches(&store, "delegation_fts");
}

#[test]
fn an_idle_step_takes_messages_first_and_stops_at_its_row_budget() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let conv = crate::id::ConversationId::new();
    let entries = vec!["pine resin"; 10];
    store
        .write_blocking(move |tx| {
            new_conversation(tx, conv)?;
            for _ in 0..CATCH_UP_ROWS - 4 {
                crate::store::conversations::append_message(
                    tx,
                    conv,
                    &crate::protocol::Message::user("cedar"),
                )?;
            }
            record(tx, &entries)?;
            Ok(())
        })
        .unwrap();
    // Each message waits twice: for its index and for its conversation.
    let messages = CATCH_UP_ROWS - 4;
    assert_eq!(
        store.read_blocking(unindexed).unwrap(),
        messages + 10 + messages
    );

    let (indexed, left) = store.write_blocking(step).unwrap();
    assert_eq!(indexed, messages, "every message indexed");
    assert_eq!(
        left,
        6 + messages,
        "four entries fill the step's budget; the conversation waits"
    );
    assert_eq!(found(&store, "pine"), 1);
    let (_, left) = store.write_blocking(step).unwrap();
    assert_eq!(left, 2, "the entries, then the conversation's rows");
    let (_, left) = store.write_blocking(step).unwrap();
    assert_eq!(left, 0);
    assert_eq!(store.read_blocking(unindexed_messages).unwrap(), 0);
    assert_index_matches(&store, "delegation_fts");
}

#[test]
fn new_messages_in_the_seqs_of_deleted_ones_still_move_their_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let conv = crate::id::ConversationId::new();
    let append = move |tx: &rusqlite::Transaction<'_>, text: &str| {
        crate::store::conversations::append_message(tx, conv, &crate::protocol::Message::user(text))
    };
    store
        .write_blocking(move |tx| {
            new_conversation(tx, conv)?;
            for text in ["one", "two", "three"] {
                append(tx, text)?;
            }
            catch_up(tx)
        })
        .unwrap();
    // The newest two go; a new message takes the second one's seq.
    store
        .write_blocking(move |tx| {
            tx.execute("DELETE FROM messages WHERE seq > 1", [])?;
            append(tx, "four")?;
            Ok(())
        })
        .unwrap();
    assert_eq!(store.read_blocking(unindexed).unwrap(), 2);
    store.write_blocking(catch_up).unwrap();
    let (updated, newest): (String, String) = store
        .read_blocking(|conn| {
            Ok(conn.query_row(
                "SELECT updated_at, (SELECT created_at FROM messages WHERE text = 'four')
                 FROM conversations",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .unwrap();
    assert_eq!(updated, newest);
    assert_index_matches(&store, "messages_fts");
}

//! The schema, as an ordered list of migrations.
//!
//! The database's `PRAGMA user_version` is the number of migrations applied.
//! At open, each migration past it runs in its own transaction together with
//! the version bump, so a crash leaves the schema at one version or the
//! next, never between. A database with a version past the end of this list
//! was written by a newer troupe and is refused rather than guessed at.
//! Never edit a released migration: append a new one.
//!
//! A new database skips the history: it takes the current schema
//! ([`SCHEMA`], `schema.sql`: what the migrations make, kept in the
//! repository) and the rows the migrations add ([`ROWS`]) in one
//! transaction, a third of the work of replaying every migration; a store
//! whose file does not exist yet starts from the schema already made (see
//! [`super::fresh`]) and takes only the rows. A test
//! holds the two ways to one schema (`schema_tests.rs`); after a new
//! migration, `TROUPE_BLESS_SCHEMA=1 cargo test -p troupe-runtime schema`
//! writes the file again.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::error::StoreError;

/// The migrations, oldest first; migration `i` brings the schema to version `i + 1`.
pub const MIGRATIONS: &[&[&str]] = &[
    &[
        MIGRATION_1,
        ROUTINES,
        DELEGATIONS,
        super::proposals::PROPOSALS,
    ],
    &[MESSAGES_WITHOUT_AUTOINCREMENT],
    &[MESSAGES_WITHOUT_BOT],
    &[OPENINGS, SUBAGENT_DEADLINES],
    &[super::house::HOUSES, super::house::HOME_HOUSE],
    &[super::house_files::HOUSE_FILES],
    &[super::tokens::TOKENS],
    &[super::house_files::HOUSE_FILES_DEFERRED],
    &[super::environments::ENVIRONMENTS],
    &[super::house_files::HOUSE_FILE_USAGE],
    &[EXECUTOR_INSTANCES],
    &[super::house::THREAD_ATTACHMENTS],
    &[super::executor_usage::EXECUTOR_USAGE],
    &[super::cluster::CLUSTER],
    &[EVENTS_BY_INSTANCE],
    &[super::cluster::CLUSTER_HOUSES],
    &[super::house_move::HOUSE_MOVES],
    &[super::cluster::CLUSTER_KINDS],
    &[super::house_files::PIECES_UNTRIED],
    &[DELEGATION_EVENTS_DEFERRED],
    &[super::usage::USAGE_PENDING, CONVERSATIONS_TOUCHED],
    &[CHECKS_IN_PLACE],
];

/// The schema the migrations make, as one script: every table, index,
/// trigger and virtual table in the order they were made (FTS5's own
/// tables are made by their virtual table's statement).
pub const SCHEMA: &str = include_str!("schema.sql");

/// The rows the migrations put in a new database, after [`SCHEMA`].
pub const ROWS: &[&str] = &[super::house::HOME_HOUSE];

/// The newest schema version this binary knows.
pub fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

/// Migration 1: bots, conversations, messages with their full-text index,
/// the durable mailbox, usage and a key-value table.
/// The delegation record: each `delegate` call, its subagents and what
/// happened in them (tasks, steers, answers, final texts, changed files),
/// searchable with FTS5.
pub const DELEGATIONS: &str = r#"
CREATE TABLE delegations (
    id                  TEXT PRIMARY KEY,
    parent_conversation TEXT NOT NULL,
    bot_id              TEXT NOT NULL,
    waits               INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL CHECK (status IN ('running', 'reported')),
    created_at          TEXT NOT NULL,
    ended_at            TEXT
);
CREATE INDEX delegations_by_parent ON delegations (parent_conversation, created_at);
CREATE TABLE subagents (
    id              TEXT PRIMARY KEY,
    delegation_id   TEXT NOT NULL REFERENCES delegations(id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL,
    position        INTEGER NOT NULL,
    goal            TEXT NOT NULL,
    context         TEXT NOT NULL,
    folder          TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL
                    CHECK (status IN ('running', 'done', 'failed', 'stopped', 'timed_out')),
    result          TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    ended_at        TEXT
);
CREATE INDEX subagents_by_delegation ON subagents (delegation_id, position);
CREATE UNIQUE INDEX subagents_by_conversation ON subagents (conversation_id);
CREATE TABLE delegation_events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    delegation_id TEXT NOT NULL REFERENCES delegations(id) ON DELETE CASCADE,
    subagent_id   TEXT,
    kind          TEXT NOT NULL CHECK (kind IN ('task', 'steer', 'answer', 'final', 'files')),
    text          TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX delegation_events_by_delegation ON delegation_events (delegation_id, seq);
CREATE VIRTUAL TABLE delegation_fts USING fts5(
    text, content='delegation_events', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER delegation_events_ai AFTER INSERT ON delegation_events BEGIN
    INSERT INTO delegation_fts(rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER delegation_events_ad AFTER DELETE ON delegation_events BEGIN
    INSERT INTO delegation_fts(delegation_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
"#;

/// The routine tables (also run alone by the scheduler's own tests).
pub const ROUTINES: &str = r#"
CREATE TABLE routines (
    id           TEXT PRIMARY KEY,
    owner_bot    TEXT NOT NULL,
    name         TEXT NOT NULL,
    prompt       TEXT NOT NULL,
    schedule     TEXT NOT NULL,
    spec         TEXT NOT NULL,
    tz           TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'paused')),
    catch_up     TEXT NOT NULL CHECK (catch_up IN ('skip', 'run_once')),
    next_fire_at TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (owner_bot, name)
);
CREATE INDEX routines_due ON routines (status, next_fire_at);
CREATE TABLE routine_runs (
    id              TEXT PRIMARY KEY,
    routine_id      TEXT NOT NULL,
    scheduled_for   TEXT NOT NULL,
    claimed_by      TEXT NOT NULL,
    lease_until     TEXT,
    started_at      TEXT,
    ended_at        TEXT,
    status          TEXT NOT NULL
                    CHECK (status IN ('claimed', 'running', 'done', 'failed', 'skipped')),
    conversation_id TEXT,
    summary         TEXT,
    usage           TEXT,
    UNIQUE (routine_id, scheduled_for)
);
CREATE INDEX routine_runs_open ON routine_runs (status, lease_until);
"#;

const MIGRATION_1: &str = r#"
CREATE TABLE bots (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    title       TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    mission     TEXT NOT NULL DEFAULT '',
    model       TEXT,
    spec        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(spec)),
    created_at  TEXT NOT NULL,
    archived_at TEXT
);

CREATE TABLE conversations (
    id               TEXT PRIMARY KEY,
    bot_id           TEXT NOT NULL,
    kind             TEXT NOT NULL,
    parent_id        TEXT REFERENCES conversations(id) ON DELETE SET NULL,
    title            TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    previous_segment TEXT REFERENCES conversations(id) ON DELETE SET NULL
);
CREATE INDEX conversations_by_bot ON conversations(bot_id, updated_at);
CREATE INDEX conversations_by_update ON conversations(updated_at);
CREATE INDEX conversations_by_parent ON conversations(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX conversations_by_previous ON conversations(previous_segment)
    WHERE previous_segment IS NOT NULL;

CREATE TABLE messages (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    bot_id          TEXT NOT NULL,
    role            TEXT NOT NULL,
    -- The small columns first: a search reads them for every hit without
    -- stepping over a long body.
    created_at      TEXT NOT NULL,
    text            TEXT NOT NULL,
    body            TEXT NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    text,
    content = 'messages',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
-- Messages are indexed by the writer once per batch, not by a trigger:
-- FTS5 flushes its pending terms at every savepoint, and the writer runs
-- each job in one. `kv['store.messages_fts_seq']` is the last indexed seq;
-- only rows at or below it are in the index, so only they are taken out.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0)
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages
WHEN old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0)
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO messages_fts(rowid, text) VALUES (new.seq, new.text);
END;

CREATE TABLE mailbox (
    id          TEXT PRIMARY KEY,
    to_addr     TEXT NOT NULL,
    from_addr   TEXT NOT NULL,
    envelope    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    consumed_at TEXT
);
CREATE INDEX mailbox_pending ON mailbox(to_addr) WHERE consumed_at IS NULL;

CREATE TABLE usage (
    conversation_id    TEXT NOT NULL,
    bot_id             TEXT NOT NULL,
    day                TEXT NOT NULL,
    model              TEXT NOT NULL,
    calls              INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation_id, day, model)
);
CREATE INDEX usage_by_day ON usage(day);
CREATE INDEX usage_by_bot ON usage(bot_id, day);

CREATE TABLE kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- A compaction: the summary message and how many messages before it stay
-- verbatim. A conversation's model-visible history is its latest segment.
CREATE TABLE segments (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    summary_seq     INTEGER NOT NULL,
    tail_count      INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, summary_seq)
);
"#;

/// Migration 2: `messages.seq` without `AUTOINCREMENT`.
///
/// `AUTOINCREMENT` reads and rewrites a row of `sqlite_sequence` with every
/// insert: 7% of the writer's time per appended message. Without it, SQLite
/// gives a new row the largest `seq` plus one, which differs only after the
/// newest messages are deleted: their `seq` may be given again. Everything
/// that points at a `seq` goes with its conversation, except the full-text
/// index's mark of how far it has indexed; the delete trigger therefore
/// takes the mark back to the newest remaining message (after taking the
/// deleted one out of the index, in that order), so a `seq` given again is
/// indexed like any new one.
///
/// The rows keep their `seq`, so the index (keyed by it) stays valid. The
/// implicit delete of `DROP TABLE` fires no trigger.
///
/// The full-text index also merges its segments eight at a time instead of
/// four: a message is rewritten by fewer merges as the index grows (a tenth
/// less writer time per message over 400,000 appends; searches over
/// 1,000,000 messages measured the same).
const MESSAGES_WITHOUT_AUTOINCREMENT: &str = r#"
CREATE TABLE messages_v2 (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    bot_id          TEXT NOT NULL,
    role            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    text            TEXT NOT NULL,
    body            TEXT NOT NULL
);
INSERT INTO messages_v2 (seq, id, conversation_id, bot_id, role, created_at, text, body)
    SELECT seq, id, conversation_id, bot_id, role, created_at, text, body FROM messages ORDER BY seq;
DROP TABLE messages;
ALTER TABLE messages_v2 RENAME TO messages;
CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text)
        SELECT 'delete', old.seq, old.text
        WHERE old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0);
    UPDATE kv SET value = CAST((SELECT coalesce(max(seq), 0) FROM messages) AS TEXT)
        WHERE key = 'store.messages_fts_seq'
          AND CAST(value AS INTEGER) > (SELECT coalesce(max(seq), 0) FROM messages);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages
WHEN old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0)
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO messages_fts(rowid, text) VALUES (new.seq, new.text);
END;
INSERT INTO messages_fts(messages_fts, rank) VALUES ('automerge', 8);
"#;

/// Migration 3: `messages.bot_id` dropped. Nothing read it: a message's
/// bot is its conversation's. With it, from this version on, a message's
/// text is stored once, in `text`, and its `body` holds the rest of the
/// message with the text left empty ([`super::conversations`] puts it back
/// on read; bodies written before still hold theirs, which is the same).
/// Together a third less to write per short message, half per long one.
const MESSAGES_WITHOUT_BOT: &str = "ALTER TABLE messages DROP COLUMN bot_id;";

/// Migration 4: how each conversation was opened — its kind, parent, tool
/// ceiling, budget and briefing — as one JSON document, so every
/// activation (after passivation, a restart or a crash) rebuilds the same
/// actor. Kept apart from `conversations`, whose rows stay small.
const OPENINGS: &str = r#"
CREATE TABLE openings (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    spec            TEXT NOT NULL
);
"#;

/// Also migration 4: each subagent's deadline, stored when it starts, so a
/// timeout is armed again after a restart; and how many subagents of each
/// bot are running, kept in the transactions that start and end them, so
/// the delegation limits are read, not counted, when a delegation is
/// admitted.
const SUBAGENT_DEADLINES: &str = r#"
ALTER TABLE subagents ADD COLUMN deadline TEXT;
CREATE TABLE running_subagents (
    bot_id  TEXT PRIMARY KEY,
    running INTEGER NOT NULL CHECK (running >= 0)
);
INSERT INTO running_subagents (bot_id, running)
    SELECT d.bot_id, COUNT(*) FROM subagents s JOIN delegations d ON d.id = s.delegation_id
    WHERE s.status = 'running' GROUP BY d.bot_id;
"#;

/// Migration 11: outside executors. A subagent row may be an instance of
/// an outside coding harness (`executor` names it, `folder` is where it
/// works, `session` is the harness's own session, for `resume` and reads;
/// `tokens` what its model calls used; a delegation's `report_to` is the
/// house thread its report is posted into, for `delegate_task`); the record takes the harness's
/// events (`message`, `tool`, `note`), so the event table is rebuilt with
/// the wider check (same rows and sequence numbers, so the full-text
/// index, keyed by them, stays right).
const EXECUTOR_INSTANCES: &str = r#"
ALTER TABLE subagents ADD COLUMN executor TEXT;
ALTER TABLE subagents ADD COLUMN session TEXT;
ALTER TABLE subagents ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE delegations ADD COLUMN report_to TEXT;
CREATE TABLE delegation_events_wide (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    delegation_id TEXT NOT NULL REFERENCES delegations(id) ON DELETE CASCADE,
    subagent_id   TEXT,
    kind          TEXT NOT NULL
                  CHECK (kind IN ('task', 'steer', 'answer', 'final', 'files', 'message', 'tool', 'note')),
    text          TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
INSERT INTO delegation_events_wide (seq, delegation_id, subagent_id, kind, text, created_at)
    SELECT seq, delegation_id, subagent_id, kind, text, created_at FROM delegation_events;
DROP TABLE delegation_events;
ALTER TABLE delegation_events_wide RENAME TO delegation_events;
CREATE INDEX delegation_events_by_delegation ON delegation_events (delegation_id, seq);
CREATE TRIGGER delegation_events_ai AFTER INSERT ON delegation_events BEGIN
    INSERT INTO delegation_fts(rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER delegation_events_ad AFTER DELETE ON delegation_events BEGIN
    INSERT INTO delegation_fts(delegation_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE INDEX subagents_by_executor ON subagents (executor, status) WHERE executor IS NOT NULL;
"#;

/// Brings the schema to [`latest`], one transaction per migration.
///
/// Safe against another process migrating at the same moment: the version
/// is read again inside each write transaction.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let known = latest();
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| StoreError::from(e).at(path))?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| StoreError::from(e).at(path))?;
        if version > known {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                known,
            });
        }
        let Ok(applied) = usize::try_from(version) else {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("its schema version is {version}, below zero"),
            });
        };
        // A new database takes the current schema in one transaction;
        // one that has some versions takes the rest a version at a time.
        let upto = if applied == 0 {
            MIGRATIONS.len()
        } else {
            applied + 1
        };
        let Some(versions) = MIGRATIONS.get(applied..upto).filter(|v| !v.is_empty()) else {
            return Ok(());
        };
        let next = i64::try_from(upto).unwrap_or(i64::MAX);
        let script: Vec<&str> = if applied == 0 {
            // The built-in image has the schema made already (see `fresh`).
            let image: i32 = tx
                .query_row("PRAGMA application_id", [], |r| r.get(0))
                .map_err(|e| StoreError::from(e).at(path))?;
            let schema = (image != super::fresh::MARK).then_some(SCHEMA);
            schema
                .into_iter()
                .chain(ROWS.iter().copied())
                .chain((image == super::fresh::MARK).then_some("PRAGMA application_id = 0"))
                .collect()
        } else {
            versions
                .iter()
                .flat_map(|parts| parts.iter().copied())
                .collect()
        };
        script
            .iter()
            .try_for_each(|sql| tx.execute_batch(sql))
            .and_then(|()| tx.execute_batch(&format!("PRAGMA user_version = {next}")))
            .and_then(|()| tx.commit())
            .map_err(|e| StoreError::from(e).at(path))?;
        tracing::info!(path = %path.display(), version = next, "store schema migrated");
    }
}

/// An executor instance's events by instance: the workbench's live read,
/// `delegation_search`'s session read and a hand-over's packet each read
/// one instance's events, which the delegation's index left to a scan of
/// every delegation's events.
const EVENTS_BY_INSTANCE: &str = r#"
CREATE INDEX delegation_events_by_subagent ON delegation_events (subagent_id, seq)
    WHERE subagent_id IS NOT NULL;
"#;

/// Delegation entries are indexed by the writer in batches, like messages
/// ([`super::catch_up`]): the insert trigger goes, and the delete trigger
/// takes out only the entries already indexed. What was indexed by the old
/// trigger is marked so, when there is any.
pub(crate) const DELEGATION_EVENTS_DEFERRED: &str = r#"
DROP TRIGGER delegation_events_ai;
DROP TRIGGER delegation_events_ad;
INSERT INTO kv (key, value)
    SELECT 'store.delegation_fts_seq', CAST(max(seq) AS TEXT) FROM delegation_events
    HAVING max(seq) IS NOT NULL
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
CREATE TRIGGER delegation_events_ad AFTER DELETE ON delegation_events
WHEN old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.delegation_fts_seq'), 0)
BEGIN
    INSERT INTO delegation_fts(delegation_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
"#;

/// Conversations' `updated_at` follows the messages on a key of its own
/// ([`super::catch_up`]), no longer with their full-text index: it starts
/// where the index is (they moved together until now), and the messages'
/// delete trigger moves it back with the index's when the newest messages
/// go, so new ones reusing their `seq`s are taken again.
const CONVERSATIONS_TOUCHED: &str = r#"
INSERT INTO kv (key, value)
    SELECT 'store.conversations_touched_seq', value FROM kv WHERE key = 'store.messages_fts_seq';
DROP TRIGGER messages_fts_delete;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text)
        SELECT 'delete', old.seq, old.text
        WHERE old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0);
    UPDATE kv SET value = CAST((SELECT coalesce(max(seq), 0) FROM messages) AS TEXT)
        WHERE key IN ('store.messages_fts_seq', 'store.conversations_touched_seq')
          AND CAST(value AS INTEGER) > (SELECT coalesce(max(seq), 0) FROM messages);
END;
"#;

/// A `CHECK (x IN (…))` of three values or more builds a temporary B-tree
/// of its list every time a row is written (SQLite codes such an `IN` as a
/// lookup in an ephemeral index): half of a delegation entry's insert, 26k
/// instructions. The same checks, written as `x = … OR x = …`, compare in
/// place. A check that accepts the same values changes no row, so the
/// tables' definitions are edited where SQLite keeps them (the procedure of
/// SQLite's `ALTER TABLE` page for such changes); `RESET` reloads them, and
/// the table made and dropped after it moves the schema's version on, so
/// every other connection reloads them too.
const CHECKS_IN_PLACE: &str = r#"
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
    'status IN (''claimed'', ''running'', ''done'', ''failed'', ''skipped'')',
    'status = ''claimed'' OR status = ''running'' OR status = ''done'' OR status = ''failed'' OR status = ''skipped''')
    WHERE type = 'table' AND name = 'routine_runs';
UPDATE sqlite_schema SET sql = replace(sql,
    'status IN (''running'', ''done'', ''failed'', ''stopped'', ''timed_out'')',
    'status = ''running'' OR status = ''done'' OR status = ''failed'' OR status = ''stopped'' OR status = ''timed_out''')
    WHERE type = 'table' AND name = 'subagents';
UPDATE sqlite_schema SET sql = replace(sql,
    'status IN (''pending'', ''approved'', ''rejected'', ''failed'')',
    'status = ''pending'' OR status = ''approved'' OR status = ''rejected'' OR status = ''failed''')
    WHERE type = 'table' AND name = 'proposals';
UPDATE sqlite_schema SET sql = replace(sql,
    'listen IN (''all'', ''mentions'', ''off'')',
    'listen = ''all'' OR listen = ''mentions'' OR listen = ''off''')
    WHERE type = 'table' AND name = 'house_members';
UPDATE sqlite_schema SET sql = replace(sql,
    'kind IN (''text'', ''document'', ''binary'')',
    'kind = ''text'' OR kind = ''document'' OR kind = ''binary''')
    WHERE type = 'table' AND name = 'house_files';
UPDATE sqlite_schema SET sql = replace(sql,
    'state IN (''indexed'', ''pending'', ''failed'', ''not_indexable'')',
    'state = ''indexed'' OR state = ''pending'' OR state = ''failed'' OR state = ''not_indexable''')
    WHERE type = 'table' AND name = 'house_files';
UPDATE sqlite_schema SET sql = replace(sql,
    'status IN (''running'', ''ended'', ''lost'')',
    'status = ''running'' OR status = ''ended'' OR status = ''lost''')
    WHERE type = 'table' AND name = 'environment_commands';
UPDATE sqlite_schema SET sql = replace(sql,
    'kind IN (''task'', ''steer'', ''answer'', ''final'', ''files'', ''message'', ''tool'', ''note'')',
    'kind = ''task'' OR kind = ''steer'' OR kind = ''answer'' OR kind = ''final'' OR kind = ''files'' OR kind = ''message'' OR kind = ''tool'' OR kind = ''note''')
    WHERE type = 'table' AND name = 'delegation_events';
UPDATE sqlite_schema SET sql = replace(sql,
    'state IN (''owned'', ''moving'', ''moved'', ''refused'')',
    'state = ''owned'' OR state = ''moving'' OR state = ''moved'' OR state = ''refused''')
    WHERE type = 'table' AND name = 'house_fences';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_version_bump (x);
DROP TABLE schema_version_bump;
"#;

#[cfg(test)]
#[path = "schema_tests.rs"]
mod schema_tests;

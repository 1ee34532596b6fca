-- The schema the migrations in migrations.rs make, as one script: what a
-- new database takes instead of replaying them. Written by
-- `TROUPE_BLESS_SCHEMA=1 cargo test -p troupe-runtime schema`; do not edit.
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
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text,
    content = 'messages',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
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
CREATE TABLE segments (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    summary_seq     INTEGER NOT NULL,
    tail_count      INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, summary_seq)
);
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
                    CHECK (status = 'claimed' OR status = 'running' OR status = 'done' OR status = 'failed' OR status = 'skipped'),
    conversation_id TEXT,
    summary         TEXT,
    usage           TEXT,
    UNIQUE (routine_id, scheduled_for)
);
CREATE INDEX routine_runs_open ON routine_runs (status, lease_until);
CREATE TABLE delegations (
    id                  TEXT PRIMARY KEY,
    parent_conversation TEXT NOT NULL,
    bot_id              TEXT NOT NULL,
    waits               INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL CHECK (status IN ('running', 'reported')),
    created_at          TEXT NOT NULL,
    ended_at            TEXT
, report_to TEXT);
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
                    CHECK (status = 'running' OR status = 'done' OR status = 'failed' OR status = 'stopped' OR status = 'timed_out'),
    result          TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    ended_at        TEXT
, deadline TEXT, executor TEXT, session TEXT, tokens INTEGER NOT NULL DEFAULT 0, account TEXT, route TEXT);
CREATE INDEX subagents_by_delegation ON subagents (delegation_id, position);
CREATE UNIQUE INDEX subagents_by_conversation ON subagents (conversation_id);
CREATE VIRTUAL TABLE delegation_fts USING fts5(
    text, content='delegation_events', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
);
CREATE TABLE proposals (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    agent           TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    kind            TEXT NOT NULL,
    change          TEXT NOT NULL,
    summary         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status = 'pending' OR status = 'approved' OR status = 'rejected' OR status = 'failed'),
    note            TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    decided_at      TEXT
);
CREATE INDEX proposals_by_status ON proposals (status, id);
CREATE TABLE "messages" (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    text            TEXT NOT NULL,
    body            TEXT NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages
WHEN old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0)
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO messages_fts(rowid, text) VALUES (new.seq, new.text);
END;
CREATE TABLE openings (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    spec            TEXT NOT NULL
);
CREATE TABLE running_subagents (
    bot_id  TEXT PRIMARY KEY,
    running INTEGER NOT NULL CHECK (running >= 0)
);
CREATE TABLE houses (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE COLLATE NOCASE,
    settings   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(settings)),
    created_at TEXT NOT NULL
);
CREATE TABLE house_members (
    house_id     TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    handle       TEXT NOT NULL COLLATE NOCASE,
    kind         TEXT NOT NULL CHECK (kind IN ('human', 'bot')),
    display_name TEXT NOT NULL DEFAULT '',
    bot_id       TEXT,
    listen       TEXT CHECK (listen = 'all' OR listen = 'mentions' OR listen = 'off'),
    joined_at    TEXT NOT NULL,
    PRIMARY KEY (house_id, handle)
) WITHOUT ROWID;
CREATE INDEX house_members_by_bot ON house_members (bot_id) WHERE bot_id IS NOT NULL;
CREATE TABLE threads (
    id               TEXT PRIMARY KEY,
    house_id         TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    name             TEXT COLLATE NOCASE,
    tags             TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),
    pinned           INTEGER NOT NULL DEFAULT 0,
    archived_at      TEXT,
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    last_activity_at TEXT NOT NULL,
    messages         INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX threads_by_name ON threads (house_id, name) WHERE name IS NOT NULL;
CREATE INDEX threads_by_activity ON threads (house_id, last_activity_at);
CREATE TABLE thread_participants (
    thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    handle    TEXT NOT NULL COLLATE NOCASE,
    added_at  TEXT NOT NULL,
    PRIMARY KEY (thread_id, handle)
) WITHOUT ROWID;
CREATE INDEX thread_participants_by_handle ON thread_participants (handle, thread_id);
CREATE TABLE thread_seats (
    thread_id       TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    handle          TEXT NOT NULL COLLATE NOCASE,
    conversation_id TEXT NOT NULL,
    seen_seq        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, handle)
) WITHOUT ROWID;
CREATE TABLE thread_messages (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    thread_id   TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    author      TEXT NOT NULL,
    author_kind TEXT NOT NULL CHECK (author_kind IN ('human', 'bot')),
    via_thread  TEXT,
    created_at  TEXT NOT NULL,
    text        TEXT NOT NULL
, attachments TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(attachments)));
CREATE INDEX thread_messages_by_thread ON thread_messages (thread_id, seq);
CREATE VIRTUAL TABLE thread_fts USING fts5(
    text, content = 'thread_messages', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER thread_messages_ai AFTER INSERT ON thread_messages BEGIN
    INSERT INTO thread_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER thread_messages_ad AFTER DELETE ON thread_messages BEGIN
    INSERT INTO thread_fts (thread_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TABLE thread_rounds (
    round     TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    offered   INTEGER NOT NULL DEFAULT 0,
    answered  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE file_pieces (
    id   INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    refs INTEGER NOT NULL,
    data BLOB NOT NULL
, codec INTEGER NOT NULL DEFAULT 0);
CREATE TABLE file_contents (
    id     INTEGER PRIMARY KEY,
    hash   BLOB NOT NULL UNIQUE,
    size   INTEGER NOT NULL,
    refs   INTEGER NOT NULL,
    pieces BLOB NOT NULL
, format INTEGER NOT NULL DEFAULT 0);
CREATE TABLE house_file_versions (
    house_id   TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    author     TEXT NOT NULL,
    message    TEXT NOT NULL DEFAULT '',
    changes    TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(changes)),
    created_at TEXT NOT NULL,
    PRIMARY KEY (house_id, version)
) WITHOUT ROWID;
CREATE TABLE house_file_revisions (
    house_id     TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    path_key     TEXT NOT NULL,
    version      INTEGER NOT NULL,
    path         TEXT NOT NULL,
    content      INTEGER NOT NULL,
    text_content INTEGER,
    PRIMARY KEY (house_id, path_key, version)
) WITHOUT ROWID;
CREATE TABLE house_files (
    house_id     TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    path_key     TEXT NOT NULL,
    path         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    size         INTEGER NOT NULL,
    kind         TEXT NOT NULL CHECK (kind = 'text' OR kind = 'document' OR kind = 'binary'),
    state        TEXT NOT NULL CHECK (state = 'indexed' OR state = 'pending' OR state = 'failed' OR state = 'not_indexable'),
    state_detail TEXT NOT NULL DEFAULT '',
    author       TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (house_id, path_key)
) WITHOUT ROWID;
CREATE TABLE house_file_chunks (
    id       INTEGER PRIMARY KEY,
    house_id TEXT NOT NULL,
    path_key TEXT NOT NULL,
    chunk    INTEGER NOT NULL,
    text     TEXT NOT NULL
, version INTEGER NOT NULL DEFAULT 0);
CREATE INDEX house_file_chunks_by_file ON house_file_chunks (house_id, path_key, chunk);
CREATE VIRTUAL TABLE house_file_fts USING fts5(
    text, content = 'house_file_chunks', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER house_file_chunks_ad AFTER DELETE ON house_file_chunks BEGIN
    INSERT INTO house_file_fts(house_file_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE member_tokens (
    id         TEXT PRIMARY KEY,
    hash       BLOB NOT NULL UNIQUE,
    house_id   TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    handle     TEXT NOT NULL COLLATE NOCASE,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    used_at    TEXT
);
CREATE INDEX member_tokens_by_member ON member_tokens (house_id, handle);
CREATE INDEX thread_seats_by_conversation ON thread_seats (conversation_id);
CREATE INDEX house_files_pending ON house_files (house_id) WHERE state = 'pending';
CREATE TABLE environments (
    id         TEXT PRIMARY KEY,
    house_id   TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    uid        INTEGER,
    sandboxed  INTEGER NOT NULL DEFAULT 1,
    stopped    INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    last_used  TEXT NOT NULL
);
CREATE INDEX environments_by_house ON environments (house_id, created_at);
CREATE TABLE environment_threads (
    thread_id TEXT PRIMARY KEY,
    env_id    TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    bound_at  TEXT NOT NULL
);
CREATE INDEX environment_threads_by_env ON environment_threads (env_id);
CREATE TABLE environment_commands (
    id         TEXT PRIMARY KEY,
    env_id     TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    command    TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status = 'running' OR status = 'ended' OR status = 'lost'),
    exit_code  INTEGER,
    started_at TEXT NOT NULL,
    ended_at   TEXT
);
CREATE INDEX environment_commands_by_env ON environment_commands (env_id, status);
CREATE TABLE house_file_usage (
    house_id TEXT PRIMARY KEY REFERENCES houses(id) ON DELETE CASCADE,
    bytes    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE "delegation_events" (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    delegation_id TEXT NOT NULL REFERENCES delegations(id) ON DELETE CASCADE,
    subagent_id   TEXT,
    kind          TEXT NOT NULL
                  CHECK (kind = 'task' OR kind = 'steer' OR kind = 'answer' OR kind = 'final' OR kind = 'files' OR kind = 'message' OR kind = 'tool' OR kind = 'note'),
    text          TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX delegation_events_by_delegation ON delegation_events (delegation_id, seq);
CREATE INDEX subagents_by_executor ON subagents (executor, status) WHERE executor IS NOT NULL;
CREATE TABLE executor_usage (
    id          INTEGER PRIMARY KEY,
    executor    TEXT NOT NULL,
    account     TEXT NOT NULL,
    at          INTEGER NOT NULL,
    tokens      INTEGER NOT NULL DEFAULT 0,
    cost_usd    REAL NOT NULL DEFAULT 0,
    subagent_id TEXT
);
CREATE INDEX executor_usage_by_account ON executor_usage (executor, account, at, tokens, cost_usd);
CREATE TABLE executor_limits (
    executor    TEXT NOT NULL,
    account     TEXT NOT NULL,
    reached_at  INTEGER NOT NULL,
    resets_at   INTEGER,
    why         TEXT NOT NULL,
    subagent_id TEXT,
    PRIMARY KEY (executor, account)
);
CREATE TABLE cluster_outbox (
    id         TEXT PRIMARY KEY,
    peer       TEXT NOT NULL,
    envelope   TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX cluster_outbox_by_peer ON cluster_outbox (peer);
CREATE TABLE cluster_received (
    id          TEXT PRIMARY KEY,
    from_node   TEXT NOT NULL,
    received_at TEXT NOT NULL
);
CREATE TABLE cluster_routes (
    addr       TEXT PRIMARY KEY,
    node       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE cluster_bots (
    name        TEXT PRIMARY KEY,
    bot_id      TEXT NOT NULL,
    node        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    updated_at  TEXT NOT NULL
);
CREATE TABLE cluster_peers (
    node       TEXT PRIMARY KEY,
    listen     TEXT NOT NULL,
    updated_at TEXT NOT NULL
, http TEXT);
CREATE INDEX delegation_events_by_subagent ON delegation_events (subagent_id, seq)
    WHERE subagent_id IS NOT NULL;
CREATE TABLE cluster_houses (
    node       TEXT NOT NULL,
    name       TEXT NOT NULL,
    house_id   TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (node, name)
);
CREATE TABLE house_fences (
    house_id   TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    state      TEXT NOT NULL CHECK (state = 'owned' OR state = 'moving' OR state = 'moved' OR state = 'refused'),
    peer       TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE house_move_parts (
    house_id TEXT NOT NULL,
    epoch    INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (house_id, epoch, seq)
) WITHOUT ROWID;
CREATE TABLE cluster_kinds (
    node       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (node, kind)
) WITHOUT ROWID;
CREATE INDEX file_pieces_untried ON file_pieces (id) WHERE codec = 2;
CREATE TRIGGER delegation_events_ad AFTER DELETE ON delegation_events
WHEN old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.delegation_fts_seq'), 0)
BEGIN
    INSERT INTO delegation_fts(delegation_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TABLE usage_pending (
    seq                INTEGER PRIMARY KEY,
    conversation_id    TEXT NOT NULL,
    bot_id             TEXT NOT NULL,
    day                TEXT NOT NULL,
    model              TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_usd           REAL NOT NULL
);
CREATE VIEW usage_all AS
    SELECT conversation_id, bot_id, day, model, calls, input_tokens, output_tokens,
           cache_read_tokens, cache_write_tokens, cost_usd FROM usage
    UNION ALL
    SELECT conversation_id, bot_id, day, model, 1, input_tokens, output_tokens,
           cache_read_tokens, cache_write_tokens, cost_usd FROM usage_pending;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text)
        SELECT 'delete', old.seq, old.text
        WHERE old.seq <= coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'store.messages_fts_seq'), 0);
    UPDATE kv SET value = CAST((SELECT coalesce(max(seq), 0) FROM messages) AS TEXT)
        WHERE key IN ('store.messages_fts_seq', 'store.conversations_touched_seq')
          AND CAST(value AS INTEGER) > (SELECT coalesce(max(seq), 0) FROM messages);
END;

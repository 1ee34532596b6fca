//! Moving a house from one node's store to another's (docs/cluster.md,
//! "Moving a house").
//!
//! A house's data is its rows in a handful of tables — the house, its
//! members and tokens, its threads with their participants and messages,
//! its files' versions, revisions and contents, its environments' records
//! — all found by the house's id. [`export`] reads them in one snapshot as a
//! stream of parts (MessagePack, LZ4; each under [`PART_BYTES`] before
//! compression, each decoded alone), and [`commit`] writes the parts staged
//! in another store into it in one transaction, one part at a time — so
//! neither node holds more of the house in memory than a part and its
//! largest file. What is the node's own is not carried:
//! the bots' seats in the threads (their conversations live with the bots;
//! a bot of the new node takes its seat anew and reads what it has not
//! seen), the rounds (a house moves only once every round is answered), the
//! files' search index (the new node indexes the files again) and the
//! environments' running state (they move stopped, with a user id of the
//! new node).
//!
//! Who serves a house is decided by its **fence**, a row per house in each
//! store, with an epoch that only grows:
//!
//! - the source records `moving` (epoch e, to the target) before it copies
//!   anything, and from then on does not serve the house;
//! - the target stages the bundle's parts, then commits the whole house
//!   with its fence `owned` at epoch e — from that commit it serves it;
//! - the source then deletes the house and records `moved` (epoch e, to the
//!   target), in one transaction ([`finish`]).
//!
//! When the source cannot tell whether the target committed (either node
//! was killed, a call timed out) it asks the target to refuse epoch e
//! ([`refuse`]): the answer is either "committed already" (the source
//! finishes) or "refused", after which a late commit of epoch e is refused
//! too, and the source serves the house again ([`roll_back`]). So at no time
//! do two nodes serve one house.

use std::collections::HashMap;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

use super::house_files::{content, pieces::Packed};
use super::{now, StoreError};
use crate::protocol::wire::Bytes;

/// The migration that makes the fences and the staged parts.
pub const HOUSE_MOVES: &str = r#"
CREATE TABLE house_fences (
    house_id   TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('owned', 'moving', 'moved', 'refused')),
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
"#;

/// The tables a house's rows are in, parents first, each with the query
/// that finds the house's rows (`?1` its id). An import takes only these
/// names, and only columns its own table has.
const TABLES: &[(&str, &str)] = &[
    ("houses", "SELECT * FROM houses WHERE id = ?1"),
    (
        "house_members",
        "SELECT * FROM house_members WHERE house_id = ?1",
    ),
    ("threads", "SELECT * FROM threads WHERE house_id = ?1"),
    (
        "thread_participants",
        "SELECT p.* FROM thread_participants p JOIN threads t ON t.id = p.thread_id
         WHERE t.house_id = ?1",
    ),
    (
        "thread_messages",
        "SELECT m.* FROM thread_messages m JOIN threads t ON t.id = m.thread_id
         WHERE t.house_id = ?1 ORDER BY m.seq",
    ),
    (
        "house_file_versions",
        "SELECT * FROM house_file_versions WHERE house_id = ?1",
    ),
    (
        "house_file_revisions",
        "SELECT * FROM house_file_revisions WHERE house_id = ?1",
    ),
    (
        "house_files",
        "SELECT * FROM house_files WHERE house_id = ?1",
    ),
    (
        "house_file_usage",
        "SELECT * FROM house_file_usage WHERE house_id = ?1",
    ),
    (
        "member_tokens",
        "SELECT * FROM member_tokens WHERE house_id = ?1",
    ),
    (
        "environments",
        "SELECT * FROM environments WHERE house_id = ?1",
    ),
    (
        "environment_threads",
        "SELECT x.* FROM environment_threads x JOIN environments e ON e.id = x.env_id
         WHERE e.house_id = ?1",
    ),
    (
        "environment_commands",
        "SELECT x.* FROM environment_commands x JOIN environments e ON e.id = x.env_id
         WHERE e.house_id = ?1",
    ),
];

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Bytes),
}

impl From<Value> for Cell {
    fn from(v: Value) -> Self {
        match v {
            Value::Null => Cell::Null,
            Value::Integer(i) => Cell::Int(i),
            Value::Real(f) => Cell::Real(f),
            Value::Text(s) => Cell::Text(s),
            Value::Blob(b) => Cell::Blob(Bytes(b)),
        }
    }
}

impl From<Cell> for Value {
    fn from(c: Cell) -> Self {
        match c {
            Cell::Null => Value::Null,
            Cell::Int(i) => Value::Integer(i),
            Cell::Real(f) => Value::Real(f),
            Cell::Text(s) => Value::Text(s),
            Cell::Blob(b) => Value::Blob(b.0),
        }
    }
}

/// Some rows of one table of the house.
#[derive(Debug, Serialize, Deserialize)]
struct Rows {
    table: String,
    columns: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

/// One part of a house as it travels; each decodes alone.
#[derive(Debug, Serialize, Deserialize)]
enum Part {
    /// The first: the house, and the source's schema version (the
    /// target's must be the same).
    Head { schema: i64, house_id: String },
    /// A slice of a file content the house's revisions refer to, by its id
    /// at the source; the last slice says so.
    Content { id: i64, bytes: Bytes, last: bool },
    /// Rows of one table (contents come first, then the tables in order).
    Rows(Rows),
}

/// The most bytes of rows or content in one part, before compression.
pub const PART_BYTES: usize = 1024 * 1024;

/// What a house holds, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Threads.
    pub threads: u64,
    /// Messages in them.
    pub messages: u64,
    /// Files (their latest versions).
    pub files: u64,
    /// The parts' bytes, as sent (compressed).
    pub bytes: u64,
}

impl Counts {
    fn add(&mut self, table: &str, rows: usize) {
        let n = rows as u64;
        match table {
            "threads" => self.threads += n,
            "thread_messages" => self.messages += n,
            "house_files" => self.files += n,
            _ => {}
        }
    }
}

fn codec(e: impl std::fmt::Display) -> StoreError {
    StoreError::Codec {
        what: "house move part",
        detail: e.to_string(),
    }
}

fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

fn cell_bytes(c: &Cell) -> usize {
    match c {
        Cell::Text(s) => s.len() + 8,
        Cell::Blob(b) => b.0.len() + 8,
        _ => 9,
    }
}

/// The house `house_id`'s rows and file contents, read in one snapshot and
/// given to `send` as encoded parts, in order (`send` may block: the
/// snapshot waits for it). What [`commit`] takes, staged by [`stage`].
pub fn export(
    conn: &Connection,
    house_id: &str,
    mut send: impl FnMut(Vec<u8>) -> Result<(), StoreError>,
) -> Result<Counts, StoreError> {
    let snapshot = conn.unchecked_transaction()?;
    let found: bool = snapshot.query_row(
        "SELECT EXISTS (SELECT 1 FROM houses WHERE id = ?1)",
        params![house_id],
        |r| r.get(0),
    )?;
    if !found {
        return Err(StoreError::Invalid(format!(
            "there is no house `{house_id}` in this store"
        )));
    }
    let mut counts = Counts::default();
    let mut emit = |part: &Part, counts: &mut Counts| -> Result<(), StoreError> {
        let encoded = rmp_serde::to_vec(part).map_err(codec)?;
        let bytes = lz4_flex::compress_prepend_size(&encoded);
        counts.bytes += bytes.len() as u64;
        send(bytes)
    };
    let head = Part::Head {
        schema: schema_version(&snapshot)?,
        house_id: house_id.to_string(),
    };
    emit(&head, &mut counts)?;
    let ids: Vec<i64> = snapshot
        .prepare(
            "SELECT content FROM house_file_revisions WHERE house_id = ?1
             UNION SELECT text_content FROM house_file_revisions
             WHERE house_id = ?1 AND text_content IS NOT NULL",
        )?
        .query_map(params![house_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids {
        let bytes = content::get(&snapshot, id)?;
        let mut slices = bytes.chunks(PART_BYTES).peekable();
        if slices.peek().is_none() {
            emit(
                &Part::Content {
                    id,
                    bytes: Bytes(Vec::new()),
                    last: true,
                },
                &mut counts,
            )?;
        }
        while let Some(slice) = slices.next() {
            let part = Part::Content {
                id,
                bytes: Bytes(slice.to_vec()),
                last: slices.peek().is_none(),
            };
            emit(&part, &mut counts)?;
        }
    }
    for (table, query) in TABLES {
        let mut stmt = snapshot.prepare(query)?;
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        let width = columns.len();
        let mut rows = stmt.query(params![house_id])?;
        let mut chunk = Vec::new();
        let mut size = 0;
        loop {
            let row = rows.next()?;
            if let Some(row) = row {
                let cells = (0..width)
                    .map(|i| row.get::<_, Value>(i).map(Cell::from))
                    .collect::<Result<Vec<_>, _>>()?;
                size += cells.iter().map(cell_bytes).sum::<usize>();
                chunk.push(cells);
                if size < PART_BYTES {
                    continue;
                }
            } else if chunk.is_empty() {
                break;
            }
            counts.add(table, chunk.len());
            let part = Part::Rows(Rows {
                table: (*table).to_string(),
                columns: columns.clone(),
                rows: std::mem::take(&mut chunk),
            });
            emit(&part, &mut counts)?;
            size = 0;
            if row.is_none() {
                break;
            }
        }
    }
    Ok(counts)
}

/// The columns `table` has in this store.
fn columns_of(tx: &Transaction<'_>, table: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = tx.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<Result<_, _>>()?;
    Ok(names)
}

/// Writes a house into this store part by part, in the caller's
/// transaction: each content stored once (and referred to by each of the
/// revisions that name it), each row written as this store needs it.
struct Importer<'t, 'c> {
    tx: &'t Transaction<'c>,
    house_id: Option<String>,
    /// Content ids at the source → here.
    contents: HashMap<i64, i64>,
    /// The content being gathered, slice by slice.
    gathering: Option<(i64, Vec<u8>)>,
    counts: Counts,
}

impl<'t, 'c> Importer<'t, 'c> {
    fn new(tx: &'t Transaction<'c>) -> Self {
        Importer {
            tx,
            house_id: None,
            contents: HashMap::new(),
            gathering: None,
            counts: Counts::default(),
        }
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.counts.bytes += bytes.len() as u64;
        let encoded = lz4_flex::decompress_size_prepended(bytes).map_err(codec)?;
        let part: Part = rmp_serde::from_slice(&encoded).map_err(codec)?;
        match (part, &self.house_id) {
            (Part::Head { schema, house_id }, None) => {
                let here = schema_version(self.tx)?;
                if schema != here {
                    return Err(StoreError::Invalid(format!(
                        "the house comes from a store of schema version {schema}, this one is \
                         {here}: run the same troupe on both nodes to move a house"
                    )));
                }
                self.house_id = Some(house_id);
            }
            (_, None) | (Part::Head { .. }, Some(_)) => {
                return Err(codec("the parts do not begin with the house's head"))
            }
            (Part::Content { id, bytes, last }, Some(_)) => {
                let mut gathered = match self.gathering.take() {
                    Some((at, so_far)) if at == id => so_far,
                    Some(_) => return Err(codec("a content's slices are not together")),
                    None => Vec::new(),
                };
                gathered.extend_from_slice(&bytes.0);
                if last {
                    let stored = content::put(self.tx, &Packed::new(&gathered))?;
                    self.contents.insert(id, stored);
                } else {
                    self.gathering = Some((id, gathered));
                }
            }
            (Part::Rows(rows), Some(_)) => self.rows(rows)?,
        }
        Ok(())
    }

    fn rows(&mut self, rows: Rows) -> Result<(), StoreError> {
        let tx = self.tx;
        let Some(&(table, _)) = TABLES.iter().find(|(t, _)| *t == rows.table) else {
            return Err(codec(format!("a table not of a house: `{}`", rows.table)));
        };
        let known = columns_of(tx, table)?;
        for c in &rows.columns {
            if !known.contains(c) {
                return Err(StoreError::Invalid(format!(
                    "`{table}` has no column `{c}` on this node: run the same troupe on both nodes"
                )));
            }
        }
        // The thread messages' sequence is this store's own.
        let kept: Vec<usize> = (0..rows.columns.len())
            .filter(|&i| !(table == "thread_messages" && rows.columns[i] == "seq"))
            .collect();
        let names: Vec<&str> = kept.iter().map(|&i| rows.columns[i].as_str()).collect();
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            names.join(", "),
            vec!["?"; names.len()].join(", ")
        );
        let mut insert = tx.prepare_cached(&sql)?;
        self.counts.add(table, rows.rows.len());
        for row in rows.rows {
            if row.len() != rows.columns.len() {
                return Err(codec(format!("a row of `{table}` of the wrong width")));
            }
            let mut values: Vec<Value> = Vec::with_capacity(kept.len());
            for &i in &kept {
                let cell = adapt(
                    tx,
                    table,
                    &rows.columns[i],
                    &row,
                    &rows.columns,
                    &self.contents,
                )?;
                values.push(cell.unwrap_or_else(|| row[i].clone().into()));
            }
            insert.execute(rusqlite::params_from_iter(values))?;
        }
        Ok(())
    }

    /// The house's id and counts; each content's own reference from the
    /// import dropped (its revisions hold theirs).
    fn finish(self) -> Result<(String, Counts), StoreError> {
        if self.gathering.is_some() {
            return Err(codec("a content's last slice is missing"));
        }
        for stored in self.contents.values() {
            content::release(self.tx, *stored)?;
        }
        let id = self.house_id.ok_or_else(|| codec("no parts"))?;
        Ok((id, self.counts))
    }
}

/// What this store writes instead of the source's value of `column`, when
/// it is not the source's to give: file content ids, a bot member's bot,
/// an environment's user id and state, the search index's state.
fn adapt(
    tx: &Transaction<'_>,
    table: &str,
    column: &str,
    row: &[Cell],
    columns: &[String],
    contents: &HashMap<i64, i64>,
) -> Result<Option<Value>, StoreError> {
    let get = |name: &str| {
        columns
            .iter()
            .position(|c| c == name)
            .map(|i| row[i].clone())
    };
    let value = match (table, column) {
        ("house_file_revisions", "content" | "text_content") => match get(column) {
            Some(Cell::Int(old)) => {
                let &stored = contents
                    .get(&old)
                    .ok_or_else(|| codec(format!("content {old} is not among the parts")))?;
                content::retain(tx, stored)?;
                Value::Integer(stored)
            }
            _ => Value::Null,
        },
        // A bot member is this node's bot of that name, if it has one.
        ("house_members", "bot_id") => match (get("kind"), get("handle")) {
            (Some(Cell::Text(kind)), Some(Cell::Text(handle))) if kind == "bot" => tx
                .prepare_cached("SELECT id FROM bots WHERE name = ?1 COLLATE NOCASE")?
                .query_row(params![handle], |r| r.get::<_, String>(0))
                .optional()?
                .map_or(Value::Null, Value::Text),
            _ => Value::Null,
        },
        ("house_files", "state") => match get("state") {
            Some(Cell::Text(s)) if s == "indexed" => Value::Text("pending".into()),
            Some(c) => c.into(),
            None => Value::Null,
        },
        ("environments", "stopped") => Value::Integer(1),
        ("environments", "uid") => match get("uid") {
            Some(Cell::Int(_)) => {
                let last: Option<i64> =
                    tx.query_row("SELECT MAX(uid) FROM environments", [], |r| r.get(0))?;
                Value::Integer(last.map_or(i64::from(super::environments::FIRST_UID), |u| u + 1))
            }
            _ => Value::Null,
        },
        ("environment_commands", "status") => match get("status") {
            Some(Cell::Text(s)) if s == "running" => Value::Text("lost".into()),
            Some(c) => c.into(),
            None => Value::Null,
        },
        _ => return Ok(None),
    };
    Ok(Some(value))
}

/// Deletes the house `house_id` and everything of it from this store,
/// releasing its files' contents.
fn delete_house(tx: &Transaction<'_>, house_id: &str) -> Result<(), StoreError> {
    let held: Vec<(i64, Option<i64>)> = tx
        .prepare("SELECT content, text_content FROM house_file_revisions WHERE house_id = ?1")?
        .query_map(params![house_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (c, text) in held {
        content::release(tx, c)?;
        if let Some(t) = text {
            content::release(tx, t)?;
        }
    }
    tx.execute(
        "DELETE FROM house_file_chunks WHERE house_id = ?1",
        params![house_id],
    )?;
    tx.execute("DELETE FROM houses WHERE id = ?1", params![house_id])?;
    Ok(())
}

/// Who serves a house, as this store knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The house's id.
    pub house_id: String,
    /// Its name.
    pub name: String,
    /// The epoch of the last move this store took part in.
    pub epoch: i64,
    /// `owned`, `moving` (to `peer`), `moved` (to `peer`) or `refused`.
    pub state: String,
    /// The other node of that move.
    pub peer: String,
}

fn fence_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Fence> {
    Ok(Fence {
        house_id: r.get(0)?,
        name: r.get(1)?,
        epoch: r.get(2)?,
        state: r.get(3)?,
        peer: r.get(4)?,
    })
}

const FENCE: &str = "SELECT house_id, name, epoch, state, peer FROM house_fences";

/// The fence of `house_id`, if a move ever touched it here.
pub fn fence(conn: &Connection, house_id: &str) -> Result<Option<Fence>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{FENCE} WHERE house_id = ?1"))?
        .query_row(params![house_id], fence_row)
        .optional()?)
}

/// Every move this store is in the middle of or made (`moving`, `moved`).
pub fn moves(conn: &Connection) -> Result<Vec<Fence>, StoreError> {
    Ok(conn
        .prepare(&format!("{FENCE} WHERE state IN ('moving', 'moved')"))?
        .query_map([], fence_row)?
        .collect::<Result<_, _>>()?)
}

fn set_fence(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    epoch: i64,
    state: &str,
    peer: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO house_fences (house_id, name, epoch, state, peer, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (house_id) DO UPDATE SET name = excluded.name, epoch = excluded.epoch,
             state = excluded.state, peer = excluded.peer, updated_at = excluded.updated_at",
    )?
    .execute(params![house_id, name, epoch, state, peer, now()])?;
    Ok(())
}

/// The source's first step: the house stops being served here, to be
/// moved to `to` at the returned epoch. Refused while another move of it
/// is under way.
pub fn begin(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    to: &str,
) -> Result<i64, StoreError> {
    let last = fence(tx, house_id)?;
    if let Some(f) = last.as_ref().filter(|f| f.state == "moving") {
        return Err(StoreError::Conflict(format!(
            "house `{name}` is being moved to node `{}` already",
            f.peer
        )));
    }
    let epoch = last.map_or(0, |f| f.epoch) + 1;
    set_fence(tx, house_id, name, epoch, "moving", to)?;
    Ok(epoch)
}

/// The source's last step, once the target committed the house at
/// `epoch`: the house deleted here and the fence `moved`. False if the
/// fence is not that move's (finished before, or rolled back).
pub fn finish(tx: &Transaction<'_>, house_id: &str, epoch: i64) -> Result<bool, StoreError> {
    let Some(f) = fence(tx, house_id)?.filter(|f| f.state == "moving" && f.epoch == epoch) else {
        return Ok(false);
    };
    delete_house(tx, house_id)?;
    set_fence(tx, house_id, &f.name, epoch, "moved", &f.peer)?;
    Ok(true)
}

/// The source serves the house again: the target refused `epoch`.
pub fn roll_back(tx: &Transaction<'_>, house_id: &str, epoch: i64) -> Result<bool, StoreError> {
    let Some(f) = fence(tx, house_id)?.filter(|f| f.state == "moving" && f.epoch == epoch) else {
        return Ok(false);
    };
    set_fence(tx, house_id, &f.name, epoch, "owned", "")?;
    Ok(true)
}

/// Why the target will not take a move at `epoch`, if it will not.
fn refused_at(
    tx: &Transaction<'_>,
    house_id: &str,
    epoch: i64,
) -> Result<Option<String>, StoreError> {
    Ok(match fence(tx, house_id)? {
        Some(f) if f.epoch > epoch || (f.epoch == epoch && f.state != "owned") => Some(format!(
            "this node has seen move {} of house `{}` ({}); move {epoch} is over",
            f.epoch, f.name, f.state
        )),
        _ => None,
    })
}

/// The target keeps piece `seq` of the house at `epoch` (the parts of an
/// earlier epoch go).
pub fn stage(
    tx: &Transaction<'_>,
    house_id: &str,
    epoch: i64,
    seq: i64,
    data: &[u8],
) -> Result<(), StoreError> {
    if let Some(why) = refused_at(tx, house_id, epoch)? {
        return Err(StoreError::Conflict(why));
    }
    tx.prepare_cached("DELETE FROM house_move_parts WHERE house_id = ?1 AND epoch < ?2")?
        .execute(params![house_id, epoch])?;
    tx.prepare_cached(
        "INSERT INTO house_move_parts (house_id, epoch, seq, data) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (house_id, epoch, seq) DO UPDATE SET data = excluded.data",
    )?
    .execute(params![house_id, epoch, seq, data])?;
    Ok(())
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// The house is this node's now, holding this much.
    Now(Counts),
    /// It was already, at this epoch (a retried commit).
    Already,
}

/// The target takes the house at `epoch` from `from`: the `parts` pieces
/// staged, imported, its fence `owned`, in the caller's transaction.
pub fn commit(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    epoch: i64,
    from: &str,
    parts: i64,
) -> Result<Committed, StoreError> {
    if fence(tx, house_id)?.is_some_and(|f| f.epoch == epoch && f.state == "owned") {
        return Ok(Committed::Already);
    }
    if let Some(why) = refused_at(tx, house_id, epoch)? {
        return Err(StoreError::Conflict(why));
    }
    let taken: Option<String> = tx
        .query_row(
            "SELECT name FROM houses WHERE id = ?1 OR name = ?2 COLLATE NOCASE",
            params![house_id, name],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(other) = taken {
        return Err(StoreError::Conflict(format!(
            "this node has a house `{other}` already; a house named `{name}` cannot move here"
        )));
    }
    let staged: i64 = tx.query_row(
        "SELECT COUNT(*) FROM house_move_parts WHERE house_id = ?1 AND epoch = ?2",
        params![house_id, epoch],
        |r| r.get(0),
    )?;
    if staged != parts {
        return Err(StoreError::Invalid(format!(
            "{staged} of the house's {parts} parts arrived; send them again"
        )));
    }
    let mut importer = Importer::new(tx);
    {
        let mut stmt = tx.prepare(
            "SELECT data FROM house_move_parts WHERE house_id = ?1 AND epoch = ?2 ORDER BY seq",
        )?;
        let mut rows = stmt.query(params![house_id, epoch])?;
        while let Some(row) = rows.next()? {
            let data = row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
            importer.take(data)?;
        }
    }
    let (id, counts) = importer.finish()?;
    if id != house_id {
        return Err(codec(format!(
            "the parts are of house {id}, not {house_id}"
        )));
    }
    tx.prepare_cached("DELETE FROM house_move_parts WHERE house_id = ?1")?
        .execute(params![house_id])?;
    set_fence(tx, house_id, name, epoch, "owned", from)?;
    Ok(Committed::Now(counts))
}

/// The target answers a source that cannot tell whether the move at
/// `epoch` was committed: true if it was; else the epoch is refused from
/// now on (a late commit of it fails) and its staged parts go.
pub fn refuse(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    epoch: i64,
) -> Result<bool, StoreError> {
    match fence(tx, house_id)? {
        Some(f) if f.epoch == epoch && f.state == "owned" => return Ok(true),
        Some(f) if f.epoch > epoch => return Ok(false),
        _ => {}
    }
    tx.prepare_cached("DELETE FROM house_move_parts WHERE house_id = ?1")?
        .execute(params![house_id])?;
    set_fence(tx, house_id, name, epoch, "refused", "")?;
    Ok(false)
}

/// Whether a round of the house is unanswered or a message for one of its
/// threads, or its bots' seats there, waits: a house moves only when none.
pub fn busy(conn: &Connection, house_id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM thread_rounds r JOIN threads t ON t.id = r.thread_id
                            WHERE t.house_id = ?1 AND r.answered < r.offered)
                 OR EXISTS (SELECT 1 FROM mailbox m WHERE m.consumed_at IS NULL AND m.to_addr IN (
                            SELECT id FROM threads WHERE house_id = ?1
                            UNION SELECT s.conversation_id FROM thread_seats s
                            JOIN threads t ON t.id = s.thread_id WHERE t.house_id = ?1))",
        )?
        .query_row(params![house_id], |r| r.get(0))?)
}

#[cfg(test)]
#[path = "house_move_tests.rs"]
mod tests;

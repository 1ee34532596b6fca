//! A house as parts: what [`super::export`] reads out of one store and
//! [`Importer`] writes into another, table by table, content by content.

use std::collections::HashMap;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

use crate::protocol::wire::Bytes;
use crate::store::house_files::{content, pieces::Packed};
use crate::store::StoreError;

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

pub(super) fn codec(e: impl std::fmt::Display) -> StoreError {
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
/// snapshot waits for it). What [`super::commit`] takes, staged by [`super::stage`].
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
pub(super) struct Importer<'t, 'c> {
    tx: &'t Transaction<'c>,
    house_id: Option<String>,
    /// Content ids at the source → here.
    contents: HashMap<i64, i64>,
    /// The content being gathered, slice by slice.
    gathering: Option<(i64, Vec<u8>)>,
    counts: Counts,
}

impl<'t, 'c> Importer<'t, 'c> {
    pub(super) fn new(tx: &'t Transaction<'c>) -> Self {
        Importer {
            tx,
            house_id: None,
            contents: HashMap::new(),
            gathering: None,
            counts: Counts::default(),
        }
    }

    pub(super) fn take(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
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
    pub(super) fn finish(self) -> Result<(String, Counts), StoreError> {
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
                Value::Integer(
                    last.map_or(i64::from(crate::store::environments::FIRST_UID), |u| u + 1),
                )
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

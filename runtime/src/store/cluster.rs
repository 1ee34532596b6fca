//! What a node of a cluster keeps of the others, and its outbox to them.
//!
//! ractor_cluster moves messages between live nodes and forgets them when
//! a connection drops; the durable mailbox's guarantee across nodes lives
//! here instead:
//!
//! - `cluster_outbox`: a durable message for an actor on another node. It
//!   is moved here from the local mailbox in one transaction
//!   ([`forward`]), and stays until that node acknowledges it ([`acked`]);
//!   the node's gateway to the peer sends it again until then.
//! - `cluster_received`: the ids of the messages this node committed from
//!   others, so a retry of one already committed is acknowledged and not
//!   applied twice ([`receive`]), even after its mailbox row was purged.
//! - `cluster_routes`: where an address that is not on this node lives
//!   (the sender of a message received from a peer: where its reply goes).
//! - `cluster_bots`: which node hosts which bot, as that node announced it,
//!   so a message to a bot on a node that is down is still committed.
//! - `cluster_peers`: the other nodes and where they listen, to connect
//!   again after a restart.
//! - `cluster_houses`: which node hosts which house, as that node
//!   announced it, so a request for a house on a node that is down is
//!   answered with that node's name.
//! - `cluster_kinds`: which node registered which actor kind, as that
//!   node announced it, so a durable send to an actor of a kind registered
//!   on a node that is down is still committed to the outbox for it.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::error::StoreError;
use super::{mailbox, now};
use crate::id::{BotId, HouseId, MsgId};
use crate::protocol::Envelope;

/// The migration that makes the tables.
pub const CLUSTER: &str = r#"
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
);
"#;

/// The migration that makes `cluster_houses`.
pub const CLUSTER_HOUSES: &str = r#"
CREATE TABLE cluster_houses (
    node       TEXT NOT NULL,
    name       TEXT NOT NULL,
    house_id   TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (node, name)
);
ALTER TABLE cluster_peers ADD COLUMN http TEXT;
"#;

/// The migration that makes `cluster_kinds`.
pub const CLUSTER_KINDS: &str = r#"
CREATE TABLE cluster_kinds (
    node       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (node, kind)
) WITHOUT ROWID;
"#;

/// A house another node hosts, as it announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteHouse {
    /// Its name.
    pub name: String,
    /// Its id.
    pub id: HouseId,
    /// The node that hosts it.
    pub node: String,
}

/// A bot another node hosts, as it announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteBot {
    /// Its name.
    pub name: String,
    /// Its id.
    pub id: BotId,
    /// The node that hosts it.
    pub node: String,
    /// What it is for.
    pub description: String,
}

fn codec(e: impl std::fmt::Display) -> StoreError {
    StoreError::Codec {
        what: "envelope",
        detail: e.to_string(),
    }
}

/// Moves `envelope`, committed in the local mailbox, to the outbox for
/// `peer`, in the caller's transaction: consumed here, to be sent there.
/// False if it was consumed already (moved or applied before).
pub fn forward(tx: &Transaction<'_>, envelope: &Envelope, peer: &str) -> Result<bool, StoreError> {
    if !mailbox::consume(tx, envelope.id)? {
        return Ok(false);
    }
    let json = serde_json::to_string(envelope).map_err(codec)?;
    tx.prepare_cached(
        "INSERT INTO cluster_outbox (id, peer, envelope, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (id) DO NOTHING",
    )?
    .execute(params![envelope.id.to_string(), peer, json, now()])?;
    Ok(true)
}

/// Up to `limit` messages waiting for `peer`'s acknowledgement, oldest first.
pub fn outbox(conn: &Connection, peer: &str, limit: usize) -> Result<Vec<Envelope>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(
        "SELECT envelope FROM cluster_outbox WHERE peer = ?1 ORDER BY rowid LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![peer, limit], |r| r.get::<_, String>(0))?;
    rows.map(|r| serde_json::from_str(&r?).map_err(codec))
        .collect()
}

/// The peers that messages wait for, with how many each.
pub fn outbox_peers(conn: &Connection) -> Result<Vec<(String, u64)>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT peer, COUNT(*) FROM cluster_outbox GROUP BY peer ORDER BY peer")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    rows.map(|r| {
        let (peer, n) = r?;
        Ok((peer, u64::try_from(n).unwrap_or(0)))
    })
    .collect()
}

/// Those of `ids` that still wait in the outbox for their peer's
/// acknowledgement.
pub fn unacked(conn: &Connection, ids: &[MsgId]) -> Result<Vec<MsgId>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM cluster_outbox WHERE id = ?1")?;
    let mut left = Vec::new();
    for &id in ids {
        if stmt.exists([id.to_string()])? {
            left.push(id);
        }
    }
    Ok(left)
}

/// Drops the acknowledged messages `ids` from the outbox.
pub fn acked(tx: &Transaction<'_>, ids: &[MsgId]) -> Result<(), StoreError> {
    let mut stmt = tx.prepare_cached("DELETE FROM cluster_outbox WHERE id = ?1")?;
    for id in ids {
        stmt.execute([id.to_string()])?;
    }
    Ok(())
}

/// Commits `envelope`, received from `from_node`, into the local mailbox,
/// and notes where its sender lives (its reply goes back there), in the
/// caller's transaction. False if it had been received before: the
/// receiver acknowledges it again and applies nothing.
pub fn receive(
    tx: &Transaction<'_>,
    envelope: &Envelope,
    from_node: &str,
) -> Result<bool, StoreError> {
    let first = tx
        .prepare_cached(
            "INSERT INTO cluster_received (id, from_node, received_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![envelope.id.to_string(), from_node, now()])?
        == 1;
    if !first {
        return Ok(false);
    }
    set_route(tx, &envelope.from.to_string(), from_node)?;
    mailbox::enqueue(tx, envelope)?;
    Ok(true)
}

/// Records that address `addr` lives on `node`.
pub fn set_route(tx: &Transaction<'_>, addr: &str, node: &str) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO cluster_routes (addr, node, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (addr) DO UPDATE SET node = excluded.node, updated_at = excluded.updated_at",
    )?
    .execute(params![addr, node, now()])?;
    Ok(())
}

/// Every address known to live on another node, with its node.
pub fn routes(conn: &Connection) -> Result<Vec<(String, String)>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT addr, node FROM cluster_routes")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Replaces the actor kinds `node` registered with `kinds` (its latest
/// announcement).
pub fn set_kinds(tx: &Transaction<'_>, node: &str, kinds: &[String]) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM cluster_kinds WHERE node = ?1")?
        .execute([node])?;
    let mut stmt = tx.prepare_cached(
        "INSERT INTO cluster_kinds (node, kind, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (node, kind) DO NOTHING",
    )?;
    let at = now();
    for kind in kinds {
        stmt.execute(params![node, kind, at])?;
    }
    Ok(())
}

/// The actor kinds other nodes registered, as (node, kind).
pub fn kinds(conn: &Connection) -> Result<Vec<(String, String)>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT node, kind FROM cluster_kinds ORDER BY node, kind")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Replaces what `node` hosts with `bots` (its latest announcement).
pub fn set_bots(tx: &Transaction<'_>, node: &str, bots: &[RemoteBot]) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM cluster_bots WHERE node = ?1")?
        .execute([node])?;
    let mut stmt = tx.prepare_cached(
        "INSERT INTO cluster_bots (name, bot_id, node, description, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (name) DO UPDATE SET bot_id = excluded.bot_id, node = excluded.node,
             description = excluded.description, updated_at = excluded.updated_at",
    )?;
    for bot in bots {
        stmt.execute(params![
            bot.name,
            bot.id.to_string(),
            node,
            bot.description,
            now()
        ])?;
    }
    Ok(())
}

/// Every bot another node announced.
pub fn bots(conn: &Connection) -> Result<Vec<RemoteBot>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT name, bot_id, node, description FROM cluster_bots ORDER BY name")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, id, node, description) = row?;
        let Ok(id) = id.parse() else { continue };
        out.push(RemoteBot {
            name,
            id,
            node,
            description,
        });
    }
    Ok(out)
}

/// Records where `node` listens (its node server, and its HTTP API when
/// it said).
pub fn set_peer(
    tx: &Transaction<'_>,
    node: &str,
    listen: &str,
    http: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO cluster_peers (node, listen, http, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (node) DO UPDATE SET listen = excluded.listen, http = excluded.http,
             updated_at = excluded.updated_at",
    )?
    .execute(params![node, listen, http, now()])?;
    Ok(())
}

/// Every other node met: its name, where it listens, its HTTP API.
pub fn peers(conn: &Connection) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT node, listen, http FROM cluster_peers ORDER BY node")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records where `node`'s HTTP API listens (it said so later than hello).
pub fn set_peer_http(
    tx: &Transaction<'_>,
    node: &str,
    http: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE cluster_peers SET http = ?2, updated_at = ?3 WHERE node = ?1")?
        .execute(params![node, http, now()])?;
    Ok(())
}

/// Replaces what `node` hosts with `houses` (its latest announcement).
pub fn set_houses(
    tx: &Transaction<'_>,
    node: &str,
    houses: &[RemoteHouse],
) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM cluster_houses WHERE node = ?1")?
        .execute([node])?;
    for house in houses {
        // One id is one house: another node's row of it is stale (it moved).
        tx.prepare_cached("DELETE FROM cluster_houses WHERE house_id = ?1 AND node <> ?2")?
            .execute(params![house.id.to_string(), node])?;
        add_house(tx, house)?;
    }
    Ok(())
}

/// Forgets that another node hosts the house `id` (it is this node's now).
pub fn drop_house(tx: &Transaction<'_>, id: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM cluster_houses WHERE house_id = ?1")?
        .execute([id])?;
    Ok(())
}

/// Notes one house another node hosts (it said it made it).
pub fn add_house(tx: &Transaction<'_>, house: &RemoteHouse) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO cluster_houses (node, name, house_id, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (node, name) DO UPDATE SET house_id = excluded.house_id,
             updated_at = excluded.updated_at",
    )?
    .execute(params![house.node, house.name, house.id.to_string(), now()])?;
    Ok(())
}

/// Every house another node announced, by name then node.
pub fn houses(conn: &Connection) -> Result<Vec<RemoteHouse>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT name, house_id, node FROM cluster_houses ORDER BY name, node")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, id, node) = row?;
        let Ok(id) = id.parse() else { continue };
        out.push(RemoteHouse { name, id, node });
    }
    Ok(out)
}

/// Whether message `id` was received from another node.
pub fn was_received(conn: &Connection, id: MsgId) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM cluster_received WHERE id = ?1")?
        .query_row([id.to_string()], |_| Ok(()))
        .optional()?
        .is_some())
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

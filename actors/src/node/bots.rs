//! The bots table: definitions persisted so bots are reactivated on demand.

use troupe_runtime::id::BotId;
use troupe_runtime::rusqlite::{params, Connection, OptionalExtension, Transaction};
use troupe_runtime::store::{self, StoreError};

use crate::bot::{BotRecord, BotSpec};

fn decode(id: String, spec: String) -> Result<BotRecord, StoreError> {
    let id = id.parse::<BotId>().map_err(|e| StoreError::Codec {
        what: "bot id",
        detail: e.to_string(),
    })?;
    let spec = serde_json::from_str::<BotSpec>(&spec).map_err(|e| StoreError::Codec {
        what: "bot",
        detail: e.to_string(),
    })?;
    Ok(BotRecord { id, spec })
}

/// The bot called `name`.
pub fn by_name(conn: &Connection, name: &str) -> Result<Option<BotRecord>, StoreError> {
    let row: Option<(String, String)> = conn
        .prepare_cached("SELECT id, spec FROM bots WHERE name = ?1 AND archived_at IS NULL")?
        .query_row(params![name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(|(id, spec)| decode(id, spec)).transpose()
}

/// The bot with id `id`.
pub fn by_id(conn: &Connection, id: BotId) -> Result<Option<BotRecord>, StoreError> {
    let row: Option<(String, String)> = conn
        .prepare_cached("SELECT id, spec FROM bots WHERE id = ?1")?
        .query_row(params![id.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(|(id, spec)| decode(id, spec)).transpose()
}

/// Every live bot, by name.
pub fn list(conn: &Connection) -> Result<Vec<BotRecord>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT id, spec FROM bots WHERE archived_at IS NULL ORDER BY name")?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(id, spec)| decode(id, spec))
        .collect()
}

/// Inserts a bot; `false` when one with its name exists.
pub fn insert(tx: &Transaction<'_>, record: &BotRecord) -> Result<bool, StoreError> {
    let spec = serde_json::to_string(&record.spec).map_err(|e| StoreError::Codec {
        what: "bot",
        detail: e.to_string(),
    })?;
    let n = tx
        .prepare_cached(
            "INSERT INTO bots (id, name, title, description, mission, model, spec, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (name) DO NOTHING",
        )?
        .execute(params![
            record.id.to_string(),
            record.spec.name,
            record.spec.title,
            record.spec.description,
            record.spec.mission,
            record.spec.model,
            spec,
            store::now()
        ])?;
    Ok(n == 1)
}

/// Rewrites a bot's definition (its name stays).
pub fn update(tx: &Transaction<'_>, record: &BotRecord) -> Result<bool, StoreError> {
    let spec = serde_json::to_string(&record.spec).map_err(|e| StoreError::Codec {
        what: "bot",
        detail: e.to_string(),
    })?;
    let n = tx
        .prepare_cached(
            "UPDATE bots SET title = ?2, description = ?3, mission = ?4, model = ?5, spec = ?6 WHERE id = ?1",
        )?
        .execute(params![
            record.id.to_string(),
            record.spec.title,
            record.spec.description,
            record.spec.mission,
            record.spec.model,
            spec,
        ])?;
    Ok(n == 1)
}

/// Makes `bot` a member of the home's own house (listening to mentions),
/// if it is not one yet.
pub fn join_home(tx: &Transaction<'_>, bot: &BotRecord) -> Result<(), StoreError> {
    use troupe_runtime::house::DEFAULT_HOUSE;
    use troupe_runtime::protocol::house::{ListenMode, Member, MemberKind};
    use troupe_runtime::store::house as table;
    let Some(home) = table::house_by_name(tx, DEFAULT_HOUSE)? else {
        return Ok(());
    };
    if table::member(tx, home.id, &bot.spec.name)?.is_some() {
        return Ok(());
    }
    table::put_member(
        tx,
        home.id,
        &Member {
            handle: bot.spec.name.clone(),
            kind: MemberKind::Bot,
            display_name: bot.spec.name.clone(),
            listen: Some(ListenMode::Mentions),
            bot: Some(bot.id),
        },
    )
}

//! The node's bots: the main agent made on first start, bots created and
//! updated, each definition persisted in the bots table (so bots are
//! reactivated on demand) and kept in memory by name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use troupe_runtime::hash::{FastDashMap, FastState};
use troupe_runtime::id::BotId;
use troupe_runtime::protocol::ActorKind;
use troupe_runtime::rusqlite::{params, Connection, OptionalExtension, Transaction};
use troupe_runtime::store::{self, StoreError};

use troupe_runtime::home::MAIN_AGENT;

use super::{Node, NodeError};
use crate::bot::{BotRecord, BotSpec};

/// The node's bots in memory, by name, with how many there are besides the
/// main agent kept up at each change. Every new conversation asks whether
/// there are (to offer the tools that reach them, to list them in its
/// prompt); walking every shard of the map to learn it cost more than the
/// rest of that check. Every post to a house thread asks for every bot's
/// kind by lower-cased name ([`Bots::kinds`]): that map is built at the
/// first ask after a change and shared until the next.
#[derive(Default)]
pub(crate) struct Bots {
    map: FastDashMap<String, BotRecord>,
    others: AtomicUsize,
    /// Moves after each change of `map`.
    changes: AtomicU64,
    /// [`Bots::kinds`] as of a count of `changes`.
    kinds: parking_lot::Mutex<Option<(u64, Kinds)>>,
}

/// Every bot's id and actor kind, by lower-cased name.
pub(crate) type Kinds = Arc<HashMap<String, (BotId, ActorKind)>>;

impl Bots {
    /// Puts `bot` under `name`, replacing the bot held there. The count
    /// moves while the name's entry is held, so an insert and a remove of
    /// one name never count out of turn.
    pub(crate) fn insert(&self, name: String, bot: BotRecord) {
        match self.map.entry(name) {
            Entry::Occupied(mut held) => {
                held.insert(bot);
            }
            Entry::Vacant(free) => {
                if free.key() != MAIN_AGENT {
                    self.others.fetch_add(1, Ordering::Relaxed);
                }
                free.insert(bot);
            }
        }
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// Forgets the bot called `name`.
    pub(crate) fn remove(&self, name: &str) {
        self.map.remove_if(name, |name, _| {
            if name != MAIN_AGENT {
                self.others.fetch_sub(1, Ordering::Relaxed);
            }
            true
        });
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// Every bot's id and actor kind, by lower-cased name: built again
    /// only after a change. A change made while it is built moves the
    /// count past the one it is kept under, so the next ask builds again.
    pub(crate) fn kinds(&self) -> Kinds {
        let seen = self.changes.load(Ordering::Acquire);
        if let Some((at, kinds)) = &*self.kinds.lock() {
            if *at == seen {
                return Arc::clone(kinds);
            }
        }
        let kinds: Kinds = Arc::new(
            self.map
                .iter()
                .map(|b| (b.spec.name.to_lowercase(), (b.id, b.spec.kind())))
                .collect(),
        );
        *self.kinds.lock() = Some((seen, Arc::clone(&kinds)));
        kinds
    }

    /// Whether there is a bot besides the main agent.
    pub(crate) fn any_other(&self) -> bool {
        self.others.load(Ordering::Relaxed) > 0
    }

    /// The bot called `name`.
    pub(crate) fn get(
        &self,
        name: &str,
    ) -> Option<dashmap::mapref::one::Ref<'_, String, BotRecord>> {
        self.map.get(name)
    }

    /// Whether there is a bot called `name`.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// Every bot, in no order.
    pub(crate) fn iter(&self) -> dashmap::iter::Iter<'_, String, BotRecord, FastState> {
        self.map.iter()
    }
}

fn decode(id: String, spec: String) -> Result<BotRecord, StoreError> {
    let id = id.parse::<BotId>().map_err(|e| StoreError::Codec {
        what: "bot id",
        detail: e.to_string(),
    })?;
    let spec = serde_json::from_str::<BotSpec>(&spec).map_err(|e| StoreError::Codec {
        what: "bot",
        detail: e.to_string(),
    })?;
    Ok(BotRecord {
        id,
        spec: Arc::new(spec),
    })
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

impl Node {
    /// Loads the bots, making the main agent the first time.
    pub(crate) async fn load_bots(&self) -> Result<(), NodeError> {
        for bot in self.ctx.store.read(list).await? {
            self.ctx.bots.insert(bot.spec.name.clone(), bot);
        }
        self.ensure_main().await
    }

    async fn ensure_main(&self) -> Result<(), NodeError> {
        if self.ctx.bots.contains_key(MAIN_AGENT) {
            return Ok(());
        }
        let record = BotRecord {
            id: BotId::new(),
            spec: Arc::default(),
        };
        let r = record.clone();
        self.ctx
            .store
            .write(move |tx| {
                insert(tx, &r)?;
                join_home(tx, &r)
            })
            .await?;
        let stored = self
            .ctx
            .store
            .read(|c| by_name(c, MAIN_AGENT))
            .await?
            .unwrap_or(record);
        self.ctx.bots.insert(MAIN_AGENT.into(), stored);
        Ok(())
    }

    /// Every bot, the main agent first.
    pub fn bots(&self) -> Vec<BotRecord> {
        let mut all: Vec<BotRecord> = self.ctx.bots.iter().map(|b| b.value().clone()).collect();
        all.sort_by_key(|b| (b.spec.name != MAIN_AGENT, b.spec.name.clone()));
        all
    }

    /// Every bot's id and actor kind, by lower-cased name: what a house
    /// thread needs to offer turns, without copying every bot's record.
    pub(crate) fn bot_kinds(&self) -> Kinds {
        self.ctx.bots.kinds()
    }

    /// The bot called `name`.
    pub fn bot(&self, name: &str) -> Result<BotRecord, NodeError> {
        self.ctx
            .bots
            .get(name)
            .map(|b| b.value().clone())
            .ok_or_else(|| NodeError::NoSuchBot(name.to_string()))
    }

    /// Checks that `bot`'s model resolves (its spec is known, its key set,
    /// its script readable and well-formed), so a command or a request can
    /// refuse at once, with the reason, before anything is stored. A
    /// conversation whose model does not resolve still runs: each of its
    /// turns fails with that reason.
    ///
    /// # Errors
    ///
    /// [`NodeError::NoSuchBot`], or [`NodeError::Model`] with why the
    /// model cannot be used.
    pub fn check_model(&self, bot: &str) -> Result<(), NodeError> {
        let record = self.bot(bot)?;
        self.ctx
            .resolve_model_for(&record.spec.name, &record.spec.model)?;
        Ok(())
    }

    /// Forgets bot `name` in memory (its row was archived).
    pub(crate) fn forget_bot(&self, name: &str) {
        self.ctx.bots.remove(name);
    }

    /// Creates a bot and persists it; it joins the home's own house.
    pub async fn create_bot(&self, spec: BotSpec) -> Result<BotRecord, NodeError> {
        self.create_bot_in(spec, None).await
    }

    /// Creates a bot and persists it, a member of `house` (listening as
    /// given) — in the same transaction — or, when `None`, of the home's
    /// own house.
    pub async fn create_bot_in(
        &self,
        spec: BotSpec,
        house: Option<(
            troupe_runtime::id::HouseId,
            troupe_runtime::protocol::house::ListenMode,
        )>,
    ) -> Result<BotRecord, NodeError> {
        spec.validate()?;
        let record = BotRecord {
            id: BotId::new(),
            spec: Arc::new(spec),
        };
        let r = record.clone();
        let inserted = self
            .ctx
            .store
            .write(move |tx| {
                let inserted = insert(tx, &r)?;
                match (inserted, house) {
                    (false, _) => {}
                    (true, None) => join_home(tx, &r)?,
                    (true, Some((house, listen))) => troupe_runtime::store::house::put_member(
                        tx,
                        house,
                        &troupe_runtime::protocol::house::Member {
                            handle: r.spec.name.clone(),
                            kind: troupe_runtime::protocol::house::MemberKind::Bot,
                            display_name: r.spec.name.clone(),
                            listen: Some(listen),
                            bot: Some(r.id),
                        },
                    )?,
                }
                Ok(inserted)
            })
            .await?;
        if !inserted {
            return Err(NodeError::BotExists(record.spec.name.clone()));
        }
        self.ctx
            .bots
            .insert(record.spec.name.clone(), record.clone());
        Ok(record)
    }

    /// Rewrites bot `name`'s own record as `update_self` asks: its display
    /// name (title), description and instructions. Refused unless its
    /// definition allows self-update.
    pub async fn update_bot(
        &self,
        name: &str,
        update: troupe_runtime::house::SelfUpdate,
    ) -> Result<BotSpec, NodeError> {
        let mut record = self.bot(name)?;
        if !record.spec.self_update {
            return Err(NodeError::Refused(format!(
                "self-update is not enabled for `{name}` (its definition's `self_update`)"
            )));
        }
        let spec = Arc::make_mut(&mut record.spec);
        if let Some(title) = update.name.filter(|t| !t.trim().is_empty()) {
            spec.title = title.trim().to_string();
        }
        if let Some(description) = update.description.filter(|d| !d.trim().is_empty()) {
            spec.description = description.trim().to_string();
        }
        if let Some(prompt) = update.system_prompt {
            spec.mission = prompt;
        }
        spec.validate()?;
        let r = record.clone();
        self.ctx.store.write(move |tx| self::update(tx, &r)).await?;
        self.ctx
            .bots
            .insert(record.spec.name.clone(), record.clone());
        Ok(BotSpec::clone(&record.spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> BotRecord {
        BotRecord {
            id: BotId::new(),
            spec: Arc::new(BotSpec::new(name, name, "A bot.")),
        }
    }

    /// The count of bots besides the main agent follows every insert and
    /// remove: a replaced bot is not counted twice, a missing one not
    /// taken away.
    #[test]
    fn bots_besides_the_main_agent_are_counted_as_they_come_and_go() {
        let bots = Bots::default();
        bots.insert(MAIN_AGENT.into(), record(MAIN_AGENT));
        assert!(!bots.any_other());
        bots.insert("ada".into(), record("ada"));
        bots.insert("ada".into(), record("ada"));
        assert!(bots.any_other());
        bots.remove("bob");
        bots.remove(MAIN_AGENT);
        assert!(bots.any_other());
        bots.remove("ada");
        assert!(!bots.any_other());
        bots.remove("ada");
        bots.insert("bob".into(), record("bob"));
        assert!(bots.any_other());
        assert_eq!(bots.iter().count(), 1);
    }

    /// The kinds by lower-cased name are shared while no bot changes, and
    /// follow every insert, replacement and remove.
    #[test]
    fn the_kinds_by_name_are_kept_until_a_bot_changes() {
        let bots = Bots::default();
        let ada = record("Ada");
        bots.insert("Ada".into(), ada.clone());
        let first = bots.kinds();
        assert_eq!(first.get("ada").map(|k| k.0), Some(ada.id));
        assert!(
            Arc::ptr_eq(&first, &bots.kinds()),
            "built again with no change"
        );
        let again = record("Ada");
        bots.insert("Ada".into(), again.clone());
        let replaced = bots.kinds();
        assert_eq!(replaced.get("ada").map(|k| k.0), Some(again.id));
        bots.insert("bob".into(), record("bob"));
        assert_eq!(bots.kinds().len(), 2);
        bots.remove("Ada");
        let left = bots.kinds();
        assert_eq!(left.keys().collect::<Vec<_>>(), vec!["bob"]);
        assert_eq!(first.len(), 1, "a map handed out stays as it was");
    }
}

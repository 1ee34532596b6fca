//! Editing a bot's definition from outside it: the owner changing its
//! model, title, description or mission (`PATCH /api/bots/{bot}` in the
//! web page's owner views), or removing it (`troupe bots remove`,
//! `DELETE /api/bots/{bot}`). A bot rewriting its own record goes through
//! `update_self` and [`Node::update_bot`] instead, which its definition
//! must allow.
//!
//! The edit is committed, then the node's bots are read again from the
//! store, so the next conversation activated for the bot (a new one, or
//! one woken after passivation or a restart) runs with it; a conversation
//! already live keeps the definition it started with.
//!
//! A removed bot is archived, not erased: its conversations, usage and
//! posts stay in the history under its id, its row takes the name
//! `NAME~ID` so the name is free for a new bot, it leaves every house and
//! thread, and its routines are deleted so none fires again.

use serde::{Deserialize, Serialize};

use crate::bot::BotSpec;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::rusqlite::params;

use crate::node::{bots, Node, NodeError};

/// What an owner may change in a bot's definition; what is left out stays.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BotEdit {
    /// Its model spec (`openai:MODEL`, `anthropic:MODEL`, a name from
    /// `models.toml`, …); empty for the home's default.
    pub model: Option<String>,
    /// Its short title.
    pub title: Option<String>,
    /// Its one-line role.
    pub description: Option<String>,
    /// Its standing rules.
    pub mission: Option<String>,
}

impl Node {
    /// Applies `edit` to bot `name`'s definition and returns the new one.
    ///
    /// # Errors
    ///
    /// [`NodeError::NoSuchBot`]; [`NodeError::Bot`] when the result is not
    /// a valid definition; [`NodeError::Model`] when the new model cannot
    /// be used (an unknown provider, a key not set), with why — nothing is
    /// changed then.
    pub async fn edit_bot(&self, name: &str, edit: BotEdit) -> Result<BotSpec, NodeError> {
        let mut record = self.bot(name)?;
        let spec = std::sync::Arc::make_mut(&mut record.spec);
        if let Some(model) = edit.model {
            let model = model.trim().to_string();
            self.resolve_model_for(&spec.name, &model)?;
            spec.model = model;
        }
        if let Some(title) = edit.title {
            spec.title = title.trim().to_string();
        }
        if let Some(description) = edit.description {
            spec.description = description.trim().to_string();
        }
        if let Some(mission) = edit.mission {
            spec.mission = mission;
        }
        spec.validate()?;
        let r = record.clone();
        self.store().write(move |tx| bots::update(tx, &r)).await?;
        self.load_bots().await?;
        Ok(BotSpec::clone(&record.spec))
    }
}

/// What removing a bot took away besides its definition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotRemoval {
    /// The bot's name.
    pub name: String,
    /// The houses it left.
    pub houses: usize,
    /// Its routines, deleted.
    pub routines: usize,
}

impl Node {
    /// Removes bot `name`: archived under `NAME~ID` (its history stays),
    /// out of every house and thread, its routines deleted. The main agent
    /// cannot be removed.
    ///
    /// # Errors
    ///
    /// [`NodeError::NoSuchBot`]; [`NodeError::Refused`] for the main agent.
    pub async fn remove_bot(&self, name: &str) -> Result<BotRemoval, NodeError> {
        let record = self.bot(name)?;
        if record.spec.name == MAIN_AGENT {
            return Err(NodeError::Refused(format!(
                "`{MAIN_AGENT}` is the home's main agent and cannot be removed; \
                 `troupe bots edit {MAIN_AGENT}` changes it"
            )));
        }
        let (id, name) = (record.id.to_string(), record.spec.name.clone());
        let removal = self
            .store()
            .write(move |tx| {
                let houses = tx
                    .prepare_cached(
                        "SELECT house_id, handle FROM house_members WHERE bot_id = ?1 AND kind = 'bot'",
                    )?
                    .query_map(params![id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                for (house, handle) in &houses {
                    tx.prepare_cached(
                        "DELETE FROM thread_participants WHERE handle = ?2
                         AND thread_id IN (SELECT id FROM threads WHERE house_id = ?1)",
                    )?
                    .execute(params![house, handle])?;
                    tx.prepare_cached("DELETE FROM house_members WHERE house_id = ?1 AND handle = ?2")?
                        .execute(params![house, handle])?;
                }
                let routines = tx
                    .prepare_cached("DELETE FROM routines WHERE owner_bot = ?1")?
                    .execute(params![name])?;
                tx.prepare_cached(
                    "UPDATE bots SET archived_at = ?2, name = name || '~' || id WHERE id = ?1",
                )?
                .execute(params![id, troupe_runtime::store::now()])?;
                Ok(BotRemoval {
                    name: name.clone(),
                    houses: houses.len(),
                    routines,
                })
            })
            .await?;
        self.forget_bot(&removal.name);
        crate::routine::service::RoutineService::of(self).rearm();
        Ok(removal)
    }
}

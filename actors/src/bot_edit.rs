//! Editing a bot's definition from outside it: the owner changing its
//! model, title, description or mission (`PATCH /api/bots/{bot}` in the
//! web page's owner views). A bot rewriting its own record goes through
//! `update_self` and [`Node::update_bot`] instead, which its definition
//! must allow.
//!
//! The edit is committed, then the node's bots are read again from the
//! store, so the next conversation activated for the bot (a new one, or
//! one woken after passivation or a restart) runs with it; a conversation
//! already live keeps the definition it started with.

use serde::{Deserialize, Serialize};

use crate::bot::BotSpec;
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
        if let Some(model) = edit.model {
            let model = model.trim().to_string();
            self.context()
                .resolve_model_for(&record.spec.name, &model)?;
            record.spec.model = model;
        }
        if let Some(title) = edit.title {
            record.spec.title = title.trim().to_string();
        }
        if let Some(description) = edit.description {
            record.spec.description = description.trim().to_string();
        }
        if let Some(mission) = edit.mission {
            record.spec.mission = mission;
        }
        record.spec.validate()?;
        let r = record.clone();
        self.store().write(move |tx| bots::update(tx, &r)).await?;
        self.load_bots().await?;
        Ok(record.spec)
    }
}

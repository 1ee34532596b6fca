//! Checks a command makes before it runs anything: that the models of the
//! bots it will run can be used (their spec is known, their key set, their
//! script readable and well-formed, their `models.toml` entry whole).
//!
//! A model that does not resolve would otherwise be found at the first
//! model call of a turn; these checks let `run` and `chat` refuse at once,
//! with one line saying why and exit status 2
//! ([`super::exit::CONFIGURATION`]), and `serve` warn in one line as it
//! starts.

use troupe_actors::node::{Node, NodeError};
use troupe_runtime::id::ConversationId;
use troupe_runtime::store::conversations;

use super::exit::Misconfigured;

/// Checks the model of each bot of `bots`.
///
/// # Errors
///
/// [`Misconfigured`] naming each bot whose model cannot be used and why,
/// in one line; the node's error when a bot does not exist.
pub fn bots<'a>(node: &Node, bots: impl IntoIterator<Item = &'a str>) -> anyhow::Result<()> {
    check(node, bots, false)
}

fn check<'a>(
    node: &Node,
    bots: impl IntoIterator<Item = &'a str>,
    name_them: bool,
) -> anyhow::Result<()> {
    let mut checked = 0;
    let mut failed = Vec::new();
    for bot in bots {
        checked += 1;
        match node.check_model(bot) {
            Ok(()) => {}
            Err(NodeError::Model(e)) => failed.push((bot.to_owned(), e.to_string())),
            Err(other) => return Err(other.into()),
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    // One bot asked about: the reason alone; several: each named.
    let line = if checked == 1 && !name_them {
        failed.remove(0).1
    } else {
        failed
            .iter()
            .map(|(bot, why)| format!("bot `{bot}`: {why}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    Err(Misconfigured(line).into())
}

/// Checks the model of every bot of the node (`troupe serve`), naming
/// each bot whose model cannot be used.
///
/// # Errors
///
/// As [`bots`].
pub fn every_bot(node: &Node) -> anyhow::Result<()> {
    let names: Vec<String> = node
        .bots()
        .into_iter()
        .map(|b| b.spec.name.clone())
        .collect();
    check(node, names.iter().map(String::as_str), true)
}

/// The name of the bot conversation `id` is with.
///
/// # Errors
///
/// [`NodeError::NoSuchConversation`] when there is none.
pub async fn bot_of(node: &Node, id: ConversationId) -> anyhow::Result<String> {
    let row = node
        .store()
        .read(move |c| conversations::get_conversation(c, id))
        .await?
        .ok_or(NodeError::NoSuchConversation(id))?;
    Ok(node
        .bots()
        .into_iter()
        .find(|b| b.id == row.bot)
        .map_or_else(|| row.bot.to_string(), |b| b.spec.name.clone()))
}

//! What `/cost`, `/tools`, `/plan` and `/model` say about the chat's
//! conversation, read from the node and its store.

use troupe_actors::node::Node;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::Message;
use troupe_runtime::store::{conversations, usage};

use super::status::{dollars, grouped, tokens};

/// `/cost`: what the conversation used, all turns together.
pub async fn cost(node: &Node, conversation: ConversationId) -> anyhow::Result<String> {
    let total = node
        .store()
        .read(move |c| usage::for_conversation(c, conversation))
        .await?;
    Ok(format!(
        "this conversation: {} · {} · {} model call{}",
        tokens(&total.usage),
        dollars(total.cost_usd),
        grouped(total.calls),
        if total.calls == 1 { "" } else { "s" }
    ))
}

/// `/tools`: the built-in tools the bot's conversations are offered.
pub fn tools(node: &Node, bot: &str) -> anyhow::Result<String> {
    let record = node.bot(bot)?;
    let kind = Node::kind_of(&record.spec);
    let has_bots = node.bots().len() > 1;
    let set = crate::cli::cost::cost_of(node.home(), &record.spec, kind, has_bots, bot.into());
    let mut text = format!(
        "`{bot}` has {} tools in every model call (about {} tokens):\n",
        set.tools.len(),
        grouped(set.tokens)
    );
    let names: Vec<&str> = set.tools.iter().map(|(n, _)| n.as_str()).collect();
    text.push_str(&wrap(&names));
    if !set.deferred.is_empty() {
        text.push_str(&format!(
            "\nand {} more the model loads with tool_search when it needs them:\n",
            set.deferred.len()
        ));
        let names: Vec<&str> = set.deferred.iter().map(String::as_str).collect();
        text.push_str(&wrap(&names));
    }
    text.push_str("\n(MCP servers' tools, from mcp.json, are loaded with tool_search too: `troupe mcp list`.)");
    Ok(text)
}

/// `/plan`: the plan as the `plan` tool last returned it in this conversation.
pub async fn plan(node: &Node, conversation: ConversationId) -> anyhow::Result<String> {
    let messages = node
        .store()
        .read(move |c| conversations::load_messages(c, conversation))
        .await?;
    let last = messages.iter().rev().find_map(|m| match &m.message {
        Message::Tool { name, result, .. } if name == "plan" && !result.is_error() => {
            Some(result.text.clone())
        }
        _ => None,
    });
    Ok(last.unwrap_or_else(|| {
        "no plan yet: the model writes one (the `plan` tool) for work of several steps".into()
    }))
}

/// `/model`: the model the bot's turns use, and the names models.toml defines.
pub fn model(node: &Node, bot: &str) -> anyhow::Result<String> {
    let record = node.bot(bot)?;
    let default = &node.settings().default_model;
    let mut text = if record.spec.model.is_empty() {
        format!("`{bot}` uses the default model: {default}")
    } else {
        format!(
            "`{bot}` uses its own model: {} (the default, which /model changes, is {default})",
            record.spec.model
        )
    };
    let names: Vec<String> = models_of(node)?.models.keys().cloned().collect();
    if !names.is_empty() {
        text.push_str(&format!("\nmodels.toml defines: {}", names.join(", ")));
    }
    text.push_str("\n/model SPEC switches the default model for the next turns of this chat.");
    Ok(text)
}

/// Names on lines of about 80 columns, indented.
fn wrap(names: &[&str]) -> String {
    let mut text = String::from("  ");
    let mut width = 2;
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            if width + name.len() + 2 > 80 {
                text.push_str(",\n  ");
                width = 2;
            } else {
                text.push_str(", ");
                width += 2;
            }
        }
        text.push_str(name);
        width += name.len();
    }
    text
}

/// The home's models.toml, as the node read it at its start.
fn models_of(node: &Node) -> anyhow::Result<troupe_runtime::model::ModelsConfig> {
    Ok(troupe_runtime::model::ModelsConfig::load(
        &node.home().models_file(),
    )?)
}

/// Whether `spec` can be used (known, its key set, its script readable):
/// the error that says why not.
pub fn check_spec(node: &Node, spec: &str) -> anyhow::Result<()> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    troupe_runtime::model::resolve(spec, &models_of(node)?, &env, node.home().root())?;
    Ok(())
}

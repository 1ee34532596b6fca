//! The house's members from a house tool: who is in it
//! (`list_house_members`), a new bot in it (`create_agent`), and a bot's
//! own record (`update_self`).

use serde_json::json;
use troupe_runtime::house::{AgentDraft, SelfUpdate};
use troupe_runtime::protocol::house::{ListenMode, MemberKind};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::{err, HouseDesk};
use crate::bot::BotSpec;

impl HouseDesk {
    pub(super) async fn list_house_members(&self, ctx: &ToolContext) -> ToolResult {
        let (house, _) = match self.house(ctx).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let members = match house.members().await {
            Ok(m) => m,
            Err(e) => return err(e),
        };
        let mut text = format!(
            "House `{}` has {} members:",
            house.house.name,
            members.len()
        );
        for m in &members {
            match m.kind {
                MemberKind::Human => {
                    text.push_str(&format!("\n- {} (person: {})", m.handle, m.display_name))
                }
                MemberKind::Bot => text.push_str(&format!(
                    "\n- {} (bot, listens to {})",
                    m.handle,
                    m.listen.unwrap_or_default()
                )),
            }
        }
        let data = members
            .iter()
            .map(|m| json!({"handle": m.handle, "kind": m.kind, "display_name": m.display_name, "listen": m.listen}))
            .collect::<Vec<_>>();
        ToolResult::ok_with(text, json!({"members": data}))
    }

    pub(super) async fn add_house_bot(&self, ctx: &ToolContext, draft: AgentDraft) -> ToolResult {
        let (house, _) = match self.house(ctx).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let (node, _) = match self.scope(ctx) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let listen = match draft.trigger.as_deref().map(str::trim) {
            None | Some("") => ListenMode::Mentions,
            Some(t) => match ListenMode::parse(t) {
                Some(l) => l,
                None => {
                    return ToolResult::error(format!(
                        "`trigger` must be `all`, `mentions` or `off`, not `{t}`."
                    ))
                }
            },
        };
        if let Some(model) = draft.model.as_deref().filter(|m| !m.trim().is_empty()) {
            if let Err(e) = node.resolve_model(model) {
                return ToolResult::error(format!("the model `{model}` cannot be used: {e}"));
            }
        }
        let name = draft.name.trim().to_string();
        let description = draft
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| format!("A member of the house {}.", house.house.name));
        let spec = BotSpec {
            name: name.clone(),
            title: name.clone(),
            description: description.trim().to_string(),
            mission: draft.system_prompt.clone().unwrap_or_default(),
            model: draft.model.clone().unwrap_or_default(),
            ..BotSpec::default()
        };
        match node.create_bot_in(spec, Some((house.house.id, listen))).await {
            Ok(bot) => ToolResult::ok_with(
                format!(
                    "Created the bot `{}` and added it to house `{}` (listens to {listen}). Add it to a thread \
                     with add_thread_participant, or @mention it.",
                    bot.spec.name, house.house.name
                ),
                json!({"bot_id": bot.id.to_string(), "name": bot.spec.name, "listen": listen}),
            ),
            Err(e) => err(e),
        }
    }

    pub(super) async fn update_own_record(
        &self,
        ctx: &ToolContext,
        update: SelfUpdate,
    ) -> ToolResult {
        let Some(node) = self.node.upgrade() else {
            return ToolResult::error("the node is shutting down.");
        };
        match node.update_bot(&ctx.agent, update).await {
            Ok(spec) => ToolResult::ok_with(
                format!(
                    "Updated your record: name `{}`, description `{}`; your instructions apply from your next turn.",
                    spec.title, spec.description
                ),
                json!({"name": spec.title, "description": spec.description}),
            ),
            Err(e) => err(e),
        }
    }
}

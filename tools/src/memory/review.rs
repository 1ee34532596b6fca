//! `memory` in the background review: adds land, replaces and removes
//! become proposals the user decides (`troupe proposals`,
//! [`crate::proposals`]).
//!
//! A review's conversation is marked so in its services
//! (`Services::propose_removals`). Every operation of the call is checked against the file
//! as it is now first, so a wrong one changes nothing.

use serde_json::json;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::proposals::{self, NewProposal};
use troupe_runtime::tool::ToolContext;

use super::{apply, change, parse_entries, saved, MemoryAction, MemoryOperation, MemoryTarget};
use crate::file_lock;

/// The kind of a memory proposal.
pub const MEMORY: &str = "memory";

/// What a stored memory proposal holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct MemoryChange {
    /// The file.
    pub(crate) target: MemoryTarget,
    /// The change.
    #[serde(flatten)]
    pub(crate) operation: MemoryOperation,
}

/// `memory` in a review: adds land, replaces and removes become proposals.
/// Every operation is checked first, so a wrong one changes nothing.
pub(crate) async fn propose(
    ctx: &ToolContext,
    target: MemoryTarget,
    ops: Vec<MemoryOperation>,
) -> ToolResult {
    let Some(store) = ctx.services.store() else {
        return ToolResult::error("memory proposals need the store, which this runtime has not");
    };
    let path = target.path(&ctx.home, &ctx.agent);
    let entries = match file_lock::read_versioned(&path) {
        Ok((text, _)) => parse_entries(&text),
        Err(e) => return ToolResult::error(format!("memory file: {e}")),
    };
    // The whole call must make sense against the file as it is now.
    if let Err(e) = apply(target, &entries, &ops) {
        return ToolResult::error(e.to_string());
    }
    let (adds, proposed): (Vec<_>, Vec<_>) = ops
        .into_iter()
        .partition(|op| op.action == MemoryAction::Add);
    let mut text = String::new();
    let mut data = json!({ "target": target.name(), "proposals": [] });
    if !adds.is_empty() {
        match change(&ctx.home, &ctx.agent, target, adds).await {
            Ok((entries, notes)) => {
                let result = saved(target, &entries, &notes);
                text.push_str(&result.text);
                data["entries"] = json!(entries);
            }
            Err(e) => return ToolResult::error(e.to_string()),
        }
    }
    let mut numbers = Vec::new();
    for operation in proposed {
        let new = NewProposal {
            agent: ctx.agent.clone(),
            conversation: ctx.conversation.to_string(),
            kind: MEMORY.into(),
            summary: summary(target, &operation),
            change: json!(MemoryChange { target, operation }),
        };
        match store.write(move |tx| proposals::insert(tx, &new)).await {
            Ok(id) => numbers.push(id),
            Err(e) => return ToolResult::error(format!("could not keep the proposal: {e}")),
        }
    }
    if !numbers.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let list: Vec<String> = numbers.iter().map(|n| format!("#{n}")).collect();
        text.push_str(&format!(
            "Proposed {} (not applied): in a review, replacing or removing memory waits for the user's approval (`troupe proposals`).",
            list.join(", ")
        ));
        data["proposals"] = json!(numbers);
    }
    ToolResult::ok_with(text, data)
}

fn summary(target: MemoryTarget, op: &MemoryOperation) -> String {
    let old = op.old_text.as_deref().unwrap_or_default();
    match op.action {
        MemoryAction::Remove => format!(
            "{} memory: remove the entry containing {old:?}",
            target.name()
        ),
        _ => format!(
            "{} memory: replace the entry containing {old:?} with {:?}",
            target.name(),
            op.content.as_deref().unwrap_or_default()
        ),
    }
}

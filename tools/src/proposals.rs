//! Memory changes the background review proposes and the user decides.
//!
//! In a review (its conversation's services hold
//! [`ProposeRemovals`](crate::memory::ProposeRemovals)) `memory` still adds
//! entries, but a replace or a remove is checked against the file as it is
//! now and stored as a [proposal](troupe_runtime::store::proposals) instead
//! of applied: what an agent learned may grow the memory on its own, but
//! only the user takes something out of it. [`approve`] applies a proposal
//! (version-checked, like any memory write) and [`reject`] drops it.

use serde_json::json;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::proposals::{self, NewProposal, Proposal, ProposalStatus};
use troupe_runtime::store::{Store, StoreError};
use troupe_runtime::tool::ToolContext;

use crate::file_lock;
use crate::memory::{
    apply, change, parse_entries, saved, ChangeError, MemoryAction, MemoryOperation, MemoryTarget,
};

/// The kind of a memory proposal.
pub const MEMORY: &str = "memory";

/// What a stored memory proposal holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct MemoryChange {
    target: MemoryTarget,
    #[serde(flatten)]
    operation: MemoryOperation,
}

/// `memory` in a review: adds land, replaces and removes become proposals.
/// Every operation is checked first, so a wrong one changes nothing.
pub(crate) async fn propose_memory(
    ctx: &ToolContext,
    target: MemoryTarget,
    ops: Vec<MemoryOperation>,
) -> ToolResult {
    let Some(store) = ctx.services.get::<Store>() else {
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

/// Why a proposal could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum ProposalError {
    /// No proposal has that number.
    #[error("there is no proposal #{0}; `troupe proposals --all` lists them")]
    NotFound(i64),
    /// It was decided already.
    #[error("proposal #{0} was {1} already")]
    Decided(i64, &'static str),
    /// It is of a kind this version cannot apply.
    #[error("proposal #{0} is a `{1}` change, which this version cannot apply")]
    Unknown(i64, String),
    /// The memory moved on and the change no longer applies; it was marked failed.
    #[error("proposal #{0} no longer applies and was marked failed: {1}")]
    Stale(i64, String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

async fn pending(store: &Store, id: i64) -> Result<Proposal, ProposalError> {
    let proposal = store
        .read(move |c| proposals::get(c, id))
        .await?
        .ok_or(ProposalError::NotFound(id))?;
    if proposal.status != ProposalStatus::Pending {
        return Err(ProposalError::Decided(id, proposal.status.as_str()));
    }
    Ok(proposal)
}

/// Applies proposal `id` and marks it approved; a change that no longer
/// applies is marked failed and said so.
pub async fn approve(home: &Home, store: &Store, id: i64) -> Result<Proposal, ProposalError> {
    let proposal = pending(store, id).await?;
    if proposal.kind != MEMORY {
        return Err(ProposalError::Unknown(id, proposal.kind));
    }
    let decided = match serde_json::from_value::<MemoryChange>(proposal.change.clone()) {
        Err(e) => Err(format!("its stored change is unreadable: {e}")),
        Ok(c) => match change(home, &proposal.agent, c.target, vec![c.operation]).await {
            Ok(_) => Ok(()),
            Err(ChangeError::Refused(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        },
    };
    let (status, note) = match &decided {
        Ok(()) => (ProposalStatus::Approved, String::new()),
        Err(reason) => (ProposalStatus::Failed, reason.clone()),
    };
    let n = note.clone();
    store
        .write(move |tx| proposals::decide(tx, id, status, &n))
        .await?;
    match decided {
        Ok(()) => Ok(Proposal { status, ..proposal }),
        Err(reason) => Err(ProposalError::Stale(id, reason)),
    }
}

/// Marks proposal `id` rejected; nothing changes.
pub async fn reject(store: &Store, id: i64) -> Result<Proposal, ProposalError> {
    let proposal = pending(store, id).await?;
    store
        .write(move |tx| proposals::decide(tx, id, ProposalStatus::Rejected, ""))
        .await?;
    Ok(Proposal {
        status: ProposalStatus::Rejected,
        ..proposal
    })
}

#[cfg(test)]
#[path = "proposals_tests.rs"]
mod tests;

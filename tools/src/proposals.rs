//! Memory changes the background review proposed, decided by the user.
//!
//! In a review `memory` stores a replace or a remove as a
//! [proposal](troupe_runtime::store::proposals) instead of applying it
//! ([`crate::memory::review`]): what an agent learned may grow the memory
//! on its own, but only the user takes something out of it. [`approve`]
//! applies a proposal (version-checked, like any memory write) and
//! [`reject`] drops it.

use troupe_runtime::home::Home;
use troupe_runtime::store::proposals::{self, Proposal, ProposalStatus};
use troupe_runtime::store::{Store, StoreError};

use crate::memory::review::{MemoryChange, MEMORY};
use crate::memory::{change, ChangeError};

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

//! `troupe proposals`: the memory changes the background review proposed,
//! to approve or reject.
//!
//! Listing reads the home read-only ([`super::view`]). Approving or
//! rejecting writes, so it takes the home's lock and opens the store for
//! writing, but starts no node: deciding a proposal resumes nothing and
//! calls no model.

use std::path::PathBuf;
use std::process::ExitCode;

use troupe_runtime::store::proposals::{self as stored, Proposal, ProposalStatus};
use troupe_runtime::store::Store;

use super::view::View;

/// What `troupe proposals` does.
#[derive(Debug, clap::Subcommand)]
pub enum ProposalsAction {
    /// Apply a proposal.
    Approve {
        /// Its number.
        id: i64,
    },
    /// Drop a proposal; nothing changes.
    Reject {
        /// Its number.
        id: i64,
    },
}

/// Arguments of `troupe proposals`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  troupe proposals               the pending ones
  troupe proposals --all --json  every proposal, one JSON object per line
  troupe proposals approve 3     apply proposal #3
  troupe proposals reject 3      drop it")]
pub struct ProposalsArgs {
    /// List decided proposals too.
    #[arg(long)]
    pub all: bool,
    /// List them as JSON, one object per line (with the change itself).
    #[arg(long)]
    pub json: bool,
    /// Approve or reject one; without it, list them.
    #[command(subcommand)]
    pub action: Option<ProposalsAction>,
}

fn line(p: &Proposal) -> String {
    let mut out = format!(
        "#{:<4} {:<9} {:<12} {}",
        p.id,
        p.status.as_str(),
        p.agent,
        p.summary
    );
    if !p.note.is_empty() {
        out.push_str(&format!("\n      {}", p.note));
    }
    out
}

/// Runs `troupe proposals`.
pub async fn proposals(
    home: Option<PathBuf>,
    overrides: &[(String, String)],
    args: ProposalsArgs,
) -> anyhow::Result<ExitCode> {
    if args.json && args.action.is_some() {
        anyhow::bail!("--json lists the proposals: leave out approve/reject, or --json");
    }
    let Some(action) = args.action else {
        let view = View::open(home, overrides).await?;
        let pending_only = !args.all;
        let list = view.read(move |c| stored::list(c, pending_only)).await?;
        if args.json {
            for p in &list {
                println!("{}", serde_json::to_string(p)?);
            }
            return Ok(ExitCode::SUCCESS);
        }
        if list.is_empty() {
            println!(
                "no {}proposals; the background review makes them when it would replace or remove memory",
                if args.all { "" } else { "pending " }
            );
        }
        for p in &list {
            println!("{}", line(p));
        }
        if list.iter().any(|p| p.status == ProposalStatus::Pending) {
            println!(
                "\n`troupe proposals approve N` applies one, `troupe proposals reject N` drops it."
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let lock = super::owner::lock(home, true).await?;
    let home = lock.home().clone();
    let path = home.database();
    let decided = async {
        let store = tokio::task::spawn_blocking(move || Store::open(&path)).await??;
        let outcome = match action {
            ProposalsAction::Approve { id } => troupe_tools::proposals::approve(&home, &store, id)
                .await
                .map(|p| format!("approved and applied: {}", line(&p))),
            ProposalsAction::Reject { id } => troupe_tools::proposals::reject(&store, id)
                .await
                .map(|p| format!("rejected: {}", line(&p))),
        };
        anyhow::Ok(outcome?)
    }
    .await;
    super::owner::release(lock);
    println!("{}", decided?);
    Ok(ExitCode::SUCCESS)
}

//! `troupe proposals`: the memory changes the background review proposed,
//! to approve or reject.

use std::process::ExitCode;

use troupe_runtime::store::proposals::{Proposal, ProposalStatus};

use super::Builder;

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
pub struct ProposalsArgs {
    /// List decided proposals too.
    #[arg(long)]
    pub all: bool,
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
pub async fn proposals(builder: Builder, args: ProposalsArgs) -> anyhow::Result<ExitCode> {
    let runtime = builder.build().await?;
    let outcome = match args.action {
        None => {
            let list = runtime.proposals(!args.all).await?;
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
                println!("\n`troupe proposals approve N` applies one, `troupe proposals reject N` drops it.");
            }
            Ok(())
        }
        Some(ProposalsAction::Approve { id }) => runtime
            .approve_proposal(id)
            .await
            .map(|p| println!("approved and applied: {}", line(&p))),
        Some(ProposalsAction::Reject { id }) => runtime
            .reject_proposal(id)
            .await
            .map(|p| println!("rejected: {}", line(&p))),
    };
    runtime.shutdown().await;
    outcome?;
    Ok(ExitCode::SUCCESS)
}

//! `troupe ps`: the actor tree of this home.
//!
//! Without a server to ask (the server issue adds one), it shows the tree
//! a node of this home starts with — its root supervisor and children —
//! and, at rest, what waits for a long-running node: turns a crash left
//! open and durable messages not yet delivered. It never resumes them.

use std::process::ExitCode;

use troupe_actors::conversation::journal;
use troupe_runtime::store::mailbox;

use super::Builder;

/// Runs `troupe ps`.
pub async fn ps(builder: Builder, json: bool) -> anyhow::Result<ExitCode> {
    let runtime = builder.recover(false).build().await?;
    let tree = runtime.tree().await;
    let store = runtime.node().store().clone();
    let open = journal::open_turns(&store).await?;
    let pending = store.read(mailbox::pending_all).await?.len();
    if json {
        for actor in &tree {
            println!("{}", serde_json::to_string(actor)?);
        }
    } else {
        println!(
            "{:<14} {:<40} {:<16} {:<10} {:>8}",
            "kind", "id", "parent", "state", "restarts"
        );
        for actor in &tree {
            println!(
                "{:<14} {:<40} {:<16} {:<10} {:>8}",
                actor.kind,
                actor.id,
                actor.parent.as_deref().unwrap_or("-"),
                actor.state,
                actor.restarts
            );
        }
        if !open.is_empty() || pending > 0 {
            println!(
                "\nat rest: {} turn(s) left open by a crash, {pending} message(s) undelivered; \
                 `troupe serve` or `troupe chat` resumes them",
                open.len()
            );
        }
    }
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

//! `troupe ps`: the actor tree of this home.
//!
//! Beside a running `troupe serve`, it asks the server for its live tree
//! (`GET /api/tree`). Otherwise it shows the tree a node of this home
//! starts with — its root supervisor and children —
//! and, at rest, what waits for a long-running node: turns a crash left
//! open and durable messages not yet delivered. It never resumes them.
//! While another process owns the home, it names that process and reads
//! what waits from the store, read-only.

use std::process::ExitCode;

use troupe_actors::conversation::journal;
use troupe_actors::node::ActorInfo;
use troupe_runtime::home::LockError;
use troupe_runtime::store::mailbox;

use super::view::View;
use super::Builder;
use crate::api::RuntimeError;

/// `troupe ps --cluster`: the members, from the running server.
async fn members(builder: Builder, json: bool) -> anyhow::Result<ExitCode> {
    let Some(remote) = super::remote::Remote::find(builder.home_dir()) else {
        anyhow::bail!(
            "no `troupe serve` runs on this home: the cluster's members are known to a running \
             node (start it with `troupe serve --cluster NAME …`, docs/cluster.md)"
        );
    };
    let answer = remote.get("/tree").await?;
    let cluster = answer
        .get("cluster")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    if json {
        println!("{}", serde_json::to_string_pretty(&cluster)?);
        return Ok(ExitCode::SUCCESS);
    }
    if cluster.is_null() {
        println!("the server at {} is not a node of a cluster", remote.url());
        return Ok(ExitCode::SUCCESS);
    }
    println!("cluster `{}`:", cluster["cluster"].as_str().unwrap_or(""));
    for m in cluster["members"].as_array().into_iter().flatten() {
        let bots: Vec<&str> = m["bots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b.as_str())
            .collect();
        let houses: Vec<&str> = m["houses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str())
            .collect();
        println!(
            "  {}{}  {}  {}  bots: {}  houses: {}",
            m["node"].as_str().unwrap_or(""),
            if m["self"] == true {
                " (this node)"
            } else {
                ""
            },
            m["listen"].as_str().unwrap_or(""),
            if m["connected"] == true {
                "connected"
            } else {
                "down"
            },
            if bots.is_empty() {
                "none".to_string()
            } else {
                bots.join(", ")
            },
            if houses.is_empty() {
                "none".to_string()
            } else {
                houses.join(", ")
            }
        );
        let kinds: Vec<&str> = m["kinds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str())
            .collect();
        if !kinds.is_empty() {
            println!("      actor kinds: {}", kinds.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `troupe ps`.
pub async fn ps<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    json: bool,
    cluster: bool,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    if cluster {
        return members(builder, json).await;
    }
    if let Some(remote) = super::remote::Remote::find(builder.home_dir()) {
        let answer = remote.get("/tree").await?;
        let tree: Vec<ActorInfo> = serde_json::from_value(answer["actors"].clone())?;
        if !json {
            println!("the live actor tree of the server at {}:", remote.url());
        }
        print_tree(&tree, json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = match builder.recover(false).build().await {
        Ok(runtime) => runtime,
        Err(RuntimeError::Home(LockError::InUse { owner, .. })) => {
            let view = read_only().await?;
            let open = view
                .read(|c| {
                    let mut stmt =
                        c.prepare("SELECT COUNT(*) FROM kv WHERE key LIKE 'open_turn:%'")?;
                    Ok(stmt.query_row([], |r| r.get::<_, i64>(0))?)
                })
                .await?;
            let pending = view.read(|c| Ok(mailbox::pending_all(c)?.len())).await?;
            println!(
                "the home is run by {owner}: its live actor tree is in that process \
                 (it runs no server this CLI can reach).\n{open} turn(s) in progress, \
                 {pending} message(s) waiting for delivery."
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    let tree = runtime.tree().await;
    let store = runtime.node().store().clone();
    let open = journal::open_turns(&store).await?;
    let pending = store.read(mailbox::pending_all).await?.len();
    print_tree(&tree, json)?;
    if !json && (!open.is_empty() || pending > 0) {
        println!(
            "\nat rest: {} turn(s) left open by a crash, {pending} message(s) undelivered; \
             `troupe serve` or `troupe chat` resumes them",
            open.len()
        );
    }
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

fn print_tree(tree: &[ActorInfo], json: bool) -> anyhow::Result<()> {
    if json {
        for actor in tree {
            println!("{}", serde_json::to_string(actor)?);
        }
        return Ok(());
    }
    println!(
        "{:<14} {:<40} {:<16} {:<10} {:>8}",
        "kind", "id", "parent", "state", "restarts"
    );
    for actor in tree {
        println!(
            "{:<14} {:<40} {:<16} {:<10} {:>8}",
            actor.kind,
            actor.id,
            actor.parent.as_deref().unwrap_or("-"),
            actor.state,
            actor.restarts
        );
    }
    Ok(())
}

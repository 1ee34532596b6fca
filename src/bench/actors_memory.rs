//! The memory of a program's actor kind at scale: `n` stored keys of one
//! kind (1,000,000 by default), `live` of them (100,000) activated at once
//! and kept live, and the process's resident memory with them.
//!
//! The stored keys' states are written as an actor's commit writes them
//! (one `kv` row per key, `actor:counter/KEY`), in batches, rather than by
//! a million activations: what is measured is what a million stored keys
//! and a hundred thousand live actors cost a running process, not the
//! time to make them. Then `live` keys are each called once (activated
//! from their stored state, 1,000 calls in flight), and the resident
//! memory is read again once the workers are idle.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use troupe_actors::kinds::KindOptions;
use troupe_runtime::protocol::Address;

use super::actors::Counter;
use super::{peak_rss_bytes, rss_bytes};
use crate::Runtime;

/// Rows written per transaction.
const BATCH: usize = 10_000;

/// Calls in flight while activating.
const IN_FLIGHT: usize = 1_000;

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / 1_048_576.0 * 10.0).round() / 10.0
}

/// Runs the workload.
pub async fn memory(keys: usize, live: usize) -> anyhow::Result<serde_json::Value> {
    anyhow::ensure!(
        live <= keys,
        "`--live {live}` is more than the {keys} stored keys; lower it or raise `--n`"
    );
    let home = tempfile::tempdir()?;
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(std::sync::Arc::new(
            troupe_runtime::model::ScriptedProvider::new(vec![]),
        ))
        .set("review.enabled", "false")
        .build()
        .await?;
    let counters = runtime
        .register_with(
            "counter",
            KindOptions::default().idle_after(None),
            |_: &str| Counter,
        )
        .await?;
    let rss_started = rss_bytes();

    let start = Instant::now();
    for first in (0..keys).step_by(BATCH) {
        let last = (first + BATCH).min(keys);
        runtime
            .node()
            .store()
            .write(move |tx| {
                for i in first..last {
                    let address = Address::Actor {
                        kind: "counter".into(),
                        key: format!("k{i}"),
                    };
                    troupe_runtime::store::kv::set(tx, &address.to_string(), "1")?;
                }
                Ok(())
            })
            .await?;
    }
    let stored_in = start.elapsed();
    let rss_stored = rss_bytes();

    let start = Instant::now();
    let mut calls = futures::stream::iter((0..live).map(|i| {
        let (runtime, address) = (runtime.clone(), counters.address(format!("k{i}")));
        async move { runtime.call(&address, 1).await }
    }))
    .buffer_unordered(IN_FLIGHT);
    let mut answered = 0;
    while let Some(count) = calls.next().await {
        anyhow::ensure!(count? == 2, "an actor did not start from its stored state");
        answered += 1;
    }
    drop(calls);
    let activated_in = start.elapsed();
    anyhow::ensure!(
        counters.live_count() == live,
        "{} of {live} actors are live",
        counters.live_count()
    );
    // The workers park (and give back what they freed) once idle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_live = rss_bytes();
    let per_actor = rss_live.saturating_sub(rss_stored) / live.max(1) as u64;
    runtime.shutdown().await;
    Ok(json!({
        "workload": "actors-memory",
        "stored_keys": keys,
        "live": answered,
        "stored_s": (stored_in.as_secs_f64() * 10.0).round() / 10.0,
        "activated_per_s": (answered as f64 / activated_in.as_secs_f64()).round(),
        "rss_started_mib": mib(rss_started),
        "rss_stored_mib": mib(rss_stored),
        "rss_live_mib": mib(rss_live),
        "rss_peak_mib": mib(peak_rss_bytes()),
        "bytes_per_live_actor": per_actor,
    }))
}

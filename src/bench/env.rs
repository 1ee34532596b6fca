//! Environments: what a sandbox costs.
//!
//! - `create`: `create_environment`'s work for a fresh environment (store
//!   row, workdir, control group, the actor started), after the one-time
//!   check that the machine can sandbox (measured apart: `first_create_ms`);
//! - `first_command_ms`: the first command of a fresh environment, which
//!   starts its sandbox (helper, control groups, bubblewrap, Landlock,
//!   seccomp) before it forks the command;
//! - `run_command` overhead: `true` run through an environment's actor and
//!   its live sandbox (the command's records in the store, the request to
//!   the sandbox's process 1, its fork with the rlimits and the
//!   environment's user, the end reported back) against `bash -c true` on
//!   the host, from the same process;
//! - `idle_50`: the resident memory 50 live, idle environments add.

use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe_runtime::model::{ScriptedProvider, Turn};

use super::{percentiles, rss_bytes};
use crate::Runtime;

const RUNS: usize = 50;
const IDLE: usize = 50;

/// Runs the environment workloads with `n` fresh creations.
pub async fn env(n: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let model = ScriptedProvider::from_fn(|_| Turn::text("ok")).recording(false);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model))
        .set("review.enabled", "false")
        .build()
        .await?;
    let house = runtime.create_house("bench").await?;
    let envs = house.environments();

    let started = Instant::now();
    let first = envs.create(None).await?.info.id;
    let first_create = started.elapsed();
    // Bound to nothing, it would be reused: give each a thread.
    let mut creates = Vec::with_capacity(n);
    for i in 0..n {
        let thread = house
            .create_thread(Some(&format!("t{i}")), &[], "bench", &[])
            .await?;
        let started = Instant::now();
        envs.create(Some(thread.info.id)).await?;
        creates.push(started.elapsed());
    }

    let started = Instant::now();
    let out = envs.exec(first, "true", None).await?;
    anyhow::ensure!(out.success() && out.sandboxed, "`true` failed: {out:?}");
    let first_command = started.elapsed();
    let mut sandboxed = Vec::with_capacity(RUNS);
    let mut host = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let out = envs.exec(first, "true", None).await?;
        anyhow::ensure!(out.success() && out.sandboxed, "`true` failed: {out:?}");
        sandboxed.push(started.elapsed());
        let started = Instant::now();
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .await?;
        anyhow::ensure!(status.success(), "`bash -c true` failed on the host");
        host.push(started.elapsed());
    }
    let p50 = |mut v: Vec<Duration>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let overhead = p50(sandboxed.clone()).saturating_sub(p50(host.clone()));

    let before = rss_bytes();
    for i in 0..IDLE {
        let thread = house
            .create_thread(Some(&format!("idle{i}")), &[], "bench", &[])
            .await?;
        envs.create(Some(thread.info.id)).await?;
    }
    let after = rss_bytes();
    let live = runtime
        .node()
        .tree()
        .await
        .iter()
        .filter(|a| a.kind == "environment")
        .count();
    runtime.shutdown().await;
    Ok(serde_json::json!({
        "workload": "env",
        "first_create_ms": (first_create.as_secs_f64() * 1e4).round() / 10.0,
        "first_command_ms": (first_command.as_secs_f64() * 1e4).round() / 10.0,
        "create": percentiles(creates),
        "run_true_sandboxed": percentiles(sandboxed),
        "run_true_host": percentiles(host),
        "run_overhead_p50_ms": (overhead.as_secs_f64() * 1e4).round() / 10.0,
        "idle_50_rss_mib": ((after.saturating_sub(before)) as f64 / 1_048_576.0 * 10.0).round() / 10.0,
        "live_sandbox_actors": live,
    }))
}

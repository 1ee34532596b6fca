//! `troupe bench executors`: what troupe adds to an outside harness.
//!
//! A stand-in for pi that speaks its RPC mode and calls no model
//! (`tests/executors/fake-pi.mjs`, installed into a temp home like pi) is
//! run two ways, so the harness's own start-up cancels out:
//!
//! - **start**, three legs alternated: (1) the bare process (`node
//!   fake-pi.mjs`, given its task) to its first event printed; (2) the
//!   same process in a sandbox confined as an instance's is; (3) troupe's
//!   instance — delegation recorded, relay, sandbox, process, actors — to
//!   that event recorded in the store. The overhead is the difference of
//!   the medians of (3) and (1), split into the sandbox's own start
//!   (bubblewrap's namespaces and mounts: (2) less (1)) and troupe's part
//!   ((3) less (2)). Node's own start is the largest and, under load,
//!   the most variable piece of every leg, so troupe's part is also given
//!   without it, from the stand-in's stamps (its process's start, its
//!   event's writing): before the process (asked to node's start, (3)
//!   less (2)) and after the event (written to seen, (3) less (1)). The
//!   overhead is also given whole that way: each leg's time around node's
//!   own start (asked to its process's start, plus its event written to
//!   seen), (3) less (1), with node's own part (its process's start to
//!   its event) per leg, to show it is the same in each.
//! - **event to recorded**: one instance printing an event every
//!   millisecond, each stamped with the wall time it was written; the bench
//!   watches the record as a live watcher does (woken by each commit) and
//!   takes each event's age when it appears.
//! - **concurrent**: 10 instances at once printing 10,000 events each as
//!   fast as they can; every event must be recorded, in order.
//! - **hand-over**: `n` tasks whose account reaches its plan's limit, each
//!   timed from the limit to the next account's first event
//!   ([`hand_over`]).
//!
//! When the real pi is installed in `tests/executors`, its own start-up
//! (`pi --version`, process to exit) is reported beside.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use troupe_actors::delegation::executor::Place;
use troupe_actors::delegation::executors::{Start, USER};
use troupe_actors::delegation::record;
use troupe_actors::node::Node;
use troupe_runtime::id::{ConversationId, SubagentId};
use troupe_runtime::model::ScriptedProvider;

use super::percentiles;

mod hand_over;

const FAKE: &str = include_str!("../../tests/executors/fake-pi.mjs");

/// Writes the stand-in as an installable copy of pi; returns its
/// `node_modules`.
fn fake_harness(dir: &Path) -> anyhow::Result<PathBuf> {
    let harness = troupe_runtime::executors::harness("pi")
        .ok_or_else(|| anyhow::anyhow!("troupe knows no pi"))?;
    let modules = dir.join("fake").join("node_modules");
    let package = modules.join(harness.package);
    let entry = modules.join(harness.entry);
    std::fs::create_dir_all(entry.parent().unwrap_or(&package))?;
    std::fs::write(
        package.join("package.json"),
        json!({"name": harness.package, "version": harness.version, "type": "module"}).to_string(),
    )?;
    std::fs::write(&entry, FAKE)?;
    Ok(modules)
}

/// Runs the benchmark: `n` starts each way.
pub async fn executors(n: usize) -> anyhow::Result<serde_json::Value> {
    troupe_runtime::sandbox::Sandbox::detect().map_err(|why| {
        anyhow::anyhow!("the executors benchmark runs instances in the sandbox: {why}")
    })?;
    let dir = tempfile::tempdir()?;
    let modules = fake_harness(dir.path())?;
    let home = dir.path().join("home");
    let folder = dir.path().join("work");
    std::fs::create_dir_all(&folder)?;
    let installed = troupe_runtime::executors::install_from(
        &troupe_runtime::home::Home::new(&home),
        "pi",
        &modules,
    )?;
    std::fs::write(home.join("config.toml"), hand_over::CONFIG)?;

    let runtime = crate::Runtime::builder()
        .home(&home)
        .cwd(dir.path())
        .provider(Arc::new(ScriptedProvider::new(Vec::new()).recording(false)))
        .set("delegation.max_concurrent_per_node", "100")
        .set("delegation.max_concurrent_per_bot", "100")
        .build()
        .await?;
    let node = runtime.node().clone();

    // The bare process to its first event, and an instance to that event
    // recorded, alternated so the machine's drift falls on both.
    let mut bare = Vec::with_capacity(n);
    let mut sandboxed = Vec::with_capacity(n);
    let mut through = Vec::with_capacity(n);
    let sandbox =
        troupe_runtime::sandbox::Sandbox::detect().map_err(|why| anyhow::anyhow!("{why}"))?;
    // Confined as an instance is (its folder and state writable, the
    // installed harness read-only, the home hidden).
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state)?;
    let confinement = troupe_runtime::sandbox::Confinement {
        writable: vec![folder.clone(), state],
        read_only: vec![installed.modules.clone()],
        network: troupe_runtime::sandbox::Network::Machine,
        hidden: vec![home.clone()],
    };
    for _ in 0..n {
        bare.push(
            first_line(
                &installed.entry,
                &folder,
                None,
                "events 1",
                "tool_execution_start",
            )
            .await?,
        );
        sandboxed.push(
            first_line(
                &installed.entry,
                &folder,
                Some((sandbox, &confinement)),
                "events 1",
                "tool_execution_start",
            )
            .await?,
        );
        let (t, asked) = (Instant::now(), wall_us());
        let subs = start(&node, &folder, &["events 1"]).await?;
        wait_recorded(&node, subs[0], 1).await?;
        let (total, seen) = (t.elapsed(), wall_us());
        let sub = subs[0];
        let first = node
            .store()
            .read(move |c| record::events_of(c, sub, 0, 100))
            .await?
            .into_iter()
            .find(|e| e.1 == "tool")
            .map(|e| e.2)
            .unwrap_or_default();
        through.push(Timed::new(total, asked, &first, seen)?);
        wait_ended(&node, &subs).await?;
    }
    // Event to recorded, paced.
    let paced = 2_000;
    let subs = start(&node, &folder, &[&format!("events {paced} every 1")]).await?;
    let ages = ages(&node, subs[0], paced).await?;
    wait_ended(&node, &subs).await?;

    // Ten at once, 10,000 events each, as fast as they come.
    let each: usize = 10_000;
    let task = format!("events {each}");
    let t = Instant::now();
    let subs = start(&node, &folder, &[task.as_str(); 10]).await?;
    wait_ended(&node, &subs).await?;
    let wall = t.elapsed();
    let mut lost = 0;
    let mut out_of_order = 0;
    for sub in &subs {
        let steps = steps(&node, *sub).await?;
        lost += each.saturating_sub(steps.len());
        out_of_order += steps.windows(2).filter(|w| w[1] != w[0] + 1).count();
    }

    // Hand-overs: the limit to the next account's first event.
    let mut handed = Vec::with_capacity(n);
    for _ in 0..n {
        handed.push(hand_over::once(&node, &folder).await?);
    }
    runtime.shutdown().await;

    let real = real_pi_start(&folder).await;
    let median = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let leg = |v: &[Timed], f: fn(&Timed) -> Duration| v.iter().map(f).collect::<Vec<_>>();
    let (bare_total, sandboxed_total, through_total) = (
        leg(&bare, |t| t.total),
        leg(&sandboxed, |t| t.total),
        leg(&through, |t| t.total),
    );
    let overhead = median(&through_total).saturating_sub(median(&bare_total));
    let confined = median(&sandboxed_total).saturating_sub(median(&bare_total));
    let own = median(&through_total).saturating_sub(median(&sandboxed_total));
    // troupe's part again, without node's own start in it (the largest
    // and, under load, the most variable piece): before the process
    // (asked to node's start, less the bare sandbox's) and after the
    // event (written to seen, less the bare pipe's).
    let before_process = median(&leg(&through, |t| t.to_process))
        .saturating_sub(median(&leg(&sandboxed, |t| t.to_process)));
    let after_event = median(&leg(&through, |t| t.after_event))
        .saturating_sub(median(&leg(&bare, |t| t.after_event)));
    // The whole overhead the same way: what each leg adds around node's
    // own start (its process's start to its event), the bare process's
    // taken from troupe's. Node's own part is given per leg beside it, so
    // a reader sees it is the same in each.
    let around = |t: &Timed| t.to_process + t.after_event;
    let without_node = median(&leg(&through, around)).saturating_sub(median(&leg(&bare, around)));
    let sandbox_without_node =
        median(&leg(&sandboxed, around)).saturating_sub(median(&leg(&bare, around)));
    let split = |v: &[Timed]| {
        json!({
            "to_first_event": percentiles(leg(v, |t| t.total)),
            "to_its_process_start": percentiles(leg(v, |t| t.to_process)),
            "event_written_to_seen": percentiles(leg(v, |t| t.after_event)),
            "node_own_start_to_event": percentiles(leg(v, |t| t.own)),
        })
    };
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    Ok(json!({
        "workload": "executors",
        "starts": n,
        // The three legs, then the overhead split between the last two.
        "start": {
            "1_bare": split(&bare),
            "2_bare_in_its_sandbox": split(&sandboxed),
            "3_through_troupe_to_recorded": split(&through),
            "overhead_p50_ms": ms(overhead),
            "of_which_the_sandbox_p50_ms": ms(confined),
            "of_which_troupe_p50_ms": ms(own),
            "troupe_before_the_process_p50_ms": ms(before_process),
            "troupe_after_the_event_p50_ms": ms(after_event),
            "overhead_without_node_start_p50_ms": ms(without_node),
            "of_which_the_sandbox_without_node_start_p50_ms": ms(sandbox_without_node),
        },
        "event_to_recorded": percentiles(ages),
        "concurrent": {
            "instances": 10,
            "events_each": each,
            "wall_ms": wall.as_millis() as u64,
            "events_per_s": ((10 * each) as f64 / wall.as_secs_f64()).round(),
            "lost": lost,
            "out_of_order": out_of_order,
        },
        "hand_over": {
            "limit_to_next_process_start": percentiles(handed.iter().map(|h| h.to_process).collect()),
            "limit_to_next_first_event_written": percentiles(handed.iter().map(|h| h.written).collect()),
            "limit_to_next_first_event_recorded": percentiles(handed.iter().map(|h| h.recorded).collect()),
            "limit_to_next_first_event_recorded_without_the_stand_ins_own_start": percentiles(handed.iter().map(|h| h.recorded_without_its_start).collect()),
        },
        "real_pi_version": real,
    }))
}

/// Spawns the harness bare (or alone in a sandbox), gives it `task`, and
/// times its first line holding `marker`.
async fn first_line(
    entry: &Path,
    folder: &Path,
    confined: Option<(
        &troupe_runtime::sandbox::Sandbox,
        &troupe_runtime::sandbox::Confinement,
    )>,
    task: &str,
    marker: &str,
) -> anyhow::Result<Timed> {
    let (t, asked) = (Instant::now(), wall_us());
    let args = [entry.as_os_str(), "--mode".as_ref(), "rpc".as_ref()];
    let mut command = match confined {
        Some((sandbox, confinement)) => {
            tokio::process::Command::from(sandbox.command("node", args, folder, confinement))
        }
        None => {
            let mut command = tokio::process::Command::new("node");
            command.args(args);
            command
        }
    };
    // The environment troupe gives its instances: nothing inherited.
    let mut child = command
        .current_dir(folder)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", folder)
        .env("LANG", "C.UTF-8")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0")
        .env("PI_CODING_AGENT_DIR", folder.join(".pi"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut input = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no input"))?;
    let line = json!({"type": "get_state", "id": "s"}).to_string()
        + "\n"
        + &json!({"type": "prompt", "id": "p", "message": task}).to_string()
        + "\n";
    input.write_all(line.as_bytes()).await?;
    let mut lines = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no output"))?,
    )
    .lines();
    let first = loop {
        match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
            Ok(Ok(Some(line))) if line.contains(marker) => break line,
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) | Ok(Err(_)) => {
                anyhow::bail!("the harness ended before printing {marker}")
            }
            Err(_) => anyhow::bail!("the harness printed no {marker} within 60 s"),
        }
    };
    let (total, seen) = (t.elapsed(), wall_us());
    drop(input);
    let _ = child.kill().await;
    Timed::new(total, asked, &first, seen)
}

/// One start, timed whole and in two pieces by the stand-in's stamps (its
/// process's start and its event's writing, wall clock µs): asked to its
/// process started, and its event written to seen (read from its pipe, or
/// recorded).
struct Timed {
    total: Duration,
    to_process: Duration,
    /// Its process's start to its event written: node's own part.
    own: Duration,
    after_event: Duration,
}

impl Timed {
    fn new(total: Duration, asked_us: i64, event: &str, seen_us: i64) -> anyhow::Result<Self> {
        let stamp = |key: &str| {
            event
                .split(|c: char| c.is_whitespace() || c == '"')
                .find_map(|w| w.strip_prefix(key)?.parse::<i64>().ok())
                .ok_or_else(|| anyhow::anyhow!("the stand-in's event has no {key}: {event}"))
        };
        let us = |d: i64| Duration::from_micros(u64::try_from(d).unwrap_or(0));
        let (origin, written) = (stamp("o=")?, stamp("t=")?);
        Ok(Self {
            total,
            to_process: us(origin - asked_us),
            own: us(written - origin),
            after_event: us(seen_us - written),
        })
    }
}

/// The wall clock, in µs (the stand-in stamps its events with it).
fn wall_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// The real pi's start-up (`pi --version`, process to exit), where
/// `tests/executors` holds it.
async fn real_pi_start(folder: &Path) -> serde_json::Value {
    let Some(harness) = troupe_runtime::executors::harness("pi") else {
        return json!(null);
    };
    let entry = std::env::current_dir()
        .unwrap_or_default()
        .join("tests/executors/node_modules")
        .join(harness.entry);
    if !entry.is_file() {
        return json!(
            "not measured: pi is not installed in tests/executors (scripts/test installs it)"
        );
    }
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let ran = tokio::process::Command::new("node")
            .arg(&entry)
            .arg("--version")
            .current_dir(folder)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("PI_CODING_AGENT_DIR", folder.join(".pi"))
            .output()
            .await;
        match ran {
            Ok(out) if out.status.success() => runs.push(t.elapsed()),
            Ok(out) => {
                return json!(format!(
                    "not measured: pi --version ended with {}",
                    out.status
                ))
            }
            Err(e) => return json!(format!("not measured: {e}")),
        }
    }
    percentiles(runs)
}

/// Starts one instance per task, the user's own, in `folder`.
async fn start(node: &Node, folder: &Path, tasks: &[&str]) -> anyhow::Result<Vec<SubagentId>> {
    let delegations = node
        .delegations()
        .ok_or_else(|| anyhow::anyhow!("the node has no delegations"))?;
    let start = Start {
        executor: "pi".into(),
        owner: USER.into(),
        parent: ConversationId::new(),
        model: "script:none".into(),
        waits: true,
        tasks: tasks
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    String::new(),
                    folder.to_path_buf(),
                    Place::Host,
                )
            })
            .collect(),
        report_to: None,
        session: None,
    };
    let started = delegations
        .start_instances(node, start)
        .await
        .map_err(|e| anyhow::anyhow!(e.text))?;
    Ok(started.instances)
}

/// The step numbers an instance's record holds, in order.
async fn steps(node: &Node, sub: SubagentId) -> anyhow::Result<Vec<usize>> {
    let events = node
        .store()
        .read(move |c| record::events_of(c, sub, 0, usize::MAX))
        .await?;
    Ok(events
        .iter()
        .filter_map(|e| e.2.strip_prefix("bash step "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect())
}

/// Waits until `sub`'s record holds `n` steps.
async fn wait_recorded(node: &Node, sub: SubagentId, n: usize) -> anyhow::Result<()> {
    let delegations = node
        .delegations()
        .ok_or_else(|| anyhow::anyhow!("the node has no delegations"))?;
    // Subscribed before the first read: no commit falls between the two.
    let mut changes = delegations.record_changes();
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let found = node
                .store()
                .read(move |c| {
                    let events = record::events_of(c, sub, 0, usize::MAX)?;
                    Ok(events.iter().filter(|e| e.1 == "tool").count())
                })
                .await?;
            if found >= n {
                return anyhow::Ok(());
            }
            changes.changed().await?;
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("{sub} recorded fewer than {n} events in 60 s"))?
}

/// Waits until every instance of `subs` has ended.
async fn wait_ended(node: &Node, subs: &[SubagentId]) -> anyhow::Result<()> {
    let ids: Vec<String> = subs.iter().map(|s| s.to_string()).collect();
    let delegations = node
        .delegations()
        .ok_or_else(|| anyhow::anyhow!("the node has no delegations"))?;
    let mut changes = delegations.record_changes();
    tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            let ids = ids.clone();
            let running = node
                .store()
                .read(move |c| {
                    let mut running = 0;
                    for id in &ids {
                        if record::instance(c, id)?.is_some_and(|r| r.status == "running") {
                            running += 1;
                        }
                    }
                    Ok(running)
                })
                .await?;
            if running == 0 {
                return anyhow::Ok(());
            }
            changes.changed().await?;
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("the instances did not end within 300 s"))?
}

/// Each event's age when it appears in the record: now, less the wall
/// time the harness wrote it with.
async fn ages(node: &Node, sub: SubagentId, n: usize) -> anyhow::Result<Vec<Duration>> {
    let delegations = node
        .delegations()
        .ok_or_else(|| anyhow::anyhow!("the node has no delegations"))?;
    let mut changes = delegations.record_changes();
    let mut ages = Vec::with_capacity(n);
    let mut after = 0_i64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while ages.len() < n && Instant::now() < deadline {
        let events = node
            .store()
            .read(move |c| record::events_of(c, sub, after, 10_000))
            .await?;
        let wall_us = chrono::Utc::now().timestamp_micros();
        for (seq, _, text, _) in &events {
            after = *seq;
            if let Some(stamp) = text
                .split("t=")
                .nth(1)
                .and_then(|t| t.trim().parse::<i64>().ok())
            {
                ages.push(Duration::from_micros(
                    u64::try_from(wall_us - stamp).unwrap_or(0),
                ));
            }
        }
        if ages.len() < n {
            tokio::time::timeout_at(deadline.into(), changes.changed()).await??;
        }
    }
    anyhow::ensure!(
        ages.len() == n,
        "only {} of {n} paced events were recorded",
        ages.len()
    );
    Ok(ages)
}

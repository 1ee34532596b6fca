//! `troupe bench cluster-move`: moving a house between two nodes on
//! loopback (docs/cluster.md, "Moving a house").
//!
//! Node `a` (this process) hosts `--n` houses, one after the other, each of
//! 10,000 thread messages (10 threads of 1,000) and 100 files of 16 KiB of
//! text; each is moved to node `b` (a `troupe serve` process). Measured:
//! the whole move as its caller waits for it, and the time the house was
//! not served (from its fence to the switch), per house.

use std::time::Instant;

use serde_json::json;
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::house::MemberKind;
use troupe_runtime::store::house as table;
use troupe_runtime::store::house_files::{self, FileLimits, NewFile};

use super::cluster::Pair;

const THREADS: usize = 10;
const PER_THREAD: usize = 1_000;
const FILES: usize = 100;
const FILE_BYTES: usize = 16 * 1024;

/// Makes the house `name` on `pair`'s node a, full.
async fn fill(pair: &Pair, name: &str) -> anyhow::Result<()> {
    let store = pair.runtime.node().store().clone();
    let owned = name.to_string();
    let house = store
        .write(move |tx| {
            let h = table::create_house(tx, &owned)?;
            for t in 0..THREADS {
                let info = table::create_thread(tx, h.id, Some(&format!("t{t}")), &[], "ann", &[])?;
                for i in 0..PER_THREAD {
                    let text = format!("message {i} of thread {t}: the launch moves to Friday");
                    table::append_message(
                        tx,
                        info.id,
                        MsgId::new(),
                        "ann",
                        MemberKind::Human,
                        None,
                        &text,
                    )?;
                }
            }
            Ok(h.id)
        })
        .await?;
    let line = "a line of the plan, long enough to be a line of a real document.\n";
    let files = (0..FILES)
        .map(|i| {
            let text: String = line.repeat(FILE_BYTES / line.len() + 1)[..FILE_BYTES].to_string();
            NewFile::text(format!("docs/{i}.md"), format!("{i}{text}"))
        })
        .collect();
    house_files::write_files(
        &store,
        house,
        "ann",
        "the docs",
        files,
        FileLimits::default(),
    )
    .await?;
    Ok(())
}

/// Runs the workload: `n` houses moved, one at a time.
pub async fn cluster_move(n: usize) -> anyhow::Result<serde_json::Value> {
    let pair = Pair::start().await?;
    let result = measure(&pair, n.max(1)).await;
    pair.stop().await;
    result
}

async fn measure(pair: &Pair, n: usize) -> anyhow::Result<serde_json::Value> {
    let mut moves = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("moving-{i}");
        fill(pair, &name).await?;
        let started = Instant::now();
        let report = pair.cluster.move_house(&name, "b").await?;
        let took = started.elapsed();
        anyhow::ensure!(
            report.counts.messages == (THREADS * PER_THREAD) as u64
                && report.counts.files == FILES as u64,
            "node b counted {} messages and {} files",
            report.counts.messages,
            report.counts.files
        );
        moves.push(json!({
            "move_ms": (took.as_secs_f64() * 1e4).round() / 10.0,
            "unserved_ms": (report.took.as_secs_f64() * 1e4).round() / 10.0,
            "bytes_sent": report.counts.bytes,
        }));
    }
    Ok(json!({
        "workload": "cluster-move",
        "what": "a house of 10,000 messages and 100 files of 16 KiB moved from node a to node b on loopback",
        "messages": THREADS * PER_THREAD,
        "files": FILES,
        "moves": moves,
    }))
}

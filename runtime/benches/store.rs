//! Store throughput and latency: group-commit appends from many concurrent
//! tasks, and durable mailbox sends under concurrent load.
//!
//! Run: `cargo bench -p troupe-runtime --bench store [-- append1|append10|send]`
//! Prints one JSON line per measurement.

use std::time::{Duration, Instant};

use troupe_runtime::id::{BotId, ConversationId, MsgId};
use troupe_runtime::protocol::{Address, Envelope, Message, Payload};
use troupe_runtime::store::{conversations, Store};

/// The allocator the `troupe` binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> BenchResult<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if wanted("append1") {
            appends(256, 1600, 1).await?;
        }
        if wanted("append10") {
            appends(256, 160, 10).await?;
        }
        if wanted("send") {
            sends(64, 200).await?;
        }
        Ok(())
    })
}

/// Whether the command line names `name` (or names none): `cargo bench
/// -p troupe-runtime --bench store -- append10` runs one measurement.
fn wanted(name: &str) -> bool {
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    names.is_empty() || names.iter().any(|n| n == name)
}

async fn open() -> BenchResult<(tempfile::TempDir, Store, ConversationId)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("troupe.db");
    let store = tokio::task::spawn_blocking(move || Store::open(&path)).await??;
    let (bot, conv) = (BotId::new(), ConversationId::new());
    store
        .write(move |tx| {
            conversations::create_conversation(
                tx,
                &conversations::NewConversation::new(conv, bot, "bench"),
            )
        })
        .await?;
    Ok((dir, store, conv))
}

/// `tasks` tasks each write `jobs` jobs of `rows_per_job` messages.
async fn appends(tasks: usize, jobs: usize, rows_per_job: usize) -> BenchResult<()> {
    let (_dir, store, conv) = open().await?;
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for j in 0..jobs {
                    // Prepared off the writer thread, as the conversations do.
                    let rows = (0..rows_per_job)
                        .map(|r| {
                            let text = format!("task {t} job {j} row {r}: a few words of text");
                            conversations::PreparedMessage::new(conv, &Message::user(text))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    store
                        .write(move |tx| conversations::PreparedMessage::append_all(tx, &rows))
                        .await?;
                }
                Ok::<_, troupe_runtime::store::StoreError>(())
            })
        })
        .collect();
    for handle in handles {
        handle.await??;
    }
    // Indexed too: what the writer deferred counts.
    store.catch_up().await?;
    let seconds = start.elapsed().as_secs_f64();
    let rows = tasks * jobs * rows_per_job;
    println!(
        "{}",
        serde_json::json!({
            "bench": "store.append_group_commit",
            "tasks": tasks,
            "rows_per_job": rows_per_job,
            "rows": rows,
            "seconds": seconds,
            "rows_per_s": (rows as f64 / seconds).round(),
            "jobs_per_s": ((tasks * jobs) as f64 / seconds).round(),
        })
    );
    Ok(())
}

/// `tasks` tasks each send `each` envelopes one after the other, timing each.
async fn sends(tasks: usize, each: usize) -> BenchResult<()> {
    let (_dir, store, conv) = open().await?;
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(each);
                for i in 0..each {
                    let envelope = Envelope {
                        id: MsgId::new(),
                        from: Address::Service("bench".into()),
                        to: Address::Conversation(conv),
                        body: Payload::Text {
                            sender: "bot:bench".into(),
                            text: format!("message {i}"),
                            expects_reply: false,
                        },
                        sent_at: chrono::Utc::now(),
                    };
                    let t = Instant::now();
                    store.send(envelope).await?;
                    times.push(t.elapsed());
                }
                Ok::<_, troupe_runtime::store::StoreError>(times)
            })
        })
        .collect();
    let mut times: Vec<Duration> = Vec::new();
    for handle in handles {
        times.extend(handle.await??);
    }
    let seconds = start.elapsed().as_secs_f64();
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    println!(
        "{}",
        serde_json::json!({
            "bench": "store.durable_send",
            "concurrent": tasks,
            "sends": times.len(),
            "sends_per_s": (times.len() as f64 / seconds).round(),
            "p50_ms": at(0.50),
            "p99_ms": at(0.99),
            "max_ms": at(1.0),
        })
    );
    Ok(())
}

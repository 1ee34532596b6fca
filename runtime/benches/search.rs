//! Conversation search at scale: builds a store of many messages (text drawn
//! from a word list with a Zipf-like spread, over many conversations),
//! measuring the append rate with full-text indexing, then times discovery
//! queries the way `conversation_search` runs them (the matching
//! conversations with their best hits, then the best one read in full).
//!
//! Run: `cargo bench -p troupe-runtime --bench search`
//! Size: `TROUPE_SEARCH_BENCH_MESSAGES=100000 cargo bench -p troupe-runtime --bench search`
//! (default 1,000,000 messages, 100 per conversation;
//! `TROUPE_SEARCH_BENCH_QUERIES` sets the number of queries, default 300). Prints one JSON line
//! per measurement. Not part of the test suite.

use std::time::{Duration, Instant};

use troupe_runtime::id::{BotId, ConversationId, MsgId};
use troupe_runtime::protocol::{Message, ToolResult};
use troupe_runtime::store::search::{self, Filter, Order};
use troupe_runtime::store::{conversations, Store};

/// The allocator the `troupe` binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Messages per conversation.
const PER_CONVERSATION: usize = 100;
/// Messages per write job.
const JOB: usize = 5_000;
/// Write jobs in flight at once.
const IN_FLIGHT: usize = 4;
/// Discovery queries timed, by default.
const QUERIES: usize = 300;

/// Words people write, most common first; the tail is made of generated words.
const COMMON: &str = "the be to of and a in that have I it for not on with he as you do at this but his by from \
they we say her she or an will my one all would there their what so up out if about who get which go me when \
make can like time no just him know take people into year your good some could them see other than then now look \
only come its over think also back after use two how our work first well way even new want because any these give \
day most us deploy script server database schema migration token budget review report meeting client invoice \
release branch merge commit test build error crash memory cache queue worker thread lock timeout retry backup \
restore config secret password login account payment order customer product price market sales email calendar \
schedule routine delegate agent model prompt context summary search index query table column row file folder \
document spreadsheet slide chart draft plan task goal result answer question idea note design review feedback \
café résumé naïve façade déjà crème brûlée piñata jalapeño";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The vocabulary: the common words, then generated ones, and the cumulative
/// Zipf weights to draw from it.
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new(rng: &mut Rng, generated: usize) -> Self {
        let syllables = [
            "ka", "lo", "mi", "ren", "tu", "vo", "sha", "pel", "dri", "nox", "qua", "zim", "bor",
            "fen", "gal", "hut",
        ];
        let mut words: Vec<String> = COMMON.split_whitespace().map(str::to_string).collect();
        for _ in 0..generated {
            let n = 2 + rng.below(3);
            words.push(
                (0..n)
                    .map(|_| syllables[rng.below(syllables.len())])
                    .collect(),
            );
        }
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(1.05);
                total
            })
            .collect();
        Self { words, cumulative }
    }

    fn draw(&self, rng: &mut Rng) -> &str {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let at = self.cumulative.partition_point(|c| *c < rng.unit() * total);
        &self.words[at.min(self.words.len() - 1)]
    }

    fn sentence(&self, rng: &mut Rng, len: usize) -> String {
        let mut out = String::with_capacity(len * 7);
        for i in 0..len {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.draw(rng));
        }
        out
    }
}

fn main() -> BenchResult<()> {
    let total: usize = std::env::var("TROUPE_SEARCH_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let queries: usize = std::env::var("TROUPE_SEARCH_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(QUERIES);
    runtime.block_on(run(total, queries))
}

async fn run(total: usize, queries: usize) -> BenchResult<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("troupe.db");
    let store = tokio::task::spawn_blocking(move || Store::open(&path)).await??;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let words = std::sync::Arc::new(Words::new(&mut rng, 20_000));
    let conversations = total.div_ceil(PER_CONVERSATION).max(1);
    let bots: Vec<BotId> = (0..8).map(|_| BotId::new()).collect();
    let convs: Vec<(ConversationId, BotId)> = (0..conversations)
        .map(|i| (ConversationId::new(), bots[i % bots.len()]))
        .collect();
    {
        let convs = convs.clone();
        store
            .write(move |tx| {
                for (conv, bot) in &convs {
                    conversations::create_conversation(
                        tx,
                        &conversations::NewConversation::new(*conv, *bot, "main"),
                    )?;
                }
                Ok(())
            })
            .await?;
    }

    // Append: messages interleaved over the conversations as a live store
    // would see them, JOB per write job, IN_FLIGHT jobs queued at once.
    let start = Instant::now();
    let mut pending = std::collections::VecDeque::new();
    let mut written = 0;
    while written < total {
        let n = JOB.min(total - written);
        let mut batch = Vec::with_capacity(n);
        for k in written..written + n {
            let (conv, _) = convs[k % conversations];
            let len = 6 + rng.below(40);
            let text = words.sentence(&mut rng, len);
            let message = match k % 10 {
                9 => Message::Tool {
                    call_id: format!("call_{k}"),
                    name: "run_command".into(),
                    result: ToolResult::ok(text),
                },
                i if i % 2 == 0 => Message::user(text),
                _ => Message::assistant(text),
            };
            batch.push((conv, message));
        }
        written += n;
        let store = store.clone();
        pending.push_back(tokio::spawn(async move {
            // Prepared off the writer thread, as the conversations do.
            let rows = batch
                .iter()
                .map(|(conv, message)| {
                    conversations::PreparedMessage::with_id(MsgId::new(), *conv, message)
                })
                .collect::<Result<Vec<_>, _>>()?;
            store
                .write(move |tx| conversations::PreparedMessage::append_all(tx, &rows))
                .await
        }));
        if pending.len() >= IN_FLIGHT {
            if let Some(job) = pending.pop_front() {
                job.await??;
            }
        }
    }
    for job in pending {
        job.await??;
    }
    // Every message indexed, not only stored.
    store.catch_up().await?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "bench": "search.append_indexed",
            "messages": total,
            "conversations": conversations,
            "seconds": seconds,
            "messages_per_s": (total as f64 / seconds).round(),
        })
    );

    // Discovery: 1 to 3 words of the middle of the vocabulary (what people
    // search for: not "the", not a word seen once).
    let queries: Vec<String> = (0..queries)
        .map(|i| {
            let n = 1 + i % 3;
            (0..n)
                .map(|j| {
                    let lo = if j == 0 { 150 } else { 20 };
                    words.words[lo + rng.below(2_000)].clone()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    if queries.is_empty() {
        return Ok(());
    }
    for (name, order) in [("relevance", Order::Relevance), ("newest", Order::Newest)] {
        let mut times: Vec<Duration> = Vec::with_capacity(queries.len());
        let mut found_any = 0;
        for query in &queries {
            let query = query.clone();
            let t = Instant::now();
            let found = store
                .read(move |conn| {
                    let filter = Filter {
                        roles: vec!["user".into(), "assistant".into()],
                        ..Filter::default()
                    };
                    let found = search::find_conversations(conn, &query, &filter, order, 3, 3)?;
                    if let Some(best) = found.first() {
                        search::read_messages(conn, best.conversation.id, &filter.roles, 0, 200)?;
                    }
                    Ok(found.len())
                })
                .await?;
            times.push(t.elapsed());
            found_any += usize::from(found > 0);
        }
        times.sort_unstable();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
        println!(
            "{}",
            serde_json::json!({
                "bench": "search.discovery",
                "order": name,
                "messages": total,
                "queries": times.len(),
                "with_results": found_any,
                "p50_ms": at(0.50),
                "p99_ms": at(0.99),
                "max_ms": at(1.0),
            })
        );
    }
    Ok(())
}

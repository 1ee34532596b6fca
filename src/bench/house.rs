//! The house: what a thread costs beyond the model.
//!
//! - `delivery`: a bot's post to another thread, from its commit to the
//!   thread's director taking it (the `Posted` event);
//! - `round`: a person's post answered by three bots listening to `all`
//!   (zero-latency model: every microsecond is troupe's);
//! - `list_threads` and `read_thread`, through the tools, in a house of
//!   100 bots and 1,000 threads;
//! - `search_threads`, through the tool, over `n` messages spread over
//!   those threads (words drawn with a Zipf-like spread).

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use troupe_actors::house::tools::HouseDesk;
use troupe_runtime::house::{Houses, Seat};
use troupe_runtime::id::MsgId;
use troupe_runtime::model::{ScriptedProvider, Turn};
use troupe_runtime::protocol::house::{ListenMode, MemberKind, Post};
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_runtime::store::house as table;
use troupe_runtime::tool::{Tool, ToolContext};

use super::percentiles;
use crate::{BotSpec, Runtime, ThreadEvent};

const BOTS: usize = 100;
const THREADS: usize = 1_000;
const SAMPLES: usize = 500;

/// Runs the house workloads; `messages` thread messages are searched.
pub async fn house(messages: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let model = ScriptedProvider::from_fn(|_| Turn::text("ok")).recording(false);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model))
        .set("review.enabled", "false")
        .build()
        .await?;
    let node = runtime.node().clone();
    let bench = runtime.create_house("bench").await?;
    bench.add_human("ada", None).await?;
    let mut names = Vec::with_capacity(BOTS);
    for i in 0..BOTS {
        let name = format!("b{i:03}");
        runtime
            .spawn_bot(BotSpec::new(&name, &name, "A bench bot."))
            .await?;
        let listen = if i < 3 {
            ListenMode::All
        } else {
            ListenMode::Mentions
        };
        bench.add_bot(&name, listen).await?;
        names.push(name);
    }

    // A round: ada's post, three bots answer.
    let mut people = vec!["ada".to_string()];
    people.extend(names.iter().take(3).cloned());
    let round_thread = bench
        .create_thread(Some("round"), &[], "ada", &people)
        .await?;
    let mut rounds = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let start = Instant::now();
        let answers = round_thread
            .post_and_wait(
                "ada",
                &format!("question {i}"),
                std::time::Duration::from_secs(30),
            )
            .await?;
        rounds.push(start.elapsed());
        anyhow::ensure!(answers.len() == 3, "a round had {} answers", answers.len());
    }

    // Delivery: a bot's post from another thread, committed → taken.
    let target = bench
        .create_thread(Some("target"), &[], "ada", &["ada".to_string()])
        .await?;
    let mut events = node.thread_events();
    let mut delivery = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Service("bench".into()),
            to: Address::Thread(target.info.id),
            body: Payload::Post(Post {
                author: names[10].clone(),
                author_kind: MemberKind::Bot,
                text: format!("note {i}"),
                round: None,
                depth: 1,
                via: Some(round_thread.info.id),
                answers_offer: false,
                failed: None,
                attachments: Vec::new(),
            }),
            sent_at: chrono::Utc::now(),
        };
        let id = envelope.id;
        node.store().send(envelope.clone()).await?;
        let committed = Instant::now();
        node.route(envelope).await?;
        loop {
            match events.recv().await {
                Ok(ThreadEvent::Posted(p)) if p.message.id == id => break,
                Ok(_) => {}
                Err(e) => anyhow::bail!("the thread's events stopped: {e}"),
            }
        }
        delivery.push(committed.elapsed());
    }

    // 1,000 threads, and `messages` messages over them.
    let house_id = bench.house.id;
    let fill_names = names.clone();
    let threads = node
        .store()
        .write(move |tx| {
            let mut ids = Vec::with_capacity(THREADS);
            for t in 0..THREADS {
                let people: Vec<String> = (0..5)
                    .map(|k| fill_names[(t * 7 + k * 13) % BOTS].clone())
                    .chain(["ada".to_string()])
                    .collect();
                ids.push(
                    table::create_thread(
                        tx,
                        house_id,
                        Some(&format!("t{t:04}")),
                        &[],
                        "ada",
                        &people,
                    )?
                    .id,
                );
            }
            Ok(ids)
        })
        .await?;
    let words = Words::new(20_000);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let fill_started = Instant::now();
    let mut written = 0;
    while written < messages {
        let batch: Vec<(usize, String)> = (0..5_000.min(messages - written))
            .map(|_| (rng.below(THREADS), words.sentence(&mut rng, 12)))
            .collect();
        written += batch.len();
        let ids = threads.clone();
        node.store()
            .write(move |tx| {
                for (t, text) in &batch {
                    table::append_message(
                        tx,
                        ids[*t],
                        MsgId::new(),
                        "ada",
                        MemberKind::Human,
                        None,
                        text,
                    )?;
                }
                Ok(())
            })
            .await?;
    }
    let fill = fill_started.elapsed();

    // The tools, as a bot seated in thread 0 calls them.
    let mut ctx = ToolContext::standalone(node.home().clone(), home.path().to_path_buf());
    ctx.agent = names[0].clone();
    ctx.services
        .node()
        .set_houses(Houses(HouseDesk::new(&node)));
    ctx.services.set_seat(Seat {
        house: house_id,
        thread: threads[0],
    });
    let list = troupe_tools::house::list_threads::list_threads::tool();
    let read = troupe_tools::house::read_thread::read_thread::tool();
    let search = troupe_tools::house::search_threads::search_threads::tool();
    let mut listing = Vec::with_capacity(SAMPLES);
    let mut reading = Vec::with_capacity(SAMPLES);
    let mut searching = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let start = Instant::now();
        let r = list.call(json!({}), &ctx).await;
        listing.push(start.elapsed());
        anyhow::ensure!(!r.is_error(), "list_threads: {}", r.text);
        let thread = format!("t{:04}", (i * 37) % THREADS);
        let start = Instant::now();
        let r = read.call(json!({"ref": thread}), &ctx).await;
        reading.push(start.elapsed());
        anyhow::ensure!(!r.is_error(), "read_thread: {}", r.text);
        let query = format!("{} {}", words.middle(&mut rng), words.middle(&mut rng));
        let start = Instant::now();
        let r = search.call(json!({"query": query}), &ctx).await;
        searching.push(start.elapsed());
        anyhow::ensure!(!r.is_error(), "search_threads: {}", r.text);
    }
    runtime.shutdown().await;
    Ok(json!({
        "workload": "house",
        "bots": BOTS,
        "threads": THREADS,
        "messages": messages,
        "fill_messages_per_s": (messages as f64 / fill.as_secs_f64()).round(),
        "round_1_post_3_answers": percentiles(rounds),
        "post_to_thread_delivery": percentiles(delivery),
        "list_threads": percentiles(listing),
        "read_thread": percentiles(reading),
        "search_threads": percentiles(searching),
    }))
}

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

/// Generated words drawn with a Zipf-like spread (rank r weighs 1/r^1.05).
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new(n: usize) -> Self {
        let words = (0..n).map(|i| format!("w{i}")).collect();
        let mut total = 0.0;
        let cumulative = (1..=n)
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

    /// A word from the middle of the vocabulary (what people search for).
    fn middle(&self, rng: &mut Rng) -> &str {
        &self.words[100 + rng.below(2_000)]
    }

    fn sentence(&self, rng: &mut Rng, len: usize) -> String {
        let mut out = String::with_capacity(len * 6);
        for i in 0..len {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.draw(rng));
        }
        out
    }
}

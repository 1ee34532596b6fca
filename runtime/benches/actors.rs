//! Actor micro-benchmarks: local send rate, request/reply latency, spawn
//! time, activation through the router, and idle memory per live actor.
//!
//! Run: `cargo bench -p troupe-runtime --bench actors`
//! Prints one JSON line per measurement.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};
use troupe_runtime::router::{Activator, Router, RouterConfig};

/// The allocator the `troupe` binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

enum Msg {
    Tick,
    Done(u64, RpcReplyPort<u64>),
    Ping(RpcReplyPort<()>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for Msg {}

struct Bench;

struct Count {
    seen: u64,
    waiting: Option<(u64, RpcReplyPort<u64>)>,
}

impl Actor for Bench {
    type Msg = Msg;
    type State = Count;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Msg>, _: ()) -> Result<Count, ActorProcessingErr> {
        Ok(Count {
            seen: 0,
            waiting: None,
        })
    }

    async fn handle(
        &self,
        _: ActorRef<Msg>,
        msg: Msg,
        state: &mut Count,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Tick => state.seen += 1,
            Msg::Done(n, reply) => state.waiting = Some((n, reply)),
            Msg::Ping(reply) => {
                let _ = reply.send(());
            }
        }
        if let Some((n, _)) = &state.waiting {
            if state.seen >= *n {
                if let Some((_, reply)) = state.waiting.take() {
                    let _ = reply.send(state.seen);
                }
            }
        }
        Ok(())
    }
}

struct Spawner;

#[async_trait::async_trait]
impl Activator<u64, Msg> for Spawner {
    async fn activate(
        &self,
        _key: u64,
        supervisor: ActorCell,
    ) -> Result<ActorRef<Msg>, ActorProcessingErr> {
        Ok(Actor::spawn_linked(None, Bench, (), supervisor).await?.0)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

async fn local_send() {
    let (actor, _) = Actor::spawn(None, Bench, ()).await.unwrap();
    let n = 2_000_000u64;
    let start = Instant::now();
    for _ in 0..n {
        actor.send_message(Msg::Tick).unwrap();
    }
    let seen = ractor::call!(actor, Msg::Done, n).unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(seen, n);
    println!(
        r#"{{"bench":"local_send","messages":{n},"msgs_per_sec":{:.0},"target":2000000}}"#,
        n as f64 / secs
    );
    actor.stop(None);
}

async fn round_trip() {
    let (actor, _) = Actor::spawn(None, Bench, ()).await.unwrap();
    let n = 100_000;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        ractor::call!(actor, Msg::Ping).unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        r#"{{"bench":"request_reply","calls":{n},"p50_us":{:.2},"p99_us":{:.2},"target_p50_us":10}}"#,
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    actor.stop(None);
}

async fn spawn_time() {
    let n = 10_000;
    let mut times = Vec::with_capacity(n);
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let (actor, _) = Actor::spawn(None, Bench, ()).await.unwrap();
        times.push(start.elapsed());
        actors.push(actor);
    }
    times.sort();
    println!(
        r#"{{"bench":"spawn","actors":{n},"p50_us":{:.2},"p99_us":{:.2},"target_p50_us":10}}"#,
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    for actor in actors {
        actor.stop(None);
    }
}

async fn activation() {
    let config = RouterConfig {
        idle_after: None,
        ..RouterConfig::default()
    };
    let router = Router::start(Spawner, config).await.unwrap();
    let n = 5_000u64;
    let mut times = Vec::with_capacity(n as usize);
    for key in 0..n {
        let start = Instant::now();
        router
            .call(key, Msg::Ping, Duration::from_secs(5))
            .await
            .unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    let mut warm = Vec::with_capacity(n as usize);
    for key in 0..n {
        let start = Instant::now();
        router
            .call(key, Msg::Ping, Duration::from_secs(5))
            .await
            .unwrap();
        warm.push(start.elapsed());
    }
    warm.sort();
    println!(
        r#"{{"bench":"router_activation","keys":{n},"p50_us":{:.2},"p99_us":{:.2},"target_p50_us":1000}}"#,
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    println!(
        r#"{{"bench":"router_call_live","keys":{n},"p50_us":{:.2},"p99_us":{:.2}}}"#,
        percentile(&warm, 0.5),
        percentile(&warm, 0.99)
    );
    router.stop().await;
}

async fn idle_memory() {
    let n = 100_000;
    let before = rss_bytes();
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        actors.push(Actor::spawn(None, Bench, ()).await.unwrap().0);
    }
    let after = rss_bytes();
    println!(
        r#"{{"bench":"idle_memory","actors":{n},"bytes_per_actor":{},"target_bytes":16384}}"#,
        after.saturating_sub(before) / n as u64
    );
    for actor in actors {
        actor.stop(None);
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // Measured from a task of the runtime, as actors call each other; the
    // thread that called `block_on` is not one of its workers, so calls from
    // it would cross threads on every message.
    let measured = runtime.spawn(async {
        local_send().await;
        round_trip().await;
        spawn_time().await;
        activation().await;
        idle_memory().await;
    });
    runtime.block_on(measured).unwrap();
}

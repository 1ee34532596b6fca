//! The crash harness's child process: a node on the harness's home driving
//! the mixed workload until it is killed, or, when asked to settle, letting
//! what the crashes left finish and then stopping cleanly.
//!
//! Everything the parent checks afterwards is written before or after the
//! act it describes, never in between: a send is noted in `sent` before it
//! is made, and in `acks` only once troupe acknowledged it — a durable post
//! when `deliver` returned its id (committed), a user message when its turn
//! reported finished. A record a kill cut off is set aside when the next
//! worker starts ([`super::records`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use troupe_actors::kinds::Kind;
use troupe_actors::routine::{table, CatchUp, Clock, NewRoutine, VirtualClock};
use troupe_actors::toolset::Narrowing;
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{Address, Envelope, Payload, TurnOutcome};
use troupe_runtime::rusqlite::Connection;

use super::actors::Tally;
use super::model::{self, task, Ledger, PEER};
use super::records::{self, append_synced};
use super::{Files, Rng};
use crate::{BotSpec, Runtime};

/// How long a routine run's lease lasts: longer than any run, so only a
/// dead worker's runs expire.
const LEASE_SECS: i64 = 3600;

/// At most this many user turns waiting for their report at once.
const IN_FLIGHT: usize = 8;

/// How long settling may take before the worker gives up.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a worker's start may take before it says in its log where it
/// is: a start that never says `ready` prints nothing else, and the
/// harness gives up on it after a minute (seen rarely, cause unknown).
const SLOW_START: Duration = Duration::from_secs(20);

/// The steps of a worker's start, for its log when the start is slow.
const STARTING: [&str; 4] = [
    "building the runtime (opening the store, recovering)",
    "setting up its bots and conversations",
    "registering its actor kind",
    "ready",
];

/// Runs the worker on `home` until killed (or, with `settle`, until quiet).
pub async fn run(home: &Path, seed: u64, incarnation: u64, settle: bool) -> anyhow::Result<()> {
    let step = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watched = Arc::clone(&step);
    std::thread::spawn(move || {
        std::thread::sleep(SLOW_START);
        let at = watched.load(std::sync::atomic::Ordering::SeqCst);
        if at + 1 < STARTING.len() {
            eprintln!(
                "crash worker {incarnation}: not ready after {SLOW_START:?}, still {}",
                STARTING[at]
            );
        }
    });
    let next = |at: usize| step.store(at, std::sync::atomic::Ordering::SeqCst);
    let files = Files::new(home);
    std::fs::create_dir_all(&files.dir)?;
    // Before anything is written (a resumed turn may run a tool as soon as
    // the node starts): a record the last worker was killed inside of must
    // not swallow this worker's first one.
    for path in files.records() {
        records::seal(path)?;
    }
    let clock = Arc::new(VirtualClock::new(read_clock(&files.clock)));
    // Subscribed before the node starts: subagents resumed at recovery count.
    let bus = tokio::sync::broadcast::channel(1 << 16).0;
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if !settle && super::dies_at_subagent_end(incarnation) {
        tokio::spawn(die_at_subagent_end(bus.subscribe(), Arc::clone(&armed)));
    }
    let runtime = Runtime::builder()
        .event_bus(bus)
        .home(home)
        .cwd(&files.dir)
        .provider(Arc::new(model::provider()))
        .tool(Ledger::new(files.ledger.clone(), incarnation))
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .scheduler(true)
        .set("review.enabled", "false")
        .set("agent.timezone", "UTC")
        .set("messaging.loop_max_exchanges", "1000000")
        .set("delegation.max_concurrent_per_bot", "100000")
        .set("delegation.max_concurrent_per_node", "100000")
        .set("routines.lease_secs", LEASE_SECS.to_string())
        .set("routines.catch_up", "skip")
        .build()
        .await?;
    next(1);
    let conversations = setup(&runtime, &files, clock.now()).await?;
    next(2);
    let tally = super::actors::register(&runtime).await?;
    next(3);
    // The parent holds our stdin: when it goes away, so do we. A thread of
    // its own, not the runtime's blocking pool, which would wait for it.
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(3);
    });
    println!("ready");
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    if settle {
        let settled = settle_down(&runtime, &files, &clock).await;
        runtime.shutdown().await;
        return settled;
    }
    let mut rng = Rng::new(seed ^ incarnation.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // House file writes alongside the rest, so kills land inside them.
    tokio::try_join!(
        drive(
            &runtime,
            &tally,
            &files,
            &clock,
            &conversations,
            incarnation,
            &mut rng,
        ),
        super::files::drive(&runtime, &files, incarnation),
    )
    .map(drop)
}

/// Kills this worker (`abort`: no clean-up, like SIGKILL) the moment a
/// subagent's turn ends: its close is committed, and with it the end and,
/// for the last of a delegation, the report in the parent's mailbox; the
/// parent has not taken it yet. The next worker must deliver it once.
/// Only once `armed` (the worker said it is ready).
async fn die_at_subagent_end(
    mut events: tokio::sync::broadcast::Receiver<troupe_actors::events::NodeEvent>,
    armed: Arc<std::sync::atomic::AtomicBool>,
) {
    use troupe_runtime::protocol::AgentEvent;
    let mut subagents = std::collections::HashSet::new();
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        match &event.event {
            AgentEvent::ActorStarted { kind, .. } | AgentEvent::ActorRestarted { kind, .. }
                if kind == "subagent" =>
            {
                subagents.insert(event.conversation);
            }
            AgentEvent::TurnFinished { .. }
                if subagents.contains(&event.conversation)
                    && armed.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                eprintln!("crash worker: killing itself at a subagent's end");
                std::process::abort();
            }
            _ => {}
        }
    }
}

/// The bots, the conversations the workload uses, and the routine; made
/// once, found again after a restart.
async fn setup(
    runtime: &Runtime,
    files: &Files,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<ConversationId>> {
    let node = runtime.node();
    for (name, title) in [("alpha", "Alpha"), (PEER, "Beta")] {
        if node.bot(name).is_err() {
            node.create_bot(BotSpec::new(name, title, "Works for the crash harness."))
                .await?;
        }
    }
    if let Ok(text) = std::fs::read_to_string(&files.setup) {
        let ids: Result<Vec<ConversationId>, _> = text.split_whitespace().map(str::parse).collect();
        if let Ok(ids) = ids {
            if ids.len() == 3 {
                return Ok(ids);
            }
        }
    }
    let first = node.latest_conversation("alpha").await?;
    let second = node.new_conversation("alpha", Narrowing::default()).await?;
    let peer = node.latest_conversation(PEER).await?;
    let tz = troupe_actors::routine::run::user_tz(node);
    let schedule = troupe_actors::routine::parse("every 1m", now, tz)?;
    let created = node
        .store()
        .write(move |tx| {
            let new = NewRoutine {
                owner_bot: "alpha".into(),
                name: "tick".into(),
                prompt: "Record that the routine ran.".into(),
                schedule: schedule.clone(),
                catch_up: CatchUp::Skip,
            };
            match table::create(tx, new, now) {
                Ok(_) | Err(troupe_actors::routine::RoutineError::NameTaken { .. }) => Ok(()),
                Err(e) => Err(troupe_runtime::store::StoreError::Invalid(e.to_string())),
            }
        })
        .await;
    created?;
    house(runtime).await?;
    let ids = vec![first, second, peer];
    let text: Vec<String> = ids.iter().map(ToString::to_string).collect();
    std::fs::write(&files.setup, text.join(" "))?;
    Ok(ids)
}

/// The house: the person `ada` and both bots, listening to all, in the thread `room`.
async fn house(runtime: &Runtime) -> anyhow::Result<()> {
    if runtime.house(HOUSE).await.is_ok() {
        return Ok(());
    }
    let house = runtime.create_house(HOUSE).await?;
    house.add_human("ada", None).await?;
    for bot in ["alpha", PEER] {
        house
            .add_bot(bot, troupe_runtime::protocol::house::ListenMode::All)
            .await?;
    }
    let people = ["ada".to_string(), "alpha".into(), PEER.into()];
    house.create_thread(Some(ROOM), &[], "ada", &people).await?;
    Ok(())
}

/// The crash workload's house and thread.
pub const HOUSE: &str = "crash";
/// Its thread.
pub const ROOM: &str = "room";

/// The workload: user tasks, durable posts, house posts, durable sends to
/// the harness's actor kind and routine ticks, forever.
async fn drive(
    runtime: &Runtime,
    tally: &Kind<Tally>,
    files: &Files,
    clock: &Arc<VirtualClock>,
    conversations: &[ConversationId],
    incarnation: u64,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let alpha = &conversations[..2];
    for n in 0u64.. {
        let token = format!("i{incarnation}-{n}");
        let roll = rng.below(100);
        let (kind, conversation) = match roll {
            0..=29 => ("tool", conversations[rng.below(3) as usize]),
            30..=49 => ("msg", alpha[rng.below(2) as usize]),
            50..=64 => ("delegate", alpha[rng.below(2) as usize]),
            65..=79 => ("post", conversations[rng.below(3) as usize]),
            80..=89 => {
                thread_post(runtime, files, &token).await?;
                continue;
            }
            90..=94 => {
                super::actors::send(runtime, tally, files, &token, rng).await?;
                continue;
            }
            _ => {
                tick(runtime, files, clock).await?;
                continue;
            }
        };
        if kind == "post" {
            post(runtime, files, conversation, &token).await?;
            continue;
        }
        let permit = Arc::clone(&permits).acquire_owned().await?;
        append_synced(&files.sent, &format!("user\t{conversation}\t{token}\n"))?;
        let (_events, done) = runtime
            .node()
            .send(conversation, task(kind, &token))
            .await?;
        let acks = files.acks.clone();
        tokio::spawn(async move {
            let _permit = permit;
            if let Ok(report) = done.await {
                let line = match report.outcome {
                    TurnOutcome::Finished => format!("user\t{conversation}\t{token}\t-\n"),
                    other => format!("failed\t{conversation}\t{token}\t{other:?}\n"),
                };
                let _ = append_synced(&acks, &line);
            }
        });
    }
    Ok(())
}

/// A durable message from the user: acknowledged once committed.
async fn post(
    runtime: &Runtime,
    files: &Files,
    conversation: ConversationId,
    token: &str,
) -> anyhow::Result<()> {
    append_synced(&files.sent, &format!("post\t{conversation}\t{token}\n"))?;
    let envelope = Envelope {
        id: MsgId::new(),
        from: Address::Service("crash-harness".into()),
        to: Address::Conversation(conversation),
        body: Payload::Text {
            sender: "user".into(),
            text: task("tool", token),
            expects_reply: false,
        },
        sent_at: Utc::now(),
    };
    let id = runtime.node().deliver(envelope).await?;
    append_synced(
        &files.acks,
        &format!("post\t{conversation}\t{token}\t{id}\n"),
    )?;
    Ok(())
}

/// A person's post in the house's thread: acknowledged once committed.
async fn thread_post(runtime: &Runtime, files: &Files, token: &str) -> anyhow::Result<()> {
    append_synced(&files.sent, &format!("thread\t{ROOM}\t{token}\n"))?;
    let room = runtime.house(HOUSE).await?.thread(ROOM).await?;
    let id = room.post("ada", &model::thread_post(token)).await?;
    append_synced(&files.acks, &format!("thread\t{ROOM}\t{token}\t{id}\n"))?;
    Ok(())
}

/// Moves the routine clock on by `by` (one minute by default), saves it,
/// and lets the scheduler look.
async fn tick(runtime: &Runtime, files: &Files, clock: &VirtualClock) -> anyhow::Result<()> {
    advance(runtime, files, clock, TimeDelta::minutes(1)).await
}

async fn advance(
    runtime: &Runtime,
    files: &Files,
    clock: &VirtualClock,
    by: TimeDelta,
) -> anyhow::Result<()> {
    let now = clock.advance(by);
    // Written whole or not at all: a worker killed mid-write must not
    // leave the next one a clock that went back.
    let partial = files.clock.with_extension("partial");
    std::fs::write(&partial, now.to_rfc3339())?;
    std::fs::rename(&partial, &files.clock)?;
    if let Some(scheduler) = runtime.scheduler() {
        scheduler.tick().await?;
    }
    Ok(())
}

/// The clock saved by the last worker, or now.
fn read_clock(path: &PathBuf) -> DateTime<Utc> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| DateTime::parse_from_rfc3339(t.trim()).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(Utc::now)
}

/// Waits until nothing is left to do: first what the crashes left besides
/// routine runs; then, past the lease of a dead worker's runs, those too.
async fn settle_down(runtime: &Runtime, files: &Files, clock: &VirtualClock) -> anyhow::Result<()> {
    let holder = runtime
        .scheduler()
        .map(|s| s.holder().to_string())
        .unwrap_or_default();
    let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
    wait_quiet(runtime, Some(holder), deadline).await?;
    // Past the lease of every run a dead worker left.
    let leases = runtime
        .node()
        .store()
        .read(|c| {
            Ok(c.query_row(
                "SELECT max(lease_until) FROM routine_runs WHERE status IN ('claimed', 'running')",
                [],
                |r| r.get::<_, Option<String>>(0),
            ))
        })
        .await??;
    let until = leases
        .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| t.with_timezone(&Utc) - clock.now())
        .unwrap_or_default();
    let past_lease = until.max(TimeDelta::zero()) + TimeDelta::minutes(2);
    advance(runtime, files, clock, past_lease).await?;
    wait_quiet(runtime, None, deadline).await
}

/// Polls the store until it is quiet twice in a row; with `holder`, only
/// that scheduler's routine runs count.
async fn wait_quiet(
    runtime: &Runtime,
    holder: Option<String>,
    deadline: tokio::time::Instant,
) -> anyhow::Result<()> {
    let mut quiet_in_a_row = 0;
    loop {
        let holder = holder.clone();
        let busy = runtime
            .node()
            .store()
            .read(move |c| Ok(busy(c, holder.as_deref())))
            .await?;
        match busy {
            Ok(None) => quiet_in_a_row += 1,
            Ok(Some(_)) => quiet_in_a_row = 0,
            Err(e) => anyhow::bail!("the store could not be read: {e}"),
        }
        if quiet_in_a_row >= 2 {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let what = match busy {
                Ok(Some(what)) => what,
                _ => "unknown".into(),
            };
            anyhow::bail!("not quiet after {SETTLE_TIMEOUT:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What is still going on, if anything.
fn busy(
    c: &Connection,
    holder: Option<&str>,
) -> Result<Option<String>, troupe_runtime::rusqlite::Error> {
    let count = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0));
    let checks = [
        (
            "undelivered messages",
            "SELECT count(*) FROM mailbox WHERE consumed_at IS NULL",
        ),
        (
            "open turns",
            "SELECT count(*) FROM kv WHERE key LIKE 'open_turn:%'",
        ),
        (
            "running delegations",
            "SELECT count(*) FROM delegations WHERE status = 'running'",
        ),
        (
            "running subagents",
            "SELECT count(*) FROM subagents WHERE status = 'running'",
        ),
    ];
    for (what, sql) in checks {
        let n = count(sql)?;
        if n > 0 {
            return Ok(Some(format!("{n} {what}")));
        }
    }
    let runs = c.query_row(
        "SELECT count(*) FROM routine_runs WHERE status IN ('claimed', 'running') \
         AND (?1 IS NULL OR claimed_by = ?1)",
        [holder],
        |r| r.get::<_, i64>(0),
    )?;
    Ok((runs > 0).then(|| format!("{runs} routine runs")))
}

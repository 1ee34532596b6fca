//! `troupe bench crash --kills N`: the crash harness.
//!
//! troupe promises that a process killed at any moment loses nothing it
//! acknowledged and does nothing twice: durable messages are applied once,
//! a tool with side effects that was running is answered "outcome unknown"
//! rather than run again, a delegation reports once, a `message_agent`
//! gets one reply. Unit tests pin each of those down at chosen points; this
//! checks them at random ones, against the whole runtime.
//!
//! The parent re-executes this binary as a worker (`bench crash-worker`)
//! on one home. A worker drives a mixed workload — user turns whose tools
//! append to a ledger file, `message_agent` pings between two bots,
//! delegations to three subagents, durable posts, a routine firing on a
//! virtual clock, durable sends to an actor kind of the program's own
//! ([`actors`]), and back-to-back multi-file writes of house files
//! ([`files`]) — with a model that is a pure function of the request, so
//! any restart point is fine ([`model`]). The parent kills it with SIGKILL
//! a seeded random 5–200 ms after it says it is ready (every fourth worker
//! kills itself instead the moment a subagent's turn ends, between the
//! close that commits the report and the parent's taking it), starts the next one
//! on the same home (which recovers what the last one left), `N` times;
//! then a last worker runs until nothing is left to do and stops cleanly.
//! [`verify`] then reads the store and the files the workers wrote, and the
//! command prints one JSON line: every count whose key says `lost`, `dup`,
//! `twice`, `missing` or `mixed` must be 0, or the command exits non-zero.

mod actors;
mod files;
mod ledger;
mod model;
pub mod nodes;
mod records;
mod verify;
pub mod worker;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncBufReadExt;

/// How long a worker may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the last worker may take to settle and stop.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(240);

/// The files the harness keeps beside the store, in `<home>/crash-harness/`.
pub struct Files {
    /// The folder.
    pub dir: PathBuf,
    /// `ledger_append`'s lines: call id, conversation, note, worker.
    pub ledger: PathBuf,
    /// Every user message and post, noted before it is sent.
    pub sent: PathBuf,
    /// The acknowledged ones.
    pub acks: PathBuf,
    /// The routine clock of the last worker.
    pub clock: PathBuf,
    /// The conversations the workload uses.
    pub setup: PathBuf,
    /// The workers' stderr.
    pub log: PathBuf,
    /// The house file writes: noted before each, acknowledged with its version.
    pub file_writes: PathBuf,
}

impl Files {
    /// The files of `home`.
    pub fn new(home: &Path) -> Self {
        let dir = home.join("crash-harness");
        Self {
            ledger: dir.join("ledger"),
            sent: dir.join("sent"),
            acks: dir.join("acks"),
            clock: dir.join("clock"),
            setup: dir.join("setup"),
            log: dir.join("workers.log"),
            file_writes: dir.join("file-writes"),
            dir,
        }
    }

    /// The files workers append records to (see [`records`]).
    pub fn records(&self) -> [&Path; 4] {
        [&self.ledger, &self.sent, &self.acks, &self.file_writes]
    }
}

/// A small seeded generator (splitmix64): the same seed, the same kills.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// Runs the harness: `kills` kills on `home` (a new temp folder when
/// `None`, or when `home` is already used — the harness never runs on a
/// home with anything in it, `TROUPE_HOME` included), then the check.
/// Returns the JSON line.
pub async fn bench(
    home: Option<PathBuf>,
    kills: usize,
    seed: u64,
) -> anyhow::Result<serde_json::Value> {
    let temp = tempfile::tempdir()?;
    let home = match home {
        Some(home) if !is_used(&home) => home,
        Some(used) => {
            eprintln!(
                "troupe: {} is in use; the crash harness fills its home with test bots and kills \
                 processes on it, so it runs in a new folder, {}",
                used.display(),
                temp.path().display()
            );
            temp.path().to_path_buf()
        }
        None => temp.path().to_path_buf(),
    };
    let files = Files::new(&home);
    std::fs::create_dir_all(&files.dir)?;
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let mut at_subagent_end = 0;
    let on = crate::progress::wanted(false);
    let bar = crate::progress::bar(on, kills as u64, "killing the worker", false);
    for incarnation in 0..kills {
        let delay = Duration::from_millis(5 + rng.below(196));
        if kill_after_ready(&home, &files, seed, incarnation as u64, delay).await? {
            at_subagent_end += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let settled = crate::progress::during(
        on,
        "settling and checking",
        settle(&home, &files, seed, kills as u64),
    )
    .await;
    let mut line = verify::check(&home, &files)?;
    if let serde_json::Value::Object(map) = &mut line {
        map.insert("kills".into(), json!(kills));
        map.insert("subagent_end_kills".into(), json!(at_subagent_end));
        map.insert("seed".into(), json!(seed));
        map.insert(
            "quiescence_missing".into(),
            json!(u8::from(settled.is_err())),
        );
        if let Err(e) = settled {
            map.insert("settle_error".into(), json!(e.to_string()));
        }
        map.insert(
            "seconds".into(),
            json!((started.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        );
    }
    Ok(line)
}

/// Whether every count that must be zero is: keys with `lost`, `dup`,
/// `twice`, `missing` or `mixed`, and `integrity` is `ok`.
pub fn passed(line: &serde_json::Value) -> bool {
    let Some(map) = line.as_object() else {
        return true;
    };
    let gated = |key: &str| {
        ["lost", "dup", "twice", "missing", "mixed"]
            .iter()
            .any(|w| key.contains(w))
    };
    let counts_ok = map
        .iter()
        .filter(|(key, _)| gated(key))
        .all(|(_, value)| value.as_f64().is_none_or(|n| n == 0.0));
    let integrity_ok = map
        .get("integrity")
        .is_none_or(|v| v.as_str() == Some("ok"));
    counts_ok && integrity_ok
}

/// Whether `home` has anything in it (the harness fills its home with
/// test bots, so it never runs on a used one).
fn is_used(home: &Path) -> bool {
    std::fs::read_dir(home)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false)
}

/// Starts a worker; its stdout is piped, its stderr appended to the log.
fn spawn(
    home: &Path,
    files: &Files,
    seed: u64,
    incarnation: u64,
    settle: bool,
) -> anyhow::Result<tokio::process::Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&files.log)?;
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command
        .arg("--home")
        .arg(home)
        .args(["bench", "crash-worker", "--seed", &seed.to_string()])
        .args(["--incarnation", &incarnation.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true);
    if settle {
        command.arg("--settle");
    }
    Ok(command.spawn()?)
}

/// The lines a worker prints; kept open while it runs, so its prints never
/// fail on a closed pipe.
type Output = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// Waits for `child` to print `ready`.
async fn ready(child: &mut tokio::process::Child, files: &Files) -> anyhow::Result<Output> {
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("the worker has no stdout"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let wait = async {
        while let Some(line) = lines.next_line().await? {
            if line == "ready" {
                return Ok(());
            }
        }
        anyhow::bail!(
            "a worker exited before it was ready; its errors are in {}",
            files.log.display()
        )
    };
    tokio::time::timeout(READY_TIMEOUT, wait)
        .await
        .map_err(|_| anyhow::anyhow!("a worker was not ready within {READY_TIMEOUT:?}"))??;
    Ok(lines)
}

/// Whether worker `incarnation` kills itself the moment a subagent's turn
/// ends (between the commit closing it and the parent's taking the
/// report) rather than being killed at a random time: every fourth.
pub(crate) fn dies_at_subagent_end(incarnation: u64) -> bool {
    incarnation % 4 == 3
}

/// How long a worker that kills itself at a subagent's end has to get
/// there before it is killed like the others.
const SELF_KILL_WAIT: Duration = Duration::from_secs(10);

/// One worker, killed with SIGKILL `delay` after it is ready (or, every
/// fourth, killing itself at a subagent's end: `true` when it did).
async fn kill_after_ready(
    home: &Path,
    files: &Files,
    seed: u64,
    incarnation: u64,
    delay: Duration,
) -> anyhow::Result<bool> {
    let mut child = spawn(home, files, seed, incarnation, false)?;
    // `wait` closes a stdin left in the child: keep it open here.
    let _stdin = child.stdin.take();
    let _output = ready(&mut child, files).await?;
    let itself = dies_at_subagent_end(incarnation);
    let wait = if itself { SELF_KILL_WAIT } else { delay };
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        status = child.wait() => {
            let status = status?;
            // SIGABRT: it killed itself, as asked, at a subagent's end.
            if itself && std::os::unix::process::ExitStatusExt::signal(&status) == Some(6) {
                return Ok(true);
            }
            anyhow::bail!(
                "worker {incarnation} exited by itself ({status}); its errors are in {}",
                files.log.display()
            )
        }
    }
    child.start_kill()?;
    child.wait().await?;
    Ok(false)
}

/// The last worker: recovers, lets everything finish, stops cleanly.
async fn settle(home: &Path, files: &Files, seed: u64, incarnation: u64) -> anyhow::Result<()> {
    let mut child = spawn(home, files, seed, incarnation, true)?;
    // `wait` closes a stdin left in the child: keep it open here.
    let _stdin = child.stdin.take();
    let _output = ready(&mut child, files).await?;
    let status = tokio::time::timeout(SETTLE_TIMEOUT, child.wait())
        .await
        .map_err(|_| {
            anyhow::anyhow!("the last worker did not settle within {SETTLE_TIMEOUT:?}")
        })??;
    anyhow::ensure!(
        status.success(),
        "the last worker did not settle ({status}); its errors are in {}",
        files.log.display()
    );
    Ok(())
}

//! One command's run in an environment: started in the sandbox's process
//! (or on the machine, for an unsandboxed environment), recorded `running`
//! first, its output kept within bounds, its time and disk quota watched,
//! and its end (or its loss, when the sandbox died under it) recorded.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use troupe_runtime::environment::CommandOutcome;
use troupe_runtime::id::EnvironmentId;
use troupe_runtime::sandbox::cgroup::Cgroup;
use troupe_runtime::sandbox::zygote::{Exit, Zygote};
use troupe_runtime::store::environments as table;
use troupe_tools::run_command::output::BoundedOutput;

use super::{Order, Place, Watch, ZygoteSlot};
use crate::environment::quota::{self, Quota};
use crate::node::WeakNode;

/// Output bytes kept from a command's start and from its end.
const KEPT: usize = 15_000;

/// Where a command runs: its environment and what the actor holds for it.
pub(super) struct Spot<'a> {
    pub(super) node: &'a WeakNode,
    pub(super) id: EnvironmentId,
    pub(super) workdir: &'a Path,
    pub(super) place: &'a Place,
    pub(super) zygote: &'a ZygoteSlot,
    pub(super) quota: Quota,
    pub(super) group: Option<&'a Cgroup>,
    pub(super) house: &'a str,
}

/// A command started: in the sandbox's process, or on the machine (an
/// unsandboxed environment).
enum Job {
    Jailed {
        zygote: Arc<Zygote>,
        id: u64,
        ended: tokio::sync::oneshot::Receiver<Exit>,
    },
    Host(tokio::process::Child),
}

/// How a job ended, or that its outcome is lost.
enum Ended {
    As(String),
    Lost,
}

impl Job {
    async fn wait(&mut self) -> Ended {
        match self {
            Job::Jailed { ended, .. } => match ended.await {
                Ok(Exit::Code(code)) => Ended::As(format!("[exit {code}]")),
                Ok(Exit::Signal(9)) => Ended::As(
                    "[killed by signal 9: a limit was reached (memory, or stopped)]".into(),
                ),
                Ok(Exit::Signal(signal)) => Ended::As(format!("[killed by signal {signal}]")),
                Ok(Exit::Failed(why)) => Ended::As(format!("[did not start: {why}]")),
                Err(_) => Ended::Lost,
            },
            Job::Host(child) => Ended::As(match child.wait().await {
                Ok(status) => ending_of(status),
                Err(e) => format!("[lost: {e}]"),
            }),
        }
    }

    async fn kill(&self) {
        match self {
            Job::Jailed { zygote, id, .. } => zygote.kill(*id).await,
            Job::Host(child) => kill_group(child.id()),
        }
    }
}

pub(super) async fn run(
    spot: &Spot<'_>,
    call: &str,
    order: &Order,
) -> Result<CommandOutcome, String> {
    let (id, workdir) = (spot.id, spot.workdir);
    let (command, timeout, watch) = (order.command.as_str(), order.timeout, order.watch.as_ref());
    let ctx = spot.node.upgrade().ok_or("the node is stopping")?;
    let dir = workdir.to_path_buf();
    let used = tokio::task::spawn_blocking(move || quota::usage(&dir))
        .await
        .unwrap_or_default();
    // Freeing space, a command may not make the workdir grow; otherwise it
    // may not start over the quota.
    let held_to = match (spot.quota.passed(used), order.free_space) {
        (Some(passed), false) => {
            return Err(quota::refusal(
                &passed,
                spot.house,
                &id.to_string(),
                workdir,
            ))
        }
        (_, true) => spot.quota.at_least(used),
        (None, false) => spot.quota,
    };
    let (owned_call, owned_command) = (call.to_string(), command.to_string());
    ctx.store()
        .write(move |tx| table::command_started(tx, &owned_call, id, &owned_command))
        .await
        .map_err(|e| e.to_string())?;
    drop(ctx);
    let started = Instant::now();
    let outcome = match supervise(spot, held_to, command, timeout, started, watch).await {
        Ok(outcome) => outcome,
        Err(failure) => {
            // Its sandbox died under it: lost, never run again. (One that
            // did not start ended without an exit code.)
            if let Some(ctx) = spot.node.upgrade() {
                let owned = call.to_string();
                let lost = matches!(failure, Failure::Lost(_));
                let _ = ctx
                    .store()
                    .write(move |tx| {
                        if lost {
                            table::command_lost(tx, &owned)
                        } else {
                            table::command_ended(tx, &owned, None)
                        }
                    })
                    .await;
            }
            return Err(match failure {
                Failure::Lost(why) | Failure::NotStarted(why) => why,
            });
        }
    };
    if let Some(ctx) = spot.node.upgrade() {
        let owned = call.to_string();
        let code = outcome.exit_code;
        let _ = ctx
            .store()
            .write(move |tx| table::command_ended(tx, &owned, code))
            .await;
    }
    Ok(outcome)
}

/// Why a command has no outcome.
enum Failure {
    /// It did not start.
    NotStarted(String),
    /// Its sandbox died while it ran.
    Lost(String),
}

/// Starts the command, watches its wall time and the workdir's quota,
/// gathers its output.
async fn supervise(
    spot: &Spot<'_>,
    quota: Quota,
    command: &str,
    timeout: Duration,
    started: Instant,
    watch: Option<&Watch>,
) -> Result<CommandOutcome, Failure> {
    let cancel = watch.map(|w| w.cancel.clone()).unwrap_or_default();
    let not_started = |e: String| Failure::NotStarted(e);
    let workdir = spot.workdir;
    let oom_kills = || spot.group.and_then(Cgroup::oom_kills);
    let oom_before = oom_kills();
    let (sender, mut pipe) =
        tokio::net::unix::pipe::pipe().map_err(|e| not_started(e.to_string()))?;
    let out = sender
        .into_blocking_fd()
        .map_err(|e| not_started(e.to_string()))?;
    let mut job = match spot.place {
        Place::Jailed(sandbox, jail, serve) => {
            let zygote = spot
                .zygote
                .get(sandbox, jail, serve.clone())
                .await
                .map_err(not_started)?;
            let started = zygote.run(command, out).await.map_err(not_started)?;
            Job::Jailed {
                zygote,
                id: started.id,
                ended: started.ended,
            }
        }
        Place::Unsandboxed => {
            let err = out.try_clone().map_err(|e| not_started(e.to_string()))?;
            let mut c = tokio::process::Command::new("bash");
            c.arg("-c")
                .arg(command)
                .env_clear()
                .envs(troupe_runtime::sandbox::jail::environment())
                .env("HOME", workdir)
                .current_dir(workdir)
                .stdin(Stdio::null())
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err))
                .process_group(0)
                .kill_on_drop(true);
            let child = c
                .spawn()
                .map_err(|e| not_started(format!("the command could not start: {e}")))?;
            Job::Host(child)
        }
    };
    let mut output = BoundedOutput::new(KEPT, KEPT);
    let mut buf = vec![0_u8; 64 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut quota_check = tokio::time::interval(Duration::from_millis(250));
    quota_check.reset();
    let mut pipe_open = true;
    let mut cut: Option<String> = None;
    let ended = loop {
        tokio::select! {
            read = pipe.read(&mut buf), if pipe_open => match read {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => {
                    output.push(&buf[..n]);
                    if let Some(w) = watch {
                        let _ = w.tap.send(bytes::Bytes::copy_from_slice(&buf[..n]));
                    }
                }
            },
            ended = job.wait() => break ended,
            () = cancel.cancelled(), if cut.is_none() => {
                job.kill().await;
                cut = Some("[killed: stopped]".into());
            }
            () = &mut deadline, if cut.is_none() => {
                job.kill().await;
                cut = Some(format!("[killed: timeout after {} s]", timeout.as_secs()));
            }
            _ = quota_check.tick(), if cut.is_none() => {
                let dir = workdir.to_path_buf();
                let used = tokio::task::spawn_blocking(move || quota::usage(&dir))
                    .await
                    .unwrap_or_default();
                if quota.passed(used).is_some() {
                    job.kill().await;
                    cut = Some(quota.ending(used));
                }
            }
        }
    };
    let ending = match (ended, cut) {
        (Ended::Lost, _) => {
            return Err(Failure::Lost(format!(
                "the command's outcome is lost: environment {}'s sandbox process ended while it \
                 ran (its processes were killed). It was not run again; run it again if it is \
                 safe to",
                spot.id
            )))
        }
        (Ended::As(_), Some(cut)) => cut,
        (Ended::As(ending), None) if ending.starts_with("[killed by signal 9") => {
            match (oom_before, oom_kills()) {
                (Some(before), Some(after)) if after > before => {
                    "[killed by signal 9: the environment's memory limit was reached — by this \
                     command's memory, or by the kernel's for the files it made (each costs \
                     some); the environment's other commands run on]"
                        .to_string()
                }
                _ => ending,
            }
        }
        (Ended::As(ending), None) => ending,
    };
    // The command has ended, and what it left running was killed: the
    // pipe closes soon.
    let drain_until = tokio::time::Instant::now() + Duration::from_secs(1);
    while pipe_open && tokio::time::Instant::now() < drain_until {
        match tokio::time::timeout(Duration::from_millis(200), pipe.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {
                output.push(&buf[..n]);
                if let Some(w) = watch {
                    let _ = w.tap.send(bytes::Bytes::copy_from_slice(&buf[..n]));
                }
            }
            _ => pipe_open = false,
        }
    }
    output.finish();
    let exit_code = ending
        .strip_prefix("[exit ")
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|n| n.parse().ok());
    Ok(CommandOutcome {
        environment: spot.id,
        exit_code,
        ending,
        output: output.text(),
        output_bytes: output.total(),
        sandboxed: matches!(spot.place, Place::Jailed(..)),
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

fn ending_of(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("[exit {code}]"),
        (None, Some(9)) => "[killed by signal 9: a limit was reached (memory, or stopped)]".into(),
        (None, Some(signal)) => format!("[killed by signal {signal}]"),
        (None, None) => "[exit -1]".into(),
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

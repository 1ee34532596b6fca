//! Tying a child's life to troupe's: when troupe dies, what it started dies.
//!
//! A command left running after troupe is killed still has its effect, and
//! the restarted conversation can only answer "outcome unknown" about a call
//! that in fact ran on; an MCP server's helpers would run on with no one to
//! stop them. So a started process group — a command of `run_command`, a
//! stdio MCP server — dies with troupe,
//! by two means, because each covers what the other cannot:
//!
//! - **the parent-death signal.** The shell is started with
//!   `PR_SET_PDEATHSIG` = SIGKILL (kept across `exec`), so it dies the
//!   moment troupe does. The kernel sends it when the *thread* that forked
//!   the child exits, not the process: a tokio worker may retire (after
//!   `block_in_place`, or a blocking-pool thread after idling), and would
//!   take its commands with it. So every command is forked from one
//!   dedicated thread that lives as long as the process ([`start`]).
//! - **a watchdog in the group.** The signal is not inherited by the
//!   shell's own children (`make`'s compilers, a `sleep &`). Beside the
//!   shell, in its process group, runs a tiny `sh` that waits on a pipe whose
//!   only writer is troupe. When troupe dies for any reason, SIGKILL
//!   included, the kernel closes the pipe, the watchdog reads end-of-file
//!   and kills its whole group. When the shell ends normally, troupe kills
//!   the watchdog alone, so what the command deliberately left running
//!   (`nohup server &`) behaves as before.
//!
//! Its owner still kills the group on a timeout or a stop as before.

use std::io;
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::OnceLock;

use tokio::process::{Child, ChildStdin, Command};
use tokio::runtime::Handle;

/// A started command: its shell, its process group and its watchdog.
pub struct Running {
    /// The shell, leader of its own process group.
    pub child: Child,
    /// The group's id (the shell's pid), when known.
    pub pgid: Option<u32>,
    /// Kills the group if troupe dies; dismissed when dropped.
    pub watchdog: Option<Watchdog>,
}

/// The watchdog of one command's group. Dropping it kills the watchdog
/// alone (first) and then closes its pipe, so the group lives on.
pub struct Watchdog {
    child: Child,
    _pipe: ChildStdin,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Killed before its pipe closes (the fields drop after this), so it
        // never sees the end-of-file that would kill the group.
        let _ = self.child.start_kill();
    }
}

/// What the spawning thread is asked to do.
struct Request {
    command: Command,
    handle: Handle,
    reply: mpsc::SyncSender<io::Result<Child>>,
}

/// Starts `command`, the leader of a process group of its own
/// (`process_group(0)`), so that it dies with troupe: forked from the long-lived spawning thread with the parent-death
/// signal set, then watched from inside its group. Must be called within a
/// tokio runtime.
pub fn start(mut command: Command) -> io::Result<Running> {
    set_parent_death_signal(&mut command);
    let handle = Handle::try_current().map_err(io::Error::other)?;
    let child = match spawner() {
        Some(sender) => {
            let (reply, answer) = mpsc::sync_channel(1);
            sender
                .send(Request {
                    command,
                    handle,
                    reply,
                })
                .map_err(|_| io::Error::other("troupe's command-spawning thread has stopped"))?;
            // A fork and an exec: milliseconds, as `spawn` itself blocks.
            answer
                .recv()
                .map_err(|_| io::Error::other("troupe's command-spawning thread has stopped"))??
        }
        None => command.spawn()?,
    };
    let pgid = child.id();
    let watchdog = pgid.and_then(|pgid| match watch(pgid) {
        Ok(watchdog) => Some(watchdog),
        Err(e) => {
            // The command may have ended already; its group is gone then.
            tracing::debug!(pgid, error = %e, "no watchdog for a command's group");
            None
        }
    });
    Ok(Running {
        child,
        pgid,
        watchdog,
    })
}

/// The thread every command is forked from, started on first use; `None`
/// when no thread can be started (commands then fork from the caller's).
fn spawner() -> Option<&'static mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (sender, requests) = mpsc::channel::<Request>();
            let started = std::thread::Builder::new()
                .name("troupe-command-spawner".into())
                .spawn(move || {
                    for mut request in requests {
                        let _runtime = request.handle.enter();
                        let spawned = request.command.spawn();
                        // The command (and the pipe ends it holds) goes now.
                        drop(request.command);
                        let _ = request.reply.send(spawned);
                    }
                });
            match started {
                Ok(_) => Some(sender),
                Err(e) => {
                    tracing::warn!(error = %e, "no command-spawning thread: commands fork from tokio's threads");
                    None
                }
            }
        })
        .as_ref()
}

/// Starts the watchdog of group `pgid`: `sh` waiting for end-of-file on a
/// pipe only troupe writes, then killing its group.
fn watch(pgid: u32) -> io::Result<Watchdog> {
    let group = i32::try_from(pgid).map_err(io::Error::other)?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("read _ignored; kill -9 0")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(group)
        .kill_on_drop(true)
        .spawn()?;
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("the watchdog has no input pipe"))?;
    Ok(Watchdog { child, _pipe: pipe })
}

/// Asks the kernel to SIGKILL the command when its parent goes, and refuses
/// to start it if troupe is already gone.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_parent_death_signal(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // two system calls through rustix (no allocation, no locks), which is
    // what `pre_exec` requires.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(|e| io::Error::from_raw_os_error(e.raw_os_error()))?;
            // Troupe died between the fork and the call: die now.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere there is no parent-death signal; the watchdog still holds.
#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}

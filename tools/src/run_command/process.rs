//! Starting a shell command in its own process group, and ending its tree.
//!
//! Killing only the shell leaves its children running (`make` under `bash
//! -c`, a `sleep &`), holding the output pipe open and the machine busy. The
//! shell is started as the leader of a new process group, so a timeout or a
//! stop signals the whole group: SIGTERM first, SIGKILL after a grace period.
//!
//! In a sandbox the group holds `bwrap` (and its process inside the new PID
//! namespace); signalling the group ends `bwrap`, and `--die-with-parent`
//! plus the namespace's end take everything inside with it.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};
use tokio::process::{Child, Command};
use troupe_runtime::sandbox::{network, proxy, Confinement, Network, Sandbox};

/// How long a process group is given to end after SIGTERM.
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// How a command ended, as the last line of its output says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exit(i32),
    /// A signal from elsewhere ended it.
    Signal(i32),
    /// Its timeout ran out and its tree was killed.
    Timeout(Duration),
    /// `stop` ended it.
    Stopped,
    /// The turn was stopped, and it with it.
    TurnStopped,
}

impl Ending {
    /// The ending of an exit status.
    pub fn of(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Self::Exit(code),
            (None, Some(signal)) => Self::Signal(signal),
            (None, None) => Self::Exit(-1),
        }
    }

    /// Whether the command succeeded.
    pub fn success(&self) -> bool {
        *self == Self::Exit(0)
    }

    /// The exit code, when it exited.
    pub fn code(&self) -> Option<i32> {
        match self {
            Self::Exit(code) => Some(*code),
            _ => None,
        }
    }
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exit(code) => write!(f, "[exit {code}]"),
            Self::Signal(signal) => write!(f, "[killed by signal {signal}]"),
            Self::Timeout(after) => write!(f, "[killed: timeout after {} s]", after.as_secs()),
            Self::Stopped => write!(f, "[stopped]"),
            Self::TurnStopped => write!(f, "[stopped: the turn was stopped]"),
        }
    }
}

/// A `bash -c` command in `cwd` — inside `sandbox` with its confinement
/// when given — with standard input closed, pagers and colors off, leading
/// a new process group. Output is set by the caller. In a joined network,
/// `allow` (`[sandbox] allow_addresses`) is reached through the proxy even
/// when it is a loopback address.
pub fn shell(
    command: &str,
    cwd: &Path,
    sandbox: Option<(&Sandbox, &Confinement)>,
    allow: &[std::net::IpAddr],
) -> Command {
    let mut cmd = match sandbox {
        Some((sandbox, confinement)) => {
            let mut cmd = Command::from(sandbox.command("bash", ["-c", command], cwd, confinement));
            if matches!(confinement.network, Network::Joined(_)) {
                cmd.envs(proxy::environment(network::PORT, allow));
            }
            cmd
        }
        None => {
            let mut cmd = Command::new("bash");
            cmd.arg("-c").arg(command).current_dir(cwd);
            cmd
        }
    };
    cmd.stdin(Stdio::null())
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("NO_COLOR", "1")
        .env("TERM", "dumb")
        .process_group(0);
    cmd
}

/// Sends `signal` to every process of the group `pgid`; a group already
/// gone is not an error.
pub fn signal_group(pgid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    if let Err(e) = kill_process_group(pid, signal) {
        if e != rustix::io::Errno::SRCH {
            tracing::warn!(pgid, error = %e, "could not signal a command's process group");
        }
    }
}

/// Ends the tree of `child` (leader of group `pgid`): SIGTERM, up to
/// [`TERM_GRACE`] for the shell to exit, then SIGKILL for whatever is left.
pub async fn end_tree(child: &mut Child, pgid: Option<u32>) {
    let Some(pgid) = pgid else {
        let _ = child.kill().await;
        return;
    };
    signal_group(pgid, Signal::TERM);
    let _ = tokio::time::timeout(TERM_GRACE, child.wait()).await;
    // The group id stays reserved while any member lives, so this reaches
    // only the command's own stragglers.
    signal_group(pgid, Signal::KILL);
    let _ = child.wait().await;
}

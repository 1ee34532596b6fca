//! The client side of an environment's long-lived process (the helper's
//! [`init`](super::helper) step): start it in its jail, hand it commands,
//! learn how they ended.
//!
//! [`Zygote::start`] runs `bwrap` once with the helper as its process 1 and
//! waits for it to say it is confined ([`Report::Ready`]) — or for the line
//! saying what could not be applied. [`Zygote::run`] sends a command with
//! the write end of its output pipe attached; [`Job::ended`] answers with
//! its exit. When the process dies (killed, crashed, or stopped with the
//! zygote) every job still running learns it as a closed channel: their
//! outcome is lost, and nothing runs them again.
//!
//! The control socket is a `SOCK_SEQPACKET` pair, the sandbox's end on its
//! standard input: one JSON record per message, never split or merged, a
//! descriptor riding with the record it belongs to.

use std::collections::HashMap;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::UnixDatagram;
use tokio::sync::oneshot;

use super::jail::Jail;
use super::Sandbox;

/// The largest request, in bytes (a command longer than this is refused).
pub const MAX_REQUEST: usize = 128 * 1024;

/// How long the sandbox may take to start.
const START: Duration = Duration::from_secs(20);

/// What the actor asks of the environment's process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Runs `bash -c command`, its output on the attached pipe.
    Run {
        /// The job's number.
        id: u64,
        /// The command.
        command: String,
    },
    /// Kills the job's command (its session and what it left running).
    Kill {
        /// The job's number.
        id: u64,
    },
}

/// What the environment's process tells the actor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// Confined, taking commands.
    Ready,
    /// A job's command ended, and what it left running was killed.
    Ended {
        /// The job's number.
        id: u64,
        /// Its exit code, when it exited.
        code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
    },
    /// A connection to `127.0.0.1:port` inside the sandbox, attached:
    /// the actor serves it.
    Connection {
        /// The port it came to.
        port: u16,
    },
    /// A job's command could not start.
    Failed {
        /// The job's number.
        id: u64,
        /// Why.
        why: String,
    },
}

/// How a job's command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It could not start.
    Failed(String),
}

/// Sends `message` as one record on `socket`, with `fd` attached.
///
/// # Errors
///
/// What the socket said (`WouldBlock` on a full non-blocking socket).
pub fn send_record<T: Serialize>(
    socket: impl AsFd,
    message: &T,
    fd: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Some(fd) = fd {
        fds = [fd];
        ancillary.push(SendAncillaryMessage::ScmRights(&fds));
    }
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&bytes)],
        &mut ancillary,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

type Waiters = Arc<parking_lot::Mutex<HashMap<u64, oneshot::Sender<Exit>>>>;

/// Serves a connection made inside the sandbox to `127.0.0.1:port`: the
/// port, the connection, and a token cancelled when the sandbox stops
/// (what serves it ends then).
pub type OnConnection =
    Arc<dyn Fn(u16, std::net::TcpStream, tokio_util::sync::CancellationToken) + Send + Sync>;

/// An environment's long-lived process, started in its jail. Dropping it
/// kills the sandbox and everything in it.
pub struct Zygote {
    control: Arc<UnixDatagram>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    next: AtomicU64,
    pid: Option<u32>,
    _child: tokio::process::Child,
    reader: tokio::task::JoinHandle<()>,
    stopped: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Zygote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zygote")
            .field("pid", &self.pid)
            .field("alive", &self.alive())
            .finish_non_exhaustive()
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        self.reader.abort();
        self.stopped.cancel();
    }
}

/// A command handed to a [`Zygote`].
#[derive(Debug)]
pub struct Job {
    /// Its number, for [`Zygote::kill`].
    pub id: u64,
    /// How it ended; closed when the environment's process died first.
    pub ended: oneshot::Receiver<Exit>,
}

impl Zygote {
    /// Starts the environment's process in `jail` and waits until it is
    /// confined. Connections made inside to the ports the jail listens on
    /// go to `on_connection`.
    ///
    /// # Errors
    ///
    /// What could not be started or applied, in the helper's words.
    pub async fn start(
        sandbox: &Sandbox,
        jail: &Jail,
        on_connection: Option<OnConnection>,
    ) -> Result<Zygote, String> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("the sandbox's control socket could not be made: {e}"))?;
        rustix::io::ioctl_fionbio(&ours, true)
            .map_err(|e| format!("the sandbox's control socket could not be made: {e}"))?;
        // A datagram socket's calls are a sequenced-packet socket's too:
        // tokio watches it as one.
        let control = Arc::new(
            UnixDatagram::from_std(std::os::unix::net::UnixDatagram::from(ours))
                .map_err(|e| format!("the sandbox's control socket could not be watched: {e}"))?,
        );
        let mut command = tokio::process::Command::from(sandbox.zygote(jail));
        command
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("the sandbox could not be started: {e}"))?;
        let mut stderr = child.stderr.take();
        let first = tokio::time::timeout(START, receive(&control)).await;
        match first {
            Ok(Ok(Some((Report::Ready, _)))) => {}
            Ok(Ok(other)) => {
                let _ = child.start_kill();
                let mut said = String::new();
                if let Some(stderr) = stderr.as_mut() {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        stderr.take(16 * 1024).read_to_string(&mut said),
                    )
                    .await;
                }
                let said = said.trim();
                return Err(match other {
                    None if said.is_empty() => {
                        "the sandbox ended before it was ready, saying nothing".to_string()
                    }
                    None => said.to_string(),
                    Some((report, _)) => {
                        format!("the sandbox answered {report:?} before it was ready")
                    }
                });
            }
            Ok(Err(e)) => return Err(format!("the sandbox's control socket failed: {e}")),
            Err(_) => {
                return Err(format!(
                    "the sandbox was not ready after {} s",
                    START.as_secs()
                ))
            }
        }
        let waiters: Waiters = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let stopped = tokio_util::sync::CancellationToken::new();
        let reader = tokio::spawn(read_reports(
            Arc::clone(&control),
            Arc::clone(&waiters),
            Arc::clone(&alive),
            stderr,
            on_connection.map(|serve| (serve, stopped.clone())),
        ));
        Ok(Zygote {
            control,
            waiters,
            alive,
            next: AtomicU64::new(1),
            pid: child.id(),
            _child: child,
            reader,
            stopped,
        })
    }

    /// Whether its process still takes commands.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The process id of its `bwrap` on the machine.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Runs `command` with its output (standard output and error) on
    /// `output`, the write end of a pipe.
    ///
    /// # Errors
    ///
    /// The command is too long, or the process is gone.
    pub async fn run(&self, command: &str, output: OwnedFd) -> Result<Job, String> {
        if command.len() > MAX_REQUEST - 1024 {
            return Err(format!(
                "the command is {} bytes; at most {} fit (write a script to the workdir and run \
                 that instead)",
                command.len(),
                MAX_REQUEST - 1024
            ));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, ended) = oneshot::channel();
        self.waiters.lock().insert(id, sender);
        let request = Request::Run {
            id,
            command: command.to_string(),
        };
        if let Err(e) = self.send(&request, Some(output.as_fd())).await {
            self.waiters.lock().remove(&id);
            return Err(format!("the environment's process is gone: {e}"));
        }
        if !self.alive() {
            // The reader may have closed the waiters before this one went in.
            self.waiters.lock().remove(&id);
        }
        Ok(Job { id, ended })
    }

    /// Kills job `id`'s command and what it started.
    pub async fn kill(&self, id: u64) {
        let _ = self.send(&Request::Kill { id }, None).await;
    }

    async fn send(&self, request: &Request, fd: Option<BorrowedFd<'_>>) -> std::io::Result<()> {
        let control = &self.control;
        control
            .async_io(Interest::WRITABLE, || {
                send_record(control.as_ref(), request, fd)
            })
            .await
    }
}

/// One report with the descriptor that came with it, or `None` when the
/// socket has closed.
async fn receive(control: &UnixDatagram) -> std::io::Result<Option<(Report, Option<OwnedFd>)>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut buf = vec![0_u8; 64 * 1024];
    let (n, fd) = control
        .async_io(Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut ancillary = RecvAncillaryBuffer::new(&mut space);
            let received = rustix::net::recvmsg(
                control,
                &mut [std::io::IoSliceMut::new(&mut buf)],
                &mut ancillary,
                RecvFlags::CMSG_CLOEXEC,
            )?;
            let mut fd = None;
            for message in ancillary.drain() {
                if let RecvAncillaryMessage::ScmRights(mut rights) = message {
                    fd = rights.next();
                }
            }
            Ok((received.bytes, fd))
        })
        .await?;
    if n == 0 {
        return Ok(None);
    }
    serde_json::from_slice(&buf[..n])
        .map(|report| Some((report, fd)))
        .map_err(std::io::Error::other)
}

/// Hands each ended job its exit; when the process dies, closes every
/// waiting job's channel (their outcome is lost).
async fn read_reports(
    control: Arc<UnixDatagram>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    stderr: Option<tokio::process::ChildStderr>,
    serve: Option<(OnConnection, tokio_util::sync::CancellationToken)>,
) {
    if let Some(mut stderr) = stderr {
        // What the process says after it started: a line for the log.
        tokio::spawn(async move {
            let mut line = String::new();
            let _ = (&mut stderr)
                .take(64 * 1024)
                .read_to_string(&mut line)
                .await;
            if !line.trim().is_empty() {
                tracing::warn!(said = %line.trim(), "an environment's process said");
            }
        });
    }
    loop {
        match receive(&control).await {
            Ok(Some((Report::Ended { id, code, signal }, _))) => {
                let exit = match (code, signal) {
                    (Some(code), _) => Exit::Code(code),
                    (None, Some(signal)) => Exit::Signal(signal),
                    (None, None) => Exit::Code(-1),
                };
                if let Some(waiter) = waiters.lock().remove(&id) {
                    let _ = waiter.send(exit);
                }
            }
            Ok(Some((Report::Failed { id, why }, _))) => {
                if let Some(waiter) = waiters.lock().remove(&id) {
                    let _ = waiter.send(Exit::Failed(why));
                }
            }
            Ok(Some((Report::Connection { port }, Some(fd)))) => match &serve {
                Some((serve, stopped)) => {
                    serve(port, std::net::TcpStream::from(fd), stopped.clone())
                }
                // Nothing serves it: dropping it closes the connection.
                None => drop(fd),
            },
            Ok(Some((Report::Connection { .. }, None))) | Ok(Some((Report::Ready, _))) => {}
            Ok(None) | Err(_) => {
                alive.store(false, Ordering::Release);
                waiters.lock().clear();
                return;
            }
        }
    }
}

//! `init`: an environment's long-lived process, process 1 of its sandbox.
//!
//! Building a sandbox (namespaces, mounts, the helper's own start) costs
//! tens of milliseconds; forking a command costs one. So the Sandbox actor
//! starts `bwrap` once, with this loop as its process 1, and sends it each
//! command over a control socket (its standard input, a `SOCK_SEQPACKET`
//! pair: one [`Request`] per record, the command's output pipe attached).
//!
//! Before it reads any request it restricts itself — Landlock, then
//! seccomp — and makes itself undumpable; every command it forks inherits
//! both. It stays the user `bwrap` made it (as root: root, with no
//! capability but changing user), and forks each command in a session of
//! its own, with the per-command rlimits lowered and, as root, as the
//! environment's user: a command cannot signal or trace it, and as process
//! 1 of the PID namespace it ignores `SIGKILL` from inside.
//!
//! A command's shell is a *child subreaper*: what it starts and abandons
//! comes back to it while it runs. When it ends, whatever it left running
//! falls to process 1 — here — and is killed before the end is reported
//! ([`Report::Ended`]); a process of a command still running never falls
//! here. When the control socket closes (the actor stopped, or troupe
//! died), process 1 exits and the kernel kills everything in the
//! namespace.

use std::collections::HashMap;
use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};
use rustix::process::{Pid, Resource, Rlimit, Signal, WaitOptions};

use super::{parse, parse_rlimit, restrict, Never};
use crate::sandbox::zygote::{send_record, Report, Request, MAX_REQUEST};

/// A command running now.
struct Running {
    id: u64,
    /// Readable when it has exited.
    pidfd: OwnedFd,
}

struct Init {
    control: OwnedFd,
    listeners: Vec<(u16, std::net::TcpListener)>,
    env: Vec<(String, String)>,
    uid: Option<u32>,
    limits: Vec<(Resource, Rlimit)>,
    commands_cgroup: Option<Arc<OwnedFd>>,
    running: HashMap<i32, Running>,
    me: Pid,
}

/// Runs the loop; returns only with why it could not start.
pub(super) fn run(args: Vec<std::ffi::OsString>) -> Result<Never, String> {
    let parsed = parse(args)?;
    let mut uid = None;
    let mut writable = Vec::new();
    let mut landlock_required = true;
    let mut limits = Vec::new();
    let mut ports = Vec::new();
    let mut env = Vec::new();
    let mut commands_cgroup = None;
    for (name, value) in &parsed.options {
        match name.as_str() {
            "listen" => ports.push(
                value
                    .parse::<u16>()
                    .map_err(|_| format!("--listen {value} is not a port"))?,
            ),
            "env" => {
                let (k, v) = value
                    .split_once('=')
                    .ok_or_else(|| format!("--env {value}: give NAME=VALUE"))?;
                env.push((k.to_string(), v.to_string()));
            }
            "rlimit" => limits.push(parse_rlimit(value)?),
            "uid" => {
                uid = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| format!("--uid {value} is not a user id"))?,
                )
            }
            "write" => writable.push(value.clone()),
            "commands-cgroup-fd" => {
                let fd = value
                    .parse::<i32>()
                    .map_err(|_| format!("--commands-cgroup-fd {value} is not a descriptor"))?;
                commands_cgroup = Some(Arc::new(inherited(fd)?));
            }
            "landlock" => {
                landlock_required = match value.as_str() {
                    "required" => true,
                    "best_effort" => false,
                    other => {
                        return Err(format!("--landlock {other}: give required or best_effort"))
                    }
                }
            }
            other => return Err(format!("`init` has no option --{other}")),
        }
    }
    if !parsed.program.is_empty() {
        return Err("`init` runs no program of its own; commands come on its input".into());
    }
    let control = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("no control socket on standard input: {e}"))?;
    // Nothing of it can be read through /proc or traced by what it runs.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| format!("could not make the sandbox's process undumpable: {e}"))?;
    // Bound before any command runs, so none can take the port first.
    let mut listeners = Vec::new();
    for port in ports {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| format!("could not listen on 127.0.0.1:{port} in the sandbox: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("could not listen on 127.0.0.1:{port} in the sandbox: {e}"))?;
        listeners.push((port, listener));
    }
    restrict::restrict_files(&writable, landlock_required)?;
    restrict::filter_system_calls()?;
    let mut init = Init {
        control,
        listeners,
        env,
        uid,
        limits,
        commands_cgroup,
        running: HashMap::new(),
        me: rustix::process::getpid(),
    };
    init.send(&Report::Ready)?;
    init.serve()
}

impl Init {
    fn send(&self, report: &Report) -> Result<(), String> {
        send_record(&self.control, report, None)
            .map_err(|e| format!("the control socket failed: {e}"))
    }

    /// Takes requests and reaps commands until the control socket closes.
    fn serve(&mut self) -> Result<Never, String> {
        let mut buf = vec![0_u8; MAX_REQUEST + 1024];
        let second = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        loop {
            let (control_ready, connections) = {
                let mut fds = Vec::with_capacity(1 + self.listeners.len() + self.running.len());
                fds.push(PollFd::new(&self.control, PollFlags::IN));
                for (_, listener) in &self.listeners {
                    fds.push(PollFd::new(listener, PollFlags::IN));
                }
                for running in self.running.values() {
                    fds.push(PollFd::new(&running.pidfd, PollFlags::IN));
                }
                match poll(&mut fds, Some(&second)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(format!("waiting for work failed: {e}")),
                }
                let connections = fds[1..=self.listeners.len()]
                    .iter()
                    .any(|fd| !fd.revents().is_empty());
                (!fds[0].revents().is_empty(), connections)
            };
            if control_ready {
                self.receive(&mut buf)?;
            }
            if connections {
                self.hand_over()?;
            }
            self.reap()?;
        }
    }

    /// One request from the control socket; exits when it has closed.
    fn receive(&mut self, buf: &mut [u8]) -> Result<(), String> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        let received = rustix::net::recvmsg(
            &self.control,
            &mut [IoSliceMut::new(buf)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        );
        let received = match received {
            Ok(r) => r,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => return Ok(()),
            Err(e) => return Err(format!("the control socket failed: {e}")),
        };
        let mut fds: Vec<OwnedFd> = Vec::new();
        for message in ancillary.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = message {
                fds.extend(rights);
            }
        }
        if received.bytes == 0 {
            // The actor is gone: process 1 exits, and the kernel ends the
            // rest of the namespace with it.
            std::process::exit(0);
        }
        if received.flags.contains(ReturnFlags::TRUNC) {
            return Err("a request was larger than the control socket's records".into());
        }
        let request: Request = serde_json::from_slice(&buf[..received.bytes])
            .map_err(|e| format!("a request could not be read: {e}"))?;
        match request {
            Request::Run { id, command } => {
                let Some(output) = fds.pop() else {
                    return self.send(&Report::Failed {
                        id,
                        why: "the request carried no output pipe".into(),
                    });
                };
                if let Err(why) = self.spawn(id, &command, output) {
                    self.send(&Report::Failed { id, why })?;
                }
            }
            Request::Kill { id } => {
                if let Some((pid, _)) = self.running.iter().find(|(_, r)| r.id == id) {
                    if let Some(pid) = Pid::from_raw(*pid) {
                        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                        let _ = rustix::process::kill_process(pid, Signal::KILL);
                    }
                }
            }
        }
        Ok(())
    }

    /// Hands every connection waiting on a listener to the actor.
    fn hand_over(&mut self) -> Result<(), String> {
        for (port, listener) in &self.listeners {
            while let Ok((stream, _)) = listener.accept() {
                send_record(
                    &self.control,
                    &Report::Connection { port: *port },
                    Some(stream.as_fd()),
                )
                .map_err(|e| format!("the control socket failed: {e}"))?;
            }
        }
        Ok(())
    }

    /// Forks `bash -c command` with its output on `output`.
    fn spawn(&mut self, id: u64, command: &str, output: OwnedFd) -> Result<(), String> {
        let errors = output
            .try_clone()
            .map_err(|e| format!("the output pipe could not be shared: {e}"))?;
        let mut bash = Command::new("/bin/bash");
        bash.arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::from(output))
            .stderr(Stdio::from(errors))
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(uid) = self.uid {
            // As root, std drops the supplementary groups too.
            bash.uid(uid).gid(uid);
        }
        prepare_child(&mut bash, self.limits.clone(), self.commands_cgroup.clone());
        let child = bash
            .spawn()
            .map_err(|e| format!("the command could not start: {e}"))?;
        let pid = i32::try_from(child.id()).map_err(|_| "a process id out of range".to_string())?;
        drop(child);
        let pidfd = Pid::from_raw(pid)
            .ok_or_else(|| "a process id of 0".to_string())
            .and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
                    .map_err(|e| format!("the command could not be watched: {e}"))
            })?;
        self.running.insert(pid, Running { id, pidfd });
        Ok(())
    }

    /// Reaps what has exited; for each command that ended, kills what it
    /// left running, then reports the end.
    fn reap(&mut self) -> Result<(), String> {
        let mut ended = Vec::new();
        while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
            if let Some(running) = self.running.remove(&pid.as_raw_nonzero().get()) {
                ended.push((running.id, status));
            }
        }
        if ended.is_empty() {
            return Ok(());
        }
        self.sweep();
        for (id, status) in ended {
            self.send(&Report::Ended {
                id,
                code: status.exit_status(),
                signal: status.terminating_signal(),
            })?;
        }
        Ok(())
    }

    /// Kills and reaps every child of process 1 that is not a running
    /// command: what ended commands left behind. Each killed process's own
    /// children fall here next, so it goes round until none is left.
    fn sweep(&mut self) {
        for _ in 0..10_000 {
            let strays: Vec<Pid> = children_of(self.me)
                .into_iter()
                .filter(|pid| !self.running.contains_key(&pid.as_raw_nonzero().get()))
                .collect();
            if strays.is_empty() {
                return;
            }
            let killed: Vec<Pid> = strays
                .into_iter()
                .filter(|pid| rustix::process::kill_process(*pid, Signal::KILL).is_ok())
                .collect();
            if killed.is_empty() {
                // Nothing could be killed (it cannot happen with the
                // capabilities the sandbox gives): never wait forever.
                return;
            }
            for pid in &killed {
                let _ = rustix::process::waitpid(Some(*pid), WaitOptions::empty());
            }
        }
    }
}

/// Takes the descriptor `enter` handed down ([`super::COMMANDS_CGROUP_FD`]),
/// made close-on-exec so no command holds it.
#[allow(unsafe_code)]
fn inherited(fd: i32) -> Result<OwnedFd, String> {
    use std::os::fd::{BorrowedFd, FromRawFd};
    if fd < 3 {
        return Err(format!("--commands-cgroup-fd {fd} is a standard stream"));
    }
    // SAFETY: only borrowed for the `fcntl` that says whether it is open.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC).map_err(|e| {
        format!("the commands' control group was not handed down (descriptor {fd}: {e})")
    })?;
    // SAFETY: the descriptor is open (above) and nothing else in this
    // process owns it: `enter` opened it for this process alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What runs in a command's child between fork and exec: a session of its
/// own, the subreaper flag, the lowered limits, and the commands' control
/// group (where the memory cap is; process 1 stays out of it).
#[allow(unsafe_code)]
fn prepare_child(
    command: &mut Command,
    limits: Vec<(Resource, Rlimit)>,
    commands_cgroup: Option<Arc<OwnedFd>>,
) {
    // SAFETY: the closure runs in the forked child of a single-threaded
    // process, before exec, and only makes system calls through rustix
    // (no allocation: `limits` was built before the fork), which is what
    // `pre_exec` requires.
    unsafe {
        command.pre_exec(move || {
            let fail = |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
            if let Some(group) = &commands_cgroup {
                // "0": the writing process itself. Fail closed: outside
                // that group its memory would not be capped.
                rustix::io::write(group.as_ref(), b"0").map_err(fail)?;
            }
            rustix::process::setsid().map_err(fail)?;
            rustix::process::set_child_subreaper(Pid::from_raw(1)).map_err(fail)?;
            for (resource, limit) in &limits {
                rustix::process::setrlimit(*resource, *limit).map_err(fail)?;
            }
            Ok(())
        });
    }
}

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parent = parent.as_raw_nonzero().get();
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid: i32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then(|| Pid::from_raw(pid)).flatten()
        })
        .collect()
}

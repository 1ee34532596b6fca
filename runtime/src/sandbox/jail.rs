//! An environment's sandbox: stricter than a local command's.
//!
//! A local command sees the machine read-only; an environment's command
//! sees only what it needs: the system's programs and libraries (`/usr`
//! and its links, `/etc` with its secrets masked), a `/dev` and `/proc` of
//! its own, a private `/tmp`, and its workdir at [`WORKSPACE`] — the one
//! place it may write. troupe's home, the user's files and other
//! environments are not there at all. Every namespace is new (when troupe
//! runs as root, the user namespace is replaced by an unprivileged user of
//! the environment's own, which is stronger: a user namespace would map to
//! root), the network's too unless the environment has network;
//! capabilities are dropped, the sandbox dies with troupe and runs in a new
//! session. Inside, the [`helper`](super::helper)'s `init` is process 1: it
//! applies Landlock and seccomp to itself, then forks each command with the
//! rlimits lowered and as that user. Its environment variables are a fixed, short list: nothing of
//! troupe's (no API key) passes in.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::helper;
use super::Sandbox;

/// Where an environment's workdir is inside its sandbox.
pub const WORKSPACE: &str = "/workspace";

/// Where the helper is inside the sandbox.
const HELPER_INSIDE: &str = "/.troupe/troupe";

/// Files of `/etc` that are never shown.
const MASKED: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
];

/// Folders of `/etc` that are never shown.
const MASKED_DIRS: &[&str] = &["/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private"];

/// The system's folders shown read-only (or as the links they are).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// Whether Landlock must be enforced (`[environments] landlock`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandlockMode {
    /// A kernel without Landlock refuses every command.
    #[default]
    Required,
    /// Applied where the kernel has it.
    BestEffort,
}

impl LandlockMode {
    fn as_arg(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::BestEffort => "best_effort",
        }
    }
}

/// The rlimits of each process of an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimits {
    /// Address space in bytes (only where no control group caps memory).
    pub address_space: Option<u64>,
    /// Processes of the environment's user (only where that user is the
    /// environment's own).
    pub processes: Option<u64>,
    /// CPU seconds per process.
    pub cpu_secs: u64,
    /// The largest file, in bytes (the workdir's quota).
    pub file_size: u64,
    /// Open files per process.
    pub open_files: u64,
}

/// Everything that confines one environment's commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jail {
    /// The `troupe` binary that holds the helper.
    pub helper: PathBuf,
    /// The workdir on the machine, shown at [`WORKSPACE`].
    pub workdir: PathBuf,
    /// The user commands run as, when troupe is root and drops to it.
    pub uid: Option<u32>,
    /// Per-process limits.
    pub rlimits: Rlimits,
    /// Whether commands share the machine's network.
    pub network: bool,
    /// `cgroup.procs` files the command joins before the sandbox starts.
    pub cgroups: Vec<PathBuf>,
    /// The `cgroup.procs` file of the commands' own group (where the
    /// memory cap is), which each command joins as it starts: process 1
    /// stays out of it, and out of the way of its out-of-memory killer.
    pub commands_cgroup: Option<PathBuf>,
    /// Whether Landlock is a hard requirement.
    pub landlock: LandlockMode,
    /// Ports on the sandbox's own `127.0.0.1` whose connections are handed
    /// to the Sandbox actor (its egress proxy, its model relay).
    pub listen: Vec<u16>,
    /// Variables added to the commands' environment (where those are).
    pub env: Vec<(String, String)>,
    /// Folders of the machine shown read-only inside, each at its own
    /// path (an outside executor's installed files).
    pub binds: Vec<(PathBuf, PathBuf)>,
}

/// The environment variables a command starts with.
pub fn environment() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("HOME", WORKSPACE),
        ("USER", "sandbox"),
        ("LANG", "C.UTF-8"),
        ("TERM", "dumb"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("NO_COLOR", "1"),
        ("TMPDIR", "/tmp"),
    ]
}

impl Sandbox {
    /// The environment `jail` describes, with the helper's `init` as its
    /// process 1: the command to spawn (its environment is already the
    /// fixed list; the caller sets standard input — the control socket —
    /// and output). See [`super::zygote`].
    pub fn zygote(&self, jail: &Jail) -> Command {
        let mut bwrap: Vec<OsString> = Vec::new();
        let mut push = |words: &[&OsStr]| bwrap.extend(words.iter().map(|w| w.to_os_string()));
        let root = rustix::process::geteuid().is_root();
        if root && jail.uid.is_some() {
            // No user namespace: it would map the sandbox's root to the
            // machine's; the helper becomes an unprivileged user instead.
            push(&[
                "--unshare-ipc".as_ref(),
                "--unshare-pid".as_ref(),
                "--unshare-uts".as_ref(),
                "--unshare-cgroup-try".as_ref(),
            ]);
            if !jail.network {
                push(&["--unshare-net".as_ref()]);
            }
            push(&[
                "--cap-drop".as_ref(),
                "ALL".as_ref(),
                "--cap-add".as_ref(),
                "CAP_SETUID".as_ref(),
                "--cap-add".as_ref(),
                "CAP_SETGID".as_ref(),
                // Process 1 kills what ended commands left behind, which
                // run as that user (each command loses every capability
                // when it becomes that user).
                "--cap-add".as_ref(),
                "CAP_KILL".as_ref(),
            ]);
        } else {
            push(&["--unshare-all".as_ref()]);
            if jail.network {
                push(&["--share-net".as_ref()]);
            }
            push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
        }
        push(&[
            "--die-with-parent".as_ref(),
            "--new-session".as_ref(),
            "--as-pid-1".as_ref(),
            "--hostname".as_ref(),
            "sandbox".as_ref(),
        ]);
        for dir in SYSTEM {
            let path = Path::new(dir);
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(path) {
                        push(&["--symlink".as_ref(), target.as_os_str(), path.as_os_str()]);
                    }
                }
                Ok(meta) if meta.is_dir() => {
                    push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
                }
                _ => {}
            }
        }
        for file in MASKED {
            if Path::new(file).exists() {
                push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), file.as_ref()]);
            }
        }
        for dir in MASKED_DIRS {
            if Path::new(dir).is_dir() {
                push(&["--tmpfs".as_ref(), dir.as_ref()]);
            }
        }
        push(&[
            "--dev".as_ref(),
            "/dev".as_ref(),
            "--proc".as_ref(),
            "/proc".as_ref(),
            "--perms".as_ref(),
            "1777".as_ref(),
            "--tmpfs".as_ref(),
            "/tmp".as_ref(),
            "--bind".as_ref(),
            jail.workdir.as_os_str(),
            WORKSPACE.as_ref(),
            "--ro-bind".as_ref(),
            jail.helper.as_os_str(),
            HELPER_INSIDE.as_ref(),
        ]);
        for (outside, inside) in &jail.binds {
            // The folders leading to it, made here, readable by the
            // environment's user (bwrap's own would be its owner's alone).
            let mut parents: Vec<&Path> = inside.ancestors().skip(1).collect();
            parents.reverse();
            for parent in parents.into_iter().filter(|p| p.parent().is_some()) {
                push(&[
                    "--perms".as_ref(),
                    "0755".as_ref(),
                    "--dir".as_ref(),
                    parent.as_os_str(),
                ]);
            }
            push(&[
                "--ro-bind".as_ref(),
                outside.as_os_str(),
                inside.as_os_str(),
            ]);
        }
        push(&[
            "--chdir".as_ref(),
            WORKSPACE.as_ref(),
            "--".as_ref(),
            HELPER_INSIDE.as_ref(),
            helper::SUBCOMMAND.as_ref(),
            "init".as_ref(),
        ]);
        let mut confine: Vec<String> = Vec::new();
        let r = &jail.rlimits;
        let mut limit = |name: &str, value: u64| {
            confine.push("--rlimit".into());
            confine.push(format!("{name}={value}"));
        };
        limit("core", 0);
        limit("cpu", r.cpu_secs);
        limit("fsize", r.file_size);
        limit("nofile", r.open_files);
        if let Some(bytes) = r.address_space {
            limit("as", bytes);
        }
        if let Some(n) = r.processes {
            limit("nproc", n);
        }
        if let (true, Some(uid)) = (root, jail.uid) {
            confine.push("--uid".into());
            confine.push(uid.to_string());
        }
        for dir in [WORKSPACE, "/tmp", "/dev"] {
            confine.push("--write".into());
            confine.push(dir.into());
        }
        confine.push("--landlock".into());
        confine.push(jail.landlock.as_arg().into());
        for port in &jail.listen {
            confine.push("--listen".into());
            confine.push(port.to_string());
        }
        for (name, value) in &jail.env {
            confine.push("--env".into());
            confine.push(format!("{name}={value}"));
        }
        let commands_cgroup = jail
            .commands_cgroup
            .as_ref()
            .filter(|_| !jail.cgroups.is_empty());
        if commands_cgroup.is_some() {
            confine.push("--commands-cgroup-fd".into());
            confine.push(helper::COMMANDS_CGROUP_FD.to_string());
        }
        bwrap.extend(confine.into_iter().map(OsString::from));
        let mut command = if jail.cgroups.is_empty() {
            let mut c = Command::new(self.program());
            c.args(&bwrap);
            c
        } else {
            let mut c = Command::new(&jail.helper);
            c.arg(helper::SUBCOMMAND).arg("enter");
            for procs in &jail.cgroups {
                c.arg("--cgroup").arg(procs);
            }
            if let Some(procs) = commands_cgroup {
                c.arg("--commands-cgroup").arg(procs);
            }
            c.arg("--").arg(self.program()).args(&bwrap);
            c
        };
        command.env_clear().envs(environment()).current_dir("/");
        command
    }
}

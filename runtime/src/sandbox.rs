//! Running a command where the kernel, not a parser, keeps it in bounds.
//!
//! The gate reads a command before it runs, but a shell has too many ways to
//! name a file (`cd` then a relative path, `python3 -c "open(…)"`, a glob, a
//! path built from strings) for any reading to prove that a command leaves
//! troupe's home alone. So local commands run inside a sandbox whose mounts
//! make the home read-only: what the kernel refuses, no spelling gets past.
//!
//! The sandbox is [bubblewrap] (`bwrap`, the Debian package `bubblewrap`),
//! run as a helper process: Linux namespaces cannot be created from a
//! multithreaded process such as troupe, but `bwrap` is a fresh,
//! single-threaded one. [`Sandbox::detect`] finds it once per process by
//! running it; [`Sandbox::command`] wraps a program in it with a
//! [`Confinement`] — which folders are writable, which are hidden, which
//! stay read-only inside them, which network the command has. The rest of
//! the machine is read-only, `/tmp` is private, and every namespace is new
//! (the network's is the machine's, none, or a namespace shared with other
//! commands whose only way out is an egress proxy: [`network`]), so the
//! command sees only its own processes and dies with its parent.
//!
//! Whether commands use it is the user's choice, [`SandboxSettings`]
//! (`[sandbox]` in `config.toml`): `auto` where the machine has one,
//! `required` (no sandbox, no command), or `off`. [`SandboxSettings::place`]
//! says where a command runs under those settings on this machine, and why.
//!
//! [bubblewrap]: https://github.com/containers/bubblewrap
//!
//! # Examples
//!
//! Running `ls` in a project folder that is writable, with a home that is
//! not there at all (`cargo test -p troupe-runtime --doc sandbox`):
//!
//! ```no_run
//! use troupe_runtime::sandbox::{Confinement, Sandbox};
//!
//! if let Ok(sandbox) = Sandbox::detect() {
//!     let project = std::path::Path::new("/home/me/project");
//!     let confinement = Confinement {
//!         writable: vec![project.to_path_buf()],
//!         hidden: vec!["/home/me/.troupe".into()],
//!         ..Confinement::default()
//!     };
//!     let status = sandbox
//!         .command("ls", ["-la"], project, &confinement)
//!         .status();
//!     println!("{status:?}");
//! }
//! ```

pub mod cgroup;
pub mod helper;
pub mod jail;
pub mod network;
pub mod proxy;
pub mod zygote;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// What the gate does when commands run without a sandbox, for messages
/// (`troupe doctor`, the start of `run`, `chat` and `serve`).
pub const UNSANDBOXED_GATE: &str = "in ask mode every command that is not read-only is asked; \
     in auto mode every command that could touch troupe's home is asked; troupe's settings are \
     put back if a command changes them";

/// The package that provides the sandbox, named in every message about it.
pub const PACKAGE: &str = "bubblewrap";

/// How to install it, for messages.
pub const INSTALL_HINT: &str = "install bubblewrap (Debian/Ubuntu: `sudo apt-get install \
     bubblewrap`; Fedora: `sudo dnf install bubblewrap`; Arch: `sudo pacman -S bubblewrap`)";

/// Whether local commands run in a sandbox (`[sandbox] mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// In a sandbox when the machine has one; otherwise unsandboxed, and
    /// the gate asks more ([`UNSANDBOXED_GATE`]).
    #[default]
    Auto,
    /// Only in a sandbox: without one, commands are refused.
    Required,
    /// Never in a sandbox (the gate asks more, and every result says it
    /// ran unsandboxed).
    Off,
}

/// `[sandbox]`: where local commands run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxSettings {
    /// `auto`, `required` or `off`.
    pub mode: SandboxMode,
    /// Whether sandboxed commands reach the public internet (a personal
    /// agent's commands fetch packages, clone repositories, call APIs):
    /// through an egress proxy, never the machine's loopback or private
    /// ranges. Without it, they have no network at all.
    pub network: bool,
    /// Addresses of the machine or the LAN that commands may reach through
    /// the proxy anyway (a database on `10.0.0.5`, say). Empty by default.
    pub allow_addresses: Vec<std::net::IpAddr>,
    /// The `troupe` binary whose hidden helper holds the commands' network
    /// (`[environments] helper`, else this program); not read from the file.
    #[serde(skip)]
    pub helper: Option<PathBuf>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            mode: SandboxMode::Auto,
            network: true,
            allow_addresses: Vec::new(),
            helper: None,
        }
    }
}

impl SandboxSettings {
    /// Settings that never sandbox (tests of what happens without one).
    pub fn off() -> Self {
        Self {
            mode: SandboxMode::Off,
            ..Self::default()
        }
    }

    /// Where commands run under these settings on this machine.
    ///
    /// # Errors
    ///
    /// [`SandboxError::Required`] when the mode is `required` and no
    /// sandbox works here.
    pub fn place(&self) -> Result<Placement, SandboxError> {
        match self.mode {
            SandboxMode::Off => Ok(Placement::Unsandboxed(Unsandboxed::TurnedOff)),
            SandboxMode::Auto => Ok(match Sandbox::detect() {
                Ok(sandbox) => Placement::Sandboxed(sandbox.clone()),
                Err(why) => Placement::Unsandboxed(Unsandboxed::Missing(why.clone())),
            }),
            SandboxMode::Required => match Sandbox::detect() {
                Ok(sandbox) => Ok(Placement::Sandboxed(sandbox.clone())),
                Err(why) => Err(SandboxError::Required { why: why.clone() }),
            },
        }
    }

    /// Whether commands run in a sandbox under these settings (the gate
    /// asks less when they do). `required` without one counts as no: its
    /// commands are refused anyway.
    pub fn holds(&self) -> bool {
        matches!(self.place(), Ok(Placement::Sandboxed(_)))
    }
}

/// Where a command runs.
#[derive(Debug, Clone)]
pub enum Placement {
    /// In this sandbox.
    Sandboxed(Sandbox),
    /// On the machine itself, for this reason.
    Unsandboxed(Unsandboxed),
}

impl Placement {
    /// What a tool result's `sandbox` field says: `"bubblewrap"` or
    /// `"unsandboxed"`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sandboxed(_) => PACKAGE,
            Self::Unsandboxed(_) => "unsandboxed",
        }
    }
}

/// Why a command runs without a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsandboxed {
    /// `[sandbox] mode = "off"`.
    TurnedOff,
    /// The machine has no working sandbox (why).
    Missing(String),
}

impl std::fmt::Display for Unsandboxed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TurnedOff => write!(f, "the sandbox is turned off ([sandbox] mode = \"off\")"),
            Self::Missing(why) => write!(f, "no sandbox works on this machine: {why}"),
        }
    }
}

/// A failure to place a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// `required`, and none works here.
    #[error(
        "commands run only in a sandbox here ([sandbox] mode = \"required\"), and none works on \
         this machine: {why}. To run commands, {INSTALL_HINT}; or set [sandbox] mode = \"auto\" \
         in config.toml to run them unsandboxed, asking before every one that is not read-only \
         in ask mode"
    )]
    Required {
        /// Why none works.
        why: String,
    },
}

/// What a sandboxed command may touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Folders bound read-write, in order (the working folder).
    pub writable: Vec<PathBuf>,
    /// Folders and files bound read-only after the writable ones, so they
    /// stay read-only even inside one. A writable folder inside one of
    /// these is read-only too: later binds win.
    pub read_only: Vec<PathBuf>,
    /// The command's network.
    pub network: Network,
    /// Folders hidden entirely (an empty one in their place), before the
    /// binds above, so a folder bound inside one is all of it that shows
    /// (troupe's home, under an outside executor: only its own files). A
    /// hidden folder inside a writable one is hidden again after it: a
    /// working folder that holds troupe's home does not show it.
    pub hidden: Vec<PathBuf>,
}

/// Which network a sandboxed command has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Network {
    /// A namespace of its own with only its own loopback: no network.
    #[default]
    None,
    /// The machine's own (its loopback and every service on it included).
    Machine,
    /// A namespace shared with other commands, whose only way out is the
    /// egress proxy troupe serves there ([`network::Egress`]).
    Joined(std::sync::Arc<network::Namespace>),
}

/// A working bubblewrap on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    program: PathBuf,
}

impl Sandbox {
    /// The machine's sandbox, found once per process: `bwrap` on the `PATH`
    /// (or in `/usr/bin`), tried with the namespaces commands use. The
    /// error says why there is none and how to install it.
    ///
    /// # Errors
    ///
    /// Why no sandbox works here (not installed, or it cannot create
    /// namespaces), with what to do.
    pub fn detect() -> Result<&'static Sandbox, &'static String> {
        static DETECTED: OnceLock<Result<Sandbox, String>> = OnceLock::new();
        DETECTED
            .get_or_init(|| {
                let found = find_program().and_then(|program| Self::probe(&program));
                // Said once, when first needed (a long-running node
                // asks at start).
                match &found {
                    Ok(_) => tracing::info!(
                        "commands run sandboxed by bubblewrap: troupe's home is out of their reach"
                    ),
                    Err(why) => tracing::warn!(
                        "commands run UNSANDBOXED: {why}. Until a sandbox works, {}; to \
                         protect the home, {INSTALL_HINT}",
                        UNSANDBOXED_GATE
                    ),
                }
                found
            })
            .as_ref()
    }

    /// Tries the `bwrap` at `program`: a sandbox like the commands' running
    /// `true`.
    ///
    /// # Errors
    ///
    /// What failed, and what to do.
    pub fn probe(program: &Path) -> Result<Sandbox, String> {
        let sandbox = Sandbox {
            program: program.to_path_buf(),
        };
        let root = PathBuf::from("/");
        let mut trial = sandbox.command(
            "true",
            std::iter::empty::<&str>(),
            &root,
            &Confinement::default(),
        );
        let output = trial
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("{} could not be run ({e})", program.display()))?;
        if output.status.success() {
            Ok(sandbox)
        } else {
            let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
            Err(format!(
                "{} cannot create a sandbox here ({}{}); it needs unprivileged user \
                 namespaces (sysctl kernel.unprivileged_userns_clone=1) or a setuid bwrap, or, \
                 in a container, permission to create namespaces",
                program.display(),
                output.status,
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                },
            ))
        }
    }

    /// For tests that need a real sandbox: the machine's, or `None` after
    /// printing why `test` is skipped. Where `TROUPE_TEST_REQUIRE_SANDBOX`
    /// is set (CI installs bubblewrap and sets it), a missing sandbox fails
    /// the test instead of letting it pass unexercised.
    ///
    /// # Panics
    ///
    /// When no sandbox works and `TROUPE_TEST_REQUIRE_SANDBOX` is set.
    #[doc(hidden)]
    #[allow(clippy::panic)]
    pub fn detect_or_skip(test: &str) -> Option<&'static Sandbox> {
        match Self::detect() {
            Ok(sandbox) => Some(sandbox),
            Err(why) if std::env::var_os("TROUPE_TEST_REQUIRE_SANDBOX").is_some() => {
                panic!("{test}: a sandbox is required here (TROUPE_TEST_REQUIRE_SANDBOX) but {why}")
            }
            Err(why) => {
                eprintln!("skipping {test}: no sandbox on this machine: {why}");
                None
            }
        }
    }

    /// The `bwrap` this sandbox runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// `program args…` inside the sandbox, in `workdir`, confined by
    /// `confinement`: every namespace new but the network's, which
    /// `confinement.network` chooses, dying with its parent, in a new
    /// session, the root file system read-only, `/dev` and `/proc` of its
    /// own, a private `/tmp`, `hidden` replaced by empty, read-only folders, then
    /// `writable` bound read-write, `hidden` again where inside one, and
    /// `read_only` read-only over them. `workdir` is kept visible (read-only
    /// unless writable) wherever it is. Paths are resolved through their
    /// symbolic links first; ones that do not exist are left out (a missing
    /// home has nothing to protect, and its parent stays read-only unless
    /// writable).
    ///
    /// The caller sets standard input and output, the environment (which
    /// passes through) and the process group of the returned command.
    pub fn command<I, S>(
        &self,
        program: impl AsRef<OsStr>,
        args: I,
        workdir: &Path,
        confinement: &Confinement,
    ) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut bwrap: Vec<OsString> = Vec::new();
        let mut flag = |words: &[&OsStr]| bwrap.extend(words.iter().map(|w| w.to_os_string()));
        flag(&["--unshare-all".as_ref()]);
        let joined = match &confinement.network {
            Network::None => None,
            Network::Machine => {
                flag(&["--share-net".as_ref()]);
                None
            }
            Network::Joined(namespace) => {
                // Entered before `bwrap` runs (below): share it, as the
                // user troupe runs as rather than the namespace's root.
                flag(&["--share-net".as_ref()]);
                let uid = rustix::process::getuid().as_raw().to_string();
                let gid = rustix::process::getgid().as_raw().to_string();
                flag(&[
                    "--uid".as_ref(),
                    OsStr::new(&uid),
                    "--gid".as_ref(),
                    OsStr::new(&gid),
                ]);
                Some(std::sync::Arc::clone(namespace))
            }
        };
        flag(&[
            "--die-with-parent".as_ref(),
            "--new-session".as_ref(),
            "--ro-bind".as_ref(),
            "/".as_ref(),
            "/".as_ref(),
            "--dev".as_ref(),
            "/dev".as_ref(),
            "--proc".as_ref(),
            "/proc".as_ref(),
            "--tmpfs".as_ref(),
            "/tmp".as_ref(),
        ]);
        let hidden: Vec<PathBuf> = confinement.hidden.iter().filter_map(|p| real(p)).collect();
        for dir in &hidden {
            flag(&["--tmpfs".as_ref(), dir.as_os_str()]);
        }
        let workdir = real(workdir);
        let writable: Vec<PathBuf> = confinement
            .writable
            .iter()
            .filter_map(|p| real(p))
            .collect();
        // After the private /tmp, so a folder there is still seen.
        if let Some(dir) = &workdir {
            if dir != Path::new("/") && !writable.iter().any(|w| dir.starts_with(w)) {
                flag(&["--ro-bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
            }
        }
        for dir in &writable {
            flag(&["--bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
        }
        for dir in hidden
            .iter()
            .filter(|h| writable.iter().any(|w| h.starts_with(w)))
        {
            flag(&["--tmpfs".as_ref(), dir.as_os_str()]);
        }
        for path in confinement.read_only.iter().filter_map(|p| real(p)) {
            flag(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        // Empty and read-only: nothing can be left there for troupe to find.
        for dir in &hidden {
            flag(&["--remount-ro".as_ref(), dir.as_os_str()]);
        }
        if let Some(dir) = &workdir {
            flag(&["--chdir".as_ref(), dir.as_os_str()]);
        }
        flag(&["--".as_ref(), program.as_ref()]);
        let mut command = Command::new(&self.program);
        command.args(bwrap).args(args);
        if let Some(dir) = workdir {
            command.current_dir(dir);
        }
        if let Some(namespace) = joined {
            namespace.enter_before_exec(&mut command);
        }
        command
    }
}

/// `path` through its symbolic links, when it exists.
fn real(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// `bwrap` on the `PATH`, else in `/usr/bin`.
fn find_program() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("bwrap"));
    on_path
        .chain(std::iter::once(PathBuf::from("/usr/bin/bwrap")))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| "bwrap is not installed (not on the PATH, nor in /usr/bin)".to_string())
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;

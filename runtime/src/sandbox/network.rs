//! The network local commands share: a namespace of its own whose only
//! way out is an egress proxy troupe serves.
//!
//! A command that shares the machine's network reaches every service on
//! its loopback — `troupe serve` included — and the LAN. So sandboxed
//! local commands get a network namespace without the machine's
//! interfaces, and in it, on `127.0.0.1:`[`PORT`], a proxy whose
//! connections troupe serves outside with its own rules (the public
//! internet by default, never the machine's loopback or private ranges:
//! the tools' `run_command` egress).
//!
//! The mechanism is the environments' own: an environment's long-lived
//! process ([`Zygote`], the helper's `init` in a [`Jail`] without network)
//! listens on the port inside and hands each connection over its control
//! socket. Here it runs nothing else: it only holds the namespace. Each
//! command's `bwrap` enters that namespace between fork and exec (the
//! owning user namespace first, where troupe is not root) and shares it, so
//! building a sandbox costs no more than before, and commands see each
//! other's servers on their own loopback (a background server and the
//! `curl` that tests it), but nothing of the machine's.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::jail::{Jail, LandlockMode, Rlimits};
use super::zygote::{OnConnection, Zygote};
use super::Sandbox;

/// The egress proxy's port on the namespace's own loopback.
pub const PORT: u16 = 3128;

/// `NS_GET_USERNS`: the user namespace that owns a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// A network namespace commands enter, and the user namespace that owns it
/// when that is not troupe's own.
#[derive(Debug)]
pub struct Namespace {
    net: OwnedFd,
    owner: Option<OwnedFd>,
}

impl PartialEq for Namespace {
    fn eq(&self, other: &Self) -> bool {
        self.net.as_raw_fd() == other.net.as_raw_fd()
    }
}

impl Eq for Namespace {}

impl Namespace {
    /// The network namespace of process `pid`.
    ///
    /// # Errors
    ///
    /// What could not be opened.
    pub fn of_process(pid: u32) -> Result<Namespace, String> {
        let open = |kind: &str| {
            std::fs::File::open(format!("/proc/{pid}/ns/{kind}"))
                .map(OwnedFd::from)
                .map_err(|e| format!("the sandbox's network namespace could not be opened: {e}"))
        };
        let net = open("net")?;
        let ours = std::fs::metadata("/proc/self/ns/net")
            .map_err(|e| format!("troupe's own network namespace could not be read: {e}"))?;
        let theirs = rustix::fs::fstat(&net)
            .map_err(|e| format!("the sandbox's network namespace could not be read: {e}"))?;
        if std::os::unix::fs::MetadataExt::ino(&ours) == theirs.st_ino {
            return Err("the sandbox shares the machine's network namespace".into());
        }
        let owner = owning_user_namespace(&net)?;
        let own_user = std::fs::metadata("/proc/self/ns/user")
            .map_err(|e| format!("troupe's own user namespace could not be read: {e}"))?;
        let owner_ino = rustix::fs::fstat(&owner)
            .map_err(|e| format!("the sandbox's user namespace could not be read: {e}"))?
            .st_ino;
        let owner = (std::os::unix::fs::MetadataExt::ino(&own_user) != owner_ino).then_some(owner);
        Ok(Namespace { net, owner })
    }

    /// Makes `command` enter this namespace between fork and exec.
    #[allow(unsafe_code)]
    pub(super) fn enter_before_exec(self: std::sync::Arc<Self>, command: &mut Command) {
        use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the forked child before exec and only
        // makes `setns` system calls through rustix on descriptors this Arc
        // keeps open (no allocation, no locks), which is what `pre_exec`
        // requires. `setns` is allowed there: the child has one thread.
        unsafe {
            command.pre_exec(move || {
                let fail =
                    |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
                if let Some(owner) = &self.owner {
                    move_into_link_name_space(owner.as_fd(), Some(LinkNameSpaceType::User))
                        .map_err(fail)?;
                }
                move_into_link_name_space(self.net.as_fd(), Some(LinkNameSpaceType::Network))
                    .map_err(fail)?;
                Ok(())
            });
        }
    }
}

/// The user namespace that owns the namespace `fd` is.
#[allow(unsafe_code)]
fn owning_user_namespace(fd: &OwnedFd) -> Result<OwnedFd, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: NS_GET_USERNS takes no argument and returns a new descriptor
    // (or -1); the one it returns is owned by nothing else.
    let raw = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_USERNS) };
    if raw < 0 {
        return Err(format!(
            "the owner of the sandbox's network namespace could not be found: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `raw` is a descriptor just returned to us, open, unowned.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The process holding the commands' network namespace, and the
/// namespace. Dropping it ends the process: the namespace goes with the
/// last command in it.
#[derive(Debug)]
pub struct Held {
    namespace: std::sync::Arc<Namespace>,
    zygote: Zygote,
}

/// The process's empty working folder, removed when dropped: as soon as
/// the process started in it (it works in it still, nameless, and never
/// writes there), or as soon as starting it fails at any step. So no exit
/// of troupe, however abrupt, leaves it behind.
#[derive(Debug)]
struct Workdir(PathBuf);

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

impl Held {
    /// Starts the process with the helper in `helper` (the `troupe`
    /// binary), listening on [`PORT`] inside; each connection there goes to
    /// `on_connection`.
    ///
    /// # Errors
    ///
    /// What could not be started, in the helper's words.
    pub async fn start(
        sandbox: &Sandbox,
        helper: &Path,
        on_connection: OnConnection,
    ) -> Result<Held, String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let workdir = std::env::temp_dir().join(format!(
            "troupe-network-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&workdir)
            .map_err(|e| format!("{} could not be made: {e}", workdir.display()))?;
        let workdir = Workdir(workdir);
        let jail = Jail {
            helper: helper.to_path_buf(),
            workdir: workdir.0.clone(),
            uid: None,
            rlimits: Rlimits {
                address_space: None,
                processes: None,
                cpu_secs: u64::MAX / 2,
                file_size: 0,
                open_files: 1024,
            },
            network: false,
            cgroups: Vec::new(),
            commands_cgroup: None,
            landlock: LandlockMode::BestEffort,
            listen: vec![PORT],
            env: Vec::new(),
            binds: Vec::new(),
        };
        let started = Zygote::start(sandbox, &jail, Some(on_connection)).await;
        let zygote = match started {
            Ok(zygote) => zygote,
            Err(why) => {
                return Err(format!(
                    "the commands' network could not be set up with the helper {}: {why}",
                    helper.display()
                ));
            }
        };
        let inside = zygote
            .pid()
            .and_then(first_child)
            .ok_or_else(|| "the commands' network process could not be found".to_string())?;
        let namespace = std::sync::Arc::new(Namespace::of_process(inside)?);
        drop(workdir);
        Ok(Held { namespace, zygote })
    }

    /// Whether its process still lives (and so serves the proxy).
    pub fn alive(&self) -> bool {
        self.zygote.alive()
    }

    /// The namespace commands enter.
    pub fn namespace(&self) -> std::sync::Arc<Namespace> {
        std::sync::Arc::clone(&self.namespace)
    }
}

/// The first child of `pid` (`bwrap`'s process inside the namespaces).
fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

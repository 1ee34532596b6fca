//! Control groups: the limits that hold for an environment's whole tree of
//! processes, not one process at a time.
//!
//! Found at run time: the unified hierarchy (v2) when it has the memory,
//! pids and cpu controllers, else each v1 hierarchy that has one of them
//! (a machine may have memory, pids and cpu on v1 and a v2 tree with only
//! hugetlb). An environment gets a group of its own under troupe's own
//! group, named after it; [`Cgroup::procs`] are the files the helper's
//! `enter` step writes its process id into. Where no control group can be
//! made (troupe is not root and has no delegated tree), limits fall back
//! to rlimits, and [`Cgroup::create`] says which controllers it got.
//!
//! The memory cap is on a sub-group of the commands alone
//! ([`Cgroup::commands_procs`]), not on the whole environment: when the
//! kernel's out-of-memory killer acts for a group, it picks its victim
//! among that group's processes only. With the sandbox's process 1 outside
//! the capped group, a command that runs the environment out of memory —
//! with its pages, or with the kernel memory of the files it makes — is
//! the one that dies; process 1 and the other commands live on. Each
//! command joins that sub-group itself, between fork and exec, through a
//! descriptor `enter` opened on the machine (see [`super::helper`]).

use std::path::{Path, PathBuf};

/// What an environment's group caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// Memory of the whole tree, in bytes.
    pub memory_bytes: u64,
    /// Processes (and threads) at once.
    pub pids: u64,
    /// CPU time as a share of one core, in percent (100: one core).
    pub cpu_percent: u32,
}

/// An environment's control group, in one or more hierarchies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
    /// The commands' own group in the memory hierarchy, where the memory
    /// cap is; `None` when it could not be made (the cap is then on the
    /// environment's group).
    commands: Option<PathBuf>,
    /// Whether memory is capped by it.
    pub memory: bool,
    /// Whether the process count is capped by it.
    pub pids: bool,
    /// Whether CPU time is capped by it.
    pub cpu: bool,
    v2: bool,
}

const ROOT: &str = "/sys/fs/cgroup";

/// The folder under troupe's own group that holds the environments' groups.
const PARENT: &str = "troupe-environments";

/// The sub-group of an environment's group its commands run in.
const COMMANDS: &str = "commands";

/// The sub-group of an environment's v2 group its process 1 runs in (a v2
/// group that hands controllers down holds no process itself).
const INIT: &str = "init";

impl Cgroup {
    /// Makes (or takes again) the group `name` with `limits`; `None` when
    /// this machine gives troupe no controller at all. The group's folder
    /// is `<pid>.<name>`: it names the process that made it, so that
    /// [`Cgroup::sweep`] can tell a group of a troupe that is gone from one
    /// of a troupe still running on the machine.
    ///
    /// The first group a process makes sweeps the groups of troupes gone
    /// before it ([`Cgroup::sweep`]).
    pub fn create(name: &str, limits: GroupLimits) -> Option<Cgroup> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let swept = Self::sweep();
            if swept > 0 {
                tracing::info!(swept, "removed the control groups of troupes that are gone");
            }
        });
        let name = format!("{}.{name}", std::process::id());
        Self::create_v2(&name, limits).or_else(|| Self::create_v1(&name, limits))
    }

    /// Removes the groups of troupe processes that are gone (killed before
    /// they could remove their own): every empty one whose folder names a
    /// process that no longer runs, or names none (made before folders named
    /// their process). A group something still runs in cannot be removed
    /// and is left. Returns how many went.
    pub fn sweep() -> usize {
        let mut parents: Vec<PathBuf> = Vec::new();
        if let Some(own) = own_path("") {
            for mount in [PathBuf::from(ROOT), Path::new(ROOT).join("unified")] {
                if mount.join("cgroup.controllers").is_file() {
                    let group = mount.join(own.trim_start_matches('/'));
                    parents.extend(group.parent().map(|p| p.join(PARENT)));
                    parents.push(mount.join(PARENT));
                }
            }
        }
        for controller in ["memory", "pids", "cpu"] {
            if let Some(own) = own_path(controller) {
                let mount = Path::new(ROOT).join(controller);
                parents.push(mount.join(own.trim_start_matches('/')).join(PARENT));
            }
        }
        parents.sort();
        parents.dedup();
        let mut removed = 0;
        for parent in parents {
            let Ok(entries) = std::fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if !entry.file_type().is_ok_and(|t| t.is_dir()) || !owner_gone(&path) {
                    continue;
                }
                let _ = std::fs::remove_dir(path.join(COMMANDS));
                let _ = std::fs::remove_dir(path.join(INIT));
                if std::fs::remove_dir(&path).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }

    fn create_v2(name: &str, limits: GroupLimits) -> Option<Cgroup> {
        let own = own_path("")?;
        let mount = [PathBuf::from(ROOT), Path::new(ROOT).join("unified")]
            .into_iter()
            .find(|m| m.join("cgroup.controllers").is_file())?;
        // The environments' folder sits beside troupe's group: a group with
        // processes of its own cannot hand controllers down (the root can).
        let base = if own.trim_matches('/').is_empty() {
            mount.clone()
        } else {
            mount
                .join(own.trim_start_matches('/'))
                .parent()?
                .to_path_buf()
        };
        let parent = base.join(PARENT);
        let available =
            std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
        let has = |c: &str| available.split_whitespace().any(|a| a == c);
        if !(has("memory") && has("pids")) {
            return None;
        }
        std::fs::create_dir_all(&parent).ok()?;
        let wanted: Vec<String> = ["memory", "pids", "cpu"]
            .iter()
            .filter(|c| has(c))
            .map(|c| format!("+{c}"))
            .collect();
        std::fs::write(parent.join("cgroup.subtree_control"), wanted.join(" ")).ok()?;
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).ok()?;
        let cap = |group: &Path| {
            let ok =
                std::fs::write(group.join("memory.max"), limits.memory_bytes.to_string()).is_ok();
            let _ = std::fs::write(group.join("memory.swap.max"), "0");
            ok
        };
        let commands = dir.join(COMMANDS);
        let split = std::fs::write(dir.join("cgroup.subtree_control"), "+memory").is_ok()
            && std::fs::create_dir_all(dir.join(INIT)).is_ok()
            && std::fs::create_dir_all(&commands).is_ok()
            && cap(&commands);
        let (memory, commands) = if split {
            (true, Some(commands))
        } else {
            (cap(&dir), None)
        };
        let pids = std::fs::write(dir.join("pids.max"), limits.pids.to_string()).is_ok();
        let cpu = std::fs::write(
            dir.join("cpu.max"),
            format!("{} 100000", u64::from(limits.cpu_percent) * 1000),
        )
        .is_ok();
        Some(Cgroup {
            dirs: vec![dir],
            commands,
            memory,
            pids,
            cpu,
            v2: true,
        })
    }

    fn create_v1(name: &str, limits: GroupLimits) -> Option<Cgroup> {
        let mut group = Cgroup {
            dirs: Vec::new(),
            commands: None,
            memory: false,
            pids: false,
            cpu: false,
            v2: false,
        };
        for controller in ["memory", "pids", "cpu"] {
            let mount = Path::new(ROOT).join(controller);
            if !mount.join("cgroup.procs").is_file() {
                continue;
            }
            let Some(own) = own_path(controller) else {
                continue;
            };
            let dir = mount
                .join(own.trim_start_matches('/'))
                .join(PARENT)
                .join(name);
            if std::fs::create_dir_all(&dir).is_err() {
                continue;
            }
            let set = |file: &str, value: String| std::fs::write(dir.join(file), value).is_ok();
            let capped = match controller {
                "memory" => {
                    let cap = |group: &Path| {
                        let bytes = limits.memory_bytes.to_string();
                        let ok =
                            std::fs::write(group.join("memory.limit_in_bytes"), &bytes).is_ok();
                        // Without swap accounting there is nothing to set.
                        let _ = std::fs::write(group.join("memory.memsw.limit_in_bytes"), bytes);
                        ok
                    };
                    let commands = dir.join(COMMANDS);
                    let ok = if std::fs::create_dir_all(&commands).is_ok() && cap(&commands) {
                        group.commands = Some(commands);
                        true
                    } else {
                        let _ = std::fs::remove_dir(&commands);
                        cap(&dir)
                    };
                    group.memory = ok;
                    ok
                }
                "pids" => {
                    let ok = set("pids.max", limits.pids.to_string());
                    group.pids = ok;
                    ok
                }
                _ => {
                    let ok = set("cpu.cfs_period_us", "100000".into())
                        && set(
                            "cpu.cfs_quota_us",
                            (u64::from(limits.cpu_percent) * 1000).to_string(),
                        );
                    group.cpu = ok;
                    ok
                }
            };
            if capped {
                group.dirs.push(dir);
            } else {
                let _ = std::fs::remove_dir(&dir);
            }
        }
        (!group.dirs.is_empty()).then_some(group)
    }

    /// The files the sandbox's process 1 joins the group through (one per
    /// hierarchy).
    pub fn procs(&self) -> Vec<PathBuf> {
        match (&self.commands, self.v2) {
            (Some(_), true) => self
                .dirs
                .iter()
                .map(|d| d.join(INIT).join("cgroup.procs"))
                .collect(),
            _ => self.dirs.iter().map(|d| d.join("cgroup.procs")).collect(),
        }
    }

    /// The file each command joins the commands' group through, the one
    /// the memory cap is on; `None` when the cap is on the whole group.
    pub fn commands_procs(&self) -> Option<PathBuf> {
        self.commands.as_ref().map(|d| d.join("cgroup.procs"))
    }

    /// How many times the kernel's out-of-memory killer has killed a
    /// command of the group, where the kernel says.
    pub fn oom_kills(&self) -> Option<u64> {
        let group = self.commands.as_ref().or(self.dirs.first())?;
        ["memory.events", "memory.oom_control"]
            .iter()
            .find_map(|f| std::fs::read_to_string(group.join(f)).ok())?
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
    }

    /// Every `cgroup.procs` of the group and its sub-groups.
    fn all_procs(&self) -> Vec<PathBuf> {
        let mut files = self.procs();
        files.extend(self.dirs.iter().map(|d| d.join("cgroup.procs")));
        files.extend(self.commands_procs());
        files.sort();
        files.dedup();
        files
    }

    /// The processes in the group now.
    pub fn members(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .all_procs()
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|text| {
                text.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kills every process in the group (`cgroup.kill` on v2, one SIGKILL
    /// each on v1, again until none is left or a bounded number of rounds).
    pub fn kill_all(&self) {
        if self.v2 {
            if let Some(dir) = self.dirs.first() {
                if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
                    return;
                }
            }
        }
        for _ in 0..50 {
            let members = self.members();
            if members.is_empty() {
                return;
            }
            for pid in members {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            std::thread::yield_now();
        }
    }

    /// The group's peak or current memory use, in bytes, where known.
    pub fn memory_bytes(&self) -> Option<u64> {
        self.dirs.iter().find_map(|d| {
            ["memory.current", "memory.usage_in_bytes"]
                .iter()
                .find_map(|f| std::fs::read_to_string(d.join(f)).ok())
                .and_then(|t| t.trim().parse().ok())
        })
    }

    /// Kills what is left and removes the group. A killed process leaves
    /// its group a moment after the signal, and a group with a process in
    /// it cannot be removed, so removing is tried again for a short while
    /// (at most [`REMOVE_TRIES`] × 5 ms) until the group is empty.
    pub fn remove(&self) {
        self.kill_all();
        for attempt in 0..REMOVE_TRIES {
            let mut left = false;
            for dir in &self.dirs {
                // The sub-groups first: a group with children cannot go.
                for sub in [dir.join(COMMANDS), dir.join(INIT), dir.clone()] {
                    if let Err(e) = std::fs::remove_dir(&sub) {
                        left |= e.kind() != std::io::ErrorKind::NotFound;
                    }
                }
            }
            if !left {
                return;
            }
            if attempt + 1 < REMOVE_TRIES {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        tracing::warn!(group = ?self.dirs, "an environment's control group could not be removed");
    }
}

/// How many times [`Cgroup::remove`] tries.
const REMOVE_TRIES: u32 = 40;

/// Whether the group at `path` was made by a process that no longer runs
/// (its folder is `<pid>.<name>`), or by one that did not say.
fn owner_gone(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match name
        .split_once('.')
        .and_then(|(pid, _)| pid.parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        Some(pid) => {
            rustix::process::test_kill_process(pid).is_err_and(|e| e == rustix::io::Errno::SRCH)
        }
        None => true,
    }
}

/// troupe's own group in the hierarchy of `controller` ("" for v2), from
/// `/proc/self/cgroup`.
fn own_path(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        matches.then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where this machine gives no control group (not root, no delegated
    /// tree), there is nothing to sweep and the test says so.
    #[test]
    fn the_groups_of_a_troupe_that_is_gone_are_swept_and_a_live_ones_kept() {
        let limits = GroupLimits {
            memory_bytes: 64 << 20,
            pids: 64,
            cpu_percent: 100,
        };
        let name = format!("sweep-test-{}", uuid::Uuid::now_v7().simple());
        let Some(live) = Cgroup::create(&name, limits) else {
            eprintln!("skipping: no control group can be made here");
            return;
        };
        // A group left by a troupe killed before it could remove it: its
        // folder names a process that cannot exist (beyond any pid_max).
        let orphans: Vec<PathBuf> = live
            .dirs
            .iter()
            .map(|d| d.with_file_name(format!("2147483000.{name}")))
            .collect();
        for orphan in &orphans {
            std::fs::create_dir(orphan).unwrap();
        }
        assert!(Cgroup::sweep() >= orphans.len());
        for orphan in &orphans {
            assert!(!orphan.exists(), "{} was left", orphan.display());
        }
        for dir in &live.dirs {
            assert!(dir.exists(), "the live group {} was swept", dir.display());
        }
        live.remove();
        for dir in &live.dirs {
            assert!(!dir.exists(), "{} was not removed", dir.display());
        }
    }
}

//! Outside executors: coding harnesses (pi, Claude Code, Codex) working on
//! a folder, each running instance an actor under its delegation; what is
//! particular to each harness is behind one adapter ([`harness::Harness`]),
//! one file per harness.
//!
//! ```text
//! delegations
//! └─ delegation_…      collects its instances' ends, like its subagents'
//!    └─ executor_…     one harness process: its protocol, its record
//! ```
//!
//! `delegate {executor: "pi", tasks: [{goal, folder}]}` records one
//! subagent row per task (with `executor` and `folder` set) and asks the
//! Delegation actor to launch an [`Executor`] for each. The harness's
//! process is started while that record commits, without its task
//! ([`HeadStart`]); the actor gives it its task, or it is killed and its
//! folder removed if the delegation was refused. The actor owns the
//! harness process, started in the `run_command` sandbox (bubblewrap: the
//! task's folder writable, troupe's home hidden but for the harness's own
//! files, dying with troupe), because pi runs `bash` without asking anyone.
//! Its model calls go to a model relay of its own on the machine's
//! loopback that only this instance can use (a per-instance secret in its
//! `models.json`); the relay adds the key of troupe's model — or answers
//! from troupe's scripted model, so executors are tested offline.
//!
//! Every event the harness prints is written to the instance's output file
//! whole and, summarised, to the delegation record as it arrives, in
//! order. When the harness ends its task the instance's end is recorded
//! through the delegation like a subagent's: the last end enqueues the
//! parent's report in the same transaction, so it is delivered once.
//! `steer` and `stop` reach a running instance through its delegation;
//! `resume` starts a new instance on the same harness session.
//!
//! A harness that exits before ending its task, prints a line over
//! [`MAX_LINE`], or outlives its deadline is reported as failed (or timed
//! out) with the reason; what it printed is bounded in memory and spilled
//! whole to `<home>/executors/<name>/instances/<id>/output.jsonl`. After a
//! crash of troupe the harness died with it (its sandbox dies with its
//! parent): each instance still recorded as running is reported as
//! interrupted, with `resume` offered — never run twice, never lost; one
//! whose record had not committed left nothing at all.

mod actor;
pub mod claude;
pub mod codex;
pub mod hand_over;
pub mod harness;
mod host;
pub mod house;
pub mod limit;
mod output;
pub mod pi;
mod prompts;

pub use actor::{Executor, ExecutorArgs, ExecutorMsg, Launch, Place};
pub use host::HeadStart;

use std::path::{Path, PathBuf};

use troupe_runtime::home::Home;
use troupe_runtime::id::SubagentId;

/// The longest line of harness output read as one record; a longer one
/// fails the instance (its output is spilled whole all the same).
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// The kind executor instances have in the tree and in events.
pub const KIND: &str = "executor";

/// Where harness `name` keeps what troupe gives it: its sessions (shared by
/// its instances, so one can continue another's) and a folder per instance.
pub fn state_dir(home: &Home, name: &str) -> PathBuf {
    home.root().join("executors").join(name)
}

/// The sessions folder of harness `name`.
pub fn sessions_dir(home: &Home, name: &str) -> PathBuf {
    state_dir(home, name).join("sessions")
}

/// The folder of one instance: its harness config, its output.
pub fn instance_dir(home: &Home, name: &str, id: SubagentId) -> PathBuf {
    state_dir(home, name).join("instances").join(id.to_string())
}

/// The file holding everything an instance printed.
pub fn output_file(home: &Home, name: &str, id: SubagentId) -> PathBuf {
    instance_dir(home, name, id).join("output.jsonl")
}

/// Checks the folder a task names (absolute, or relative to `cwd`): it
/// must be a folder, not troupe's home or inside it, and not a system
/// folder. Returns its real path.
pub fn check_folder(home: &Home, cwd: &Path, raw: &str) -> Result<PathBuf, String> {
    let raw = raw.trim();
    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .unwrap_or_else(|| PathBuf::from(raw)),
        None => PathBuf::from(raw),
    };
    let real = std::fs::canonicalize(cwd.join(&expanded)).map_err(|e| {
        format!("folder `{raw}` cannot be used ({e}); create it first, or name an existing folder")
    })?;
    if !real.is_dir() {
        return Err(format!(
            "`{raw}` is not a folder; an executor works in a folder"
        ));
    }
    let home_root =
        std::fs::canonicalize(home.root()).unwrap_or_else(|_| home.root().to_path_buf());
    if real.starts_with(&home_root) {
        return Err(format!(
            "folder `{raw}` is inside troupe's home ({}); an executor never works there. Name a project folder",
            home_root.display()
        ));
    }
    if real == Path::new("/") {
        return Err(
            "an executor cannot work on the whole machine (`/`); name a project folder".into(),
        );
    }
    for area in troupe_tools::paths::SYSTEM_AREAS {
        if real.starts_with(area) {
            return Err(format!(
                "folder `{raw}` is in the system folder {area}; name a project folder"
            ));
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_folder_is_never_the_home_nor_a_system_folder() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        std::fs::create_dir_all(home.root().join("x")).unwrap();
        std::fs::create_dir_all(dir.path().join("proj")).unwrap();
        let cwd = dir.path();
        assert!(check_folder(&home, cwd, "home")
            .unwrap_err()
            .contains("inside troupe's home"));
        assert!(check_folder(&home, cwd, "home/x")
            .unwrap_err()
            .contains("inside troupe's home"));
        assert!(check_folder(&home, cwd, "/")
            .unwrap_err()
            .contains("whole machine"));
        assert!(check_folder(&home, cwd, "/usr/bin")
            .unwrap_err()
            .contains("system folder"));
        assert!(check_folder(&home, cwd, "missing")
            .unwrap_err()
            .contains("create it first"));
        assert_eq!(
            check_folder(&home, cwd, "proj").unwrap(),
            std::fs::canonicalize(dir.path().join("proj")).unwrap()
        );
    }
}

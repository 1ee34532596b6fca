//! An instance's harness on the machine: its folder of state, its model
//! relay, its config files and its process in the `run_command` sandbox —
//! started ahead of the instance's admission.
//!
//! Starting a harness costs a few milliseconds of troupe's work (the
//! folders, the relay, `models.json`, bubblewrap's spawn), and then the
//! harness's own start-up (node's, tens of milliseconds). Recording the
//! delegation — the admission's transaction, within the limits — does
//! not depend on any of it, so `delegate` starts the process while that
//! transaction commits ([`HeadStart::begin`]) instead of after it, and the
//! Delegation and Executor actors start while the harness does. What keeps
//! this safe:
//!
//! - The gate's decision comes first: the tool call that asks for the
//!   instance was approved before any of this runs; only the commit
//!   overlaps.
//! - The harness gets its task (the first lines on its input) only from
//!   its actor, which starts once the admission committed: until then it
//!   runs nothing but its own start-up.
//! - A refused admission (a limit, a store error) abandons it
//!   ([`HeadStart::abandon`]): its process group is killed, its output read
//!   to its end (every process of its sandbox gone), its instance folder
//!   removed. Nothing of it is recorded, so nothing is reported twice.
//! - A crash of troupe in between kills it like any instance (bubblewrap
//!   dies with its parent, and its sandbox with it): either the admission
//!   had committed, and the next start reports the instance interrupted,
//!   or it had not, and there is nothing of it anywhere.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, ChildStdin};
use tokio_util::sync::{CancellationToken, DropGuard};
use troupe_runtime::executors::Installed;
use troupe_runtime::sandbox::{Confinement, Sandbox};

use super::actor::{Launch, Output};
use super::harness::{self, Harness, Setup};
use crate::environment::relay::{Offered, Relay};
use crate::node::Node;

/// How long an abandoned harness's processes have to be gone.
const ABANDON_WAIT: Duration = Duration::from_secs(5);

/// The harness's process group, killed when dropped.
pub(super) struct Group(Option<rustix::process::Pid>);

impl Group {
    /// Kills every process of the group.
    pub(super) fn kill(&self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }

    /// Asks it to stop, as Ctrl-C in its terminal would.
    pub(super) fn interrupt(&self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::INT);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A started harness: how to talk to it, read it, and end it.
pub(super) struct Started {
    /// Its input (a long-lived harness), if it takes any.
    pub input: Option<ChildStdin>,
    /// The lines written on its input once it runs: its task.
    pub first: Vec<String>,
    /// Its output.
    pub output: Output,
    /// Its process group on the machine (killed when dropped).
    pub group: Group,
    /// Its process on the machine, whose exit its actor watches.
    pub child: Option<Child>,
    /// Cancelled when the instance ends: its relay, its environment job.
    pub stop: CancellationToken,
    /// Cancels `stop` when dropped: a harness that never ran leaves no
    /// relay listening.
    pub stopped_on_drop: DropGuard,
}

impl Started {
    /// A harness with no process of its own on the machine (an
    /// environment's job), ended through `stop`.
    pub(super) fn job(output: Output, stop: CancellationToken) -> Self {
        Self {
            input: None,
            first: Vec::new(),
            output,
            group: Group(None),
            child: None,
            stopped_on_drop: stop.clone().drop_guard(),
            stop,
        }
    }
}

/// An instance's harness started on the machine before its admission
/// committed: handed to its actor once it did, abandoned if it was refused.
pub struct HeadStart {
    started: Result<Started, String>,
    dir: PathBuf,
}

impl std::fmt::Debug for HeadStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadStart")
            .field("started", &self.started.is_ok())
            .field("dir", &self.dir)
            .finish()
    }
}

impl HeadStart {
    /// Starts `launch`'s harness on the machine, without its task
    /// (`installed`: its install, when the caller has read it already).
    /// What fails is kept for the actor, which reports the instance failed
    /// once it is admitted, as if it had started it itself.
    pub(crate) async fn begin(node: &Node, launch: &Launch, installed: Option<Installed>) -> Self {
        let started = match harness::of(&launch.executor) {
            Some(harness) => start(node, launch, harness, installed).await,
            None => Err(format!(
                "troupe drives no executor called {}; `troupe executors list` names them",
                launch.executor
            )),
        };
        Self {
            started,
            dir: super::instance_dir(node.home(), &launch.executor, launch.sub),
        }
    }

    /// The started harness (or why it did not start), for its actor.
    pub(super) fn into_started(self) -> Result<Started, String> {
        self.started
    }

    /// Its admission was refused: kills its processes, waits until they
    /// are gone (its output closed by all of them), and removes its
    /// instance folder.
    pub(crate) async fn abandon(self) {
        if let Ok(started) = self.started {
            let Started {
                input,
                mut output,
                group,
                child,
                ..
            } = started;
            drop(input);
            let mut group = group;
            group.kill();
            // Reaped below: its id is not signalled again when dropped.
            group.0 = None;
            let gone = tokio::time::timeout(ABANDON_WAIT, async {
                if let Some(mut child) = child {
                    let _ = child.wait().await;
                }
                let mut buf = vec![0_u8; 16 * 1024];
                while matches!(output.next(&mut buf).await, Ok(n) if n > 0) {}
            })
            .await;
            if gone.is_err() {
                tracing::warn!(dir = %self.dir.display(), "a refused instance's harness was still running {} s after it was killed", ABANDON_WAIT.as_secs());
            }
        }
        match tokio::fs::remove_dir_all(&self.dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "a refused instance's folder could not be removed")
            }
        }
    }
}

/// Starts the harness on the machine, without its task: its folder of
/// state, its relay, its sandbox. `installed` is its install when the
/// caller has read it already (`delegate` did, to refuse a harness that is
/// not installed), else it is read here.
pub(super) async fn start(
    node: &Node,
    launch: &Launch,
    harness: &'static dyn Harness,
    installed: Option<Installed>,
) -> Result<Started, String> {
    let home = node.home();
    let name = launch.executor.as_str();
    let t = Instant::now();
    let mut phases = [0_u64; 5];
    let mut lap = |i: usize| {
        phases[i] = t.elapsed().as_micros() as u64;
    };
    let installed = installed
        .filter(|i| i.harness.name == name)
        .or_else(|| troupe_runtime::executors::installed(home, name))
        .ok_or_else(|| {
            format!("{name} is not installed here; `troupe executors install {name}` installs it")
        })?;
    let sandbox = Sandbox::detect().map_err(|why| {
        format!(
            "{name} runs commands without asking anyone, so troupe runs it only in a sandbox, \
             and none works here: {why}"
        )
    })?;
    lap(0);
    let dir = super::instance_dir(home, name, launch.sub);
    let sessions = launch.account_dir.clone();
    for d in [&dir, &sessions] {
        std::fs::create_dir_all(d)
            .map_err(|e| format!("{} could not be made: {e}", d.display()))?;
    }
    lap(1);

    // Its relay: on the machine's loopback, for this instance alone.
    let secret = secret();
    let model = super::pi::model_id(&launch.model);
    let endpoint = node
        .model_endpoint(&launch.model)
        .map_err(|e| e.to_string());
    // A model with no address is answered here: a script, or the provider
    // the program gave the node.
    let served = match &endpoint {
        Ok(_) => None,
        Err(_) => node
            .served_model(&launch.model)
            .or_else(|| node.model_override()),
    };
    let api = match (&endpoint, &served) {
        (Ok(e), _) => Some(e.api),
        (Err(_), Some(_)) => None,
        (Err(_), None) => Some(troupe_runtime::model::Api::Openai),
    };
    let offered = Offered {
        name: model.clone(),
        endpoint,
        served,
    };
    let stop = CancellationToken::new();
    let relay = Relay::new(format!("executor {}", launch.sub), vec![offered])
        .with_secret(secret.clone())
        .with_prompter(super::prompts::UserPrompts::for_instance(
            node,
            launch,
            stop.clone(),
        ));
    // The relay stops with the instance, or now if the harness cannot start.
    let stopped_on_drop = stop.clone().drop_guard();
    let addr = relay
        .listen(stop.clone())
        .await
        .map_err(|e| format!("its model relay could not listen on the loopback: {e}"))?;
    lap(2);
    let session = launch.session.as_ref().map(|s| s.display().to_string());
    let start = harness.start(&Setup {
        dir: &dir,
        sessions: &sessions,
        folder: &launch.folder,
        relay: addr.to_string(),
        key: &secret,
        model: &model,
        api,
        prompt: &launch.prompt,
        session: session.as_deref(),
        prompts: true,
    })?;
    for (path, text) in &start.files {
        write_private(path, text)?;
    }
    lap(3);

    // Its sandbox: the folder writable, the home hidden but for its own
    // state (writable) and its installed files (read-only).
    let confinement = Confinement {
        writable: vec![launch.folder.clone(), dir.clone(), sessions.clone()],
        read_only: vec![installed.modules.clone()],
        network: troupe_runtime::sandbox::Network::Machine,
        hidden: vec![home.root().to_path_buf()],
    };
    let (program, argv) = if installed.harness.native {
        (installed.entry.display().to_string(), start.args)
    } else {
        let mut argv = vec![installed.entry.display().to_string()];
        argv.extend(start.args);
        ("node".to_string(), argv)
    };
    let mut command = sandbox.command(&program, &argv, &launch.folder, &confinement);
    let stderr = std::fs::File::create(dir.join("stderr.log"))
        .map_err(|e| format!("its error log could not be made: {e}"))?;
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &dir)
        .env("LANG", "C.UTF-8")
        .envs(start.env)
        .stdin(if harness.long_lived() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr));
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("{name} could not start: {e}"))?;
    let input = child.stdin.take();
    let output = child
        .stdout
        .take()
        .map(Output::Pipe)
        .ok_or_else(|| format!("{name}'s output could not be read"))?;
    let group = Group(
        child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw),
    );
    lap(4);
    tracing::debug!(
        instance = %launch.sub,
        installed_us = phases[0],
        dirs_us = phases[1],
        relay_us = phases[2],
        files_us = phases[3],
        spawned_us = phases[4],
        "harness spawned"
    );
    Ok(Started {
        input,
        first: start.input,
        output,
        group,
        child: Some(child),
        stop,
        stopped_on_drop,
    })
}

/// How a process ended, in words.
pub(super) fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "ended".into(),
    }
}

/// A file only its owner reads (the relay's secret is in it).
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{} could not be written: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{} could not be written: {e}", path.display()))
}

/// A per-instance secret: 32 random bytes, hex.
fn secret() -> String {
    use rand::RngCore;
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

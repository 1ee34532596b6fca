//! Environments: a house's places where commands run, each in a sandbox of
//! its own, each an actor under the node's tree.
//!
//! ```text
//! node
//! └─ environments   the router of environments by id (one_for_one, transient)
//!    └─ sandbox_…   one environment (its id keeps its stored prefix): its
//!                   commands, control group, idle clock
//! ```
//!
//! - [`actor`] — the environment actor;
//! - [`relay`] — its model relay: troupe's models, reached from inside
//!   without a key; [`egress`] — its proxy to the allow-listed endpoints;
//! - [`api`] — the Rust API: [`HouseRef::environments`] and
//!   [`EnvironmentsRef`] (what `troupe env` uses);
//! - [`tools`] — the node's [`EnvironmentServices`], behind
//!   `create_environment`, `list_sandboxes` and a house turn's `run_command`.
//!
//! An environment is provisioned on demand (or an unbound one of the house
//! reused) and bound to threads; its actor is activated by its first
//! message and stops itself after `[environments] idle_secs` without a
//! command, killing what it runs (the workdir stays, under
//! `<home>/environments/<id>/work`, across restarts of troupe too). A
//! crashed actor is restarted by the router; the commands it was running
//! are reported lost. Creation fails closed: without a working sandbox —
//! bubblewrap, and every restriction the helper applies — no environment
//! is made, unless the house's own policy allows unsandboxed ones.
//!
//! [`HouseRef::environments`]: crate::house::HouseRef::environments
//! [`EnvironmentServices`]: troupe_runtime::environment::EnvironmentServices

pub mod actor;
pub mod api;
pub mod egress;
pub mod quota;
pub mod relay;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use ractor::{ActorCell, ActorProcessingErr, ActorRef};
use troupe_runtime::environment::EnvironmentSettings;
use troupe_runtime::home::Home;
use troupe_runtime::id::{EnvironmentId, ThreadId};
use troupe_runtime::router::{Router, RouterConfig, RouterEvent};
use troupe_runtime::sandbox::cgroup::Cgroup;
use troupe_runtime::sandbox::jail::{Jail, Rlimits};
use troupe_runtime::sandbox::zygote::{Exit, Zygote};
use troupe_runtime::sandbox::Sandbox;
use troupe_runtime::store::environments::{self as table, EnvironmentRow};
use troupe_runtime::supervise::{Backoff, Intensity, Restart};

pub use actor::EnvironmentMsg;
pub use api::EnvironmentsRef;

use crate::node::routed::{Routed, RoutedKind};
use crate::node::{ActorInfo, Branch, WeakNode};

/// The folder of an environment: `<home>/environments/<id>`.
pub fn folder(home: &Home, id: EnvironmentId) -> PathBuf {
    home.root().join("environments").join(id.to_string())
}

/// The workdir of an environment: `<home>/environments/<id>/work`.
pub fn workdir(home: &Home, id: EnvironmentId) -> PathBuf {
    folder(home, id).join("work")
}

/// Where installed outside executors are seen inside an environment.
pub const EXECUTORS_INSIDE: &str = "/run/troupe/executors";

/// The read-only binds that show the installed outside executors inside
/// an environment (`delegate_task` runs them there).
pub fn executor_binds(home: &Home) -> Vec<(PathBuf, PathBuf)> {
    troupe_runtime::executors::HARNESSES
        .iter()
        .filter_map(|h| troupe_runtime::executors::installed(home, h.name))
        .map(|i| {
            let inside = PathBuf::from(EXECUTORS_INSIDE)
                .join(i.harness.name)
                .join("node_modules");
            (i.modules, inside)
        })
        .collect()
}

/// The jail an environment's commands run in.
pub(crate) fn jail_for(
    settings: &EnvironmentSettings,
    row: &EnvironmentRow,
    workdir: &Path,
    group: Option<&Cgroup>,
) -> Jail {
    let own_user = row.uid.is_some() && rustix::process::geteuid().is_root();
    let pids_capped = group.is_some_and(|g| g.pids);
    let memory_capped = group.is_some_and(|g| g.memory);
    Jail {
        helper: helper_program(settings),
        workdir: workdir.to_path_buf(),
        uid: row.uid,
        rlimits: Rlimits {
            // A process's address space is a poor measure of memory:
            // used only where no control group counts the real thing.
            address_space: (!memory_capped).then(|| settings.memory_bytes()),
            // Counted per user: meaningful where the user is the
            // environment's own, or where nothing else caps processes.
            processes: (own_user || !pids_capped).then_some(settings.processes),
            cpu_secs: settings.cpu_secs,
            file_size: settings.disk_bytes(),
            open_files: 4096,
        },
        network: settings.network,
        cgroups: group.map(Cgroup::procs).unwrap_or_default(),
        commands_cgroup: group.and_then(Cgroup::commands_procs),
        landlock: settings.landlock,
        listen: Vec::new(),
        env: Vec::new(),
        binds: Vec::new(),
    }
}

/// The `troupe` binary that holds the helper.
pub fn helper_program(settings: &EnvironmentSettings) -> PathBuf {
    settings
        .helper
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("troupe"))
}

impl Branch for Environments {
    fn live(&self) -> Vec<ActorInfo> {
        self.routed.actors()
    }

    fn stop(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(Environments::stop(self))
    }
}

/// The node's environments: their router, the threads bound to them, and
/// their control groups.
pub struct Environments {
    node: WeakNode,
    routed: Routed<EnvironmentId, EnvironmentMsg>,
    bindings: DashMap<ThreadId, EnvironmentId>,
    groups: DashMap<EnvironmentId, Option<Cgroup>>,
    readiness: tokio::sync::OnceCell<Result<(), String>>,
    changes: Arc<AtomicU64>,
}

/// A tool source with no tools whose generation moves when a thread is
/// bound or unbound: conversations recompute their tools before their
/// next model call (`create_environment` is offered only to a thread
/// without an environment).
#[derive(Default, Clone)]
pub(crate) struct BindingChanges(Arc<AtomicU64>);

impl BindingChanges {
    /// The tool source whose generation moves with the bindings (added to
    /// the node's registry when it starts).
    pub(crate) fn source(&self) -> Arc<dyn troupe_runtime::tool::registry::ToolSource> {
        Arc::new(self.clone())
    }
}

impl troupe_runtime::tool::registry::ToolSource for BindingChanges {
    fn tools(&self) -> Vec<Arc<dyn troupe_runtime::tool::Tool>> {
        Vec::new()
    }

    fn get(&self, _name: &str) -> Option<Arc<dyn troupe_runtime::tool::Tool>> {
        None
    }

    fn generation(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Environments {
    /// The environments of the node `node` (not running until the root
    /// starts their router).
    pub(crate) fn new(node: WeakNode, changes: &BindingChanges) -> Self {
        Self {
            node,
            routed: Routed::new("environments", "environment"),
            bindings: DashMap::new(),
            groups: DashMap::new(),
            readiness: tokio::sync::OnceCell::new(),
            changes: Arc::clone(&changes.0),
        }
    }
}

impl Drop for Environments {
    /// A node dropped without a shutdown leaves no control group behind.
    fn drop(&mut self) {
        for entry in self.groups.iter() {
            if let Some(group) = entry.value() {
                group.remove();
            }
        }
    }
}

impl std::fmt::Debug for Environments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environments").finish_non_exhaustive()
    }
}

impl Environments {
    /// The environment bound to `thread`.
    pub fn bound(&self, thread: ThreadId) -> Option<EnvironmentId> {
        self.bindings.get(&thread).map(|e| *e)
    }

    pub(crate) fn bind(&self, thread: ThreadId, env: EnvironmentId) {
        self.bindings.insert(thread, env);
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn unbind_env(&self, env: EnvironmentId) {
        self.bindings.retain(|_, e| *e != env);
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    /// Environments whose actor is live now.
    pub fn live(&self) -> Vec<EnvironmentId> {
        self.routed.live()
    }

    pub(crate) fn router(&self) -> Result<Router<EnvironmentId, EnvironmentMsg>, String> {
        self.routed
            .router()
            .map_err(|_| "the node's environments have stopped".to_string())
    }

    /// The control group of `id`, made by `make` the first time.
    pub(crate) fn group(
        &self,
        id: EnvironmentId,
        make: impl FnOnce() -> Option<Cgroup>,
    ) -> Option<Cgroup> {
        self.groups.entry(id).or_insert_with(make).clone()
    }

    /// Kills what is left in `id`'s control group and removes it.
    pub(crate) fn remove_group(&self, id: EnvironmentId) {
        if let Some((_, Some(group))) = self.groups.remove(&id) {
            group.remove();
        }
    }

    /// Kills what is left in `id`'s control group (its actor exited).
    fn empty_group(&self, id: EnvironmentId) {
        if let Some(group) = self.groups.get(&id) {
            if let Some(group) = group.value() {
                group.kill_all();
            }
        }
    }

    /// Asks the router to passivate `id`'s incarnation `actor` (from a task:
    /// the actor does not wait for its own stop).
    pub(crate) fn passivate(&self, id: EnvironmentId, actor: ractor::ActorId) {
        if let Ok(router) = self.router() {
            tokio::spawn(async move {
                let _ = router.passivate(id, actor).await;
            });
        }
    }

    /// Whether environments can run sandboxed here: checked once per
    /// process by running `true` through the whole chain (helper, bwrap,
    /// Landlock, seccomp, rlimits). The error says what is missing and
    /// how to get it.
    pub(crate) async fn readiness(&self, node: &crate::node::Node) -> Result<(), String> {
        let settings = node.settings().environments.clone();
        let root = node.home().root().join("environments");
        self.readiness
            .get_or_init(|| async move {
                let prepared = tokio::task::spawn_blocking(move || prepare_probe(&settings, &root))
                    .await
                    .unwrap_or_else(|e| Err(format!("the sandbox check failed: {e}")));
                match prepared {
                    Ok((sandbox, jail)) => probe(sandbox, &jail).await,
                    Err(why) => Err(why),
                }
            })
            .await
            .clone()
    }

    pub(crate) async fn stop(&self) {
        self.routed.stop().await;
        for entry in self.groups.iter() {
            if let Some(group) = entry.value() {
                group.remove();
            }
        }
        self.groups.clear();
    }
}

/// A jail like an environment's, on a scratch workdir, for [`probe`].
fn prepare_probe(
    settings: &EnvironmentSettings,
    root: &Path,
) -> Result<(&'static Sandbox, Jail), String> {
    let sandbox = Sandbox::detect().map_err(|why| {
        format!(
            "no sandbox works on this machine: {why}. To use environments, {}",
            troupe_runtime::sandbox::INSTALL_HINT
        )
    })?;
    let helper = helper_program(settings);
    if !helper.is_file() {
        return Err(format!(
            "the sandbox helper {} is missing; set [environments] helper to the troupe binary",
            helper.display()
        ));
    }
    let scratch = root.join(".probe");
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("could not make {}: {e}", scratch.display()))?;
    let root_user = rustix::process::geteuid().is_root();
    let uid = root_user.then_some(table::FIRST_UID - 1);
    if let Some(uid) = uid {
        std::os::unix::fs::chown(&scratch, Some(uid), Some(uid))
            .map_err(|e| format!("could not prepare {}: {e}", scratch.display()))?;
    }
    // Like a workdir: its user's, entered (not read) by the sandbox's setup.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| format!("could not prepare {}: {e}", scratch.display()))?;
    let row = EnvironmentRow {
        id: EnvironmentId::new(),
        house: troupe_runtime::id::HouseId::new(),
        uid,
        sandboxed: true,
        stopped: false,
        created_at: chrono::Utc::now(),
        last_used: chrono::Utc::now(),
        threads: Vec::new(),
        lost: 0,
    };
    Ok((sandbox, jail_for(settings, &row, &scratch, None)))
}

/// Starts a sandbox in `jail` and runs `true` in it.
async fn probe(sandbox: &Sandbox, jail: &Jail) -> Result<(), String> {
    let refused = |why: String| format!("the sandbox cannot apply every restriction here: {why}");
    let zygote = Zygote::start(sandbox, jail, None).await.map_err(refused)?;
    let output = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("could not open /dev/null: {e}"))?;
    let job = zygote
        .run("true", std::os::fd::OwnedFd::from(output))
        .await
        .map_err(refused)?;
    match tokio::time::timeout(Duration::from_secs(20), job.ended).await {
        Ok(Ok(Exit::Code(0))) => Ok(()),
        Ok(Ok(other)) => Err(refused(format!("`true` ended with {other:?}"))),
        Ok(Err(_)) => Err(refused("its process died while running `true`".into())),
        Err(_) => Err(refused("`true` did not end within 20 s".into())),
    }
}

/// Environments are activated by their first message and passivate
/// themselves when idle; every exit, a crash included, empties the
/// control group of what the actor's processes left.
#[async_trait::async_trait]
impl RoutedKind for Environments {
    type Key = EnvironmentId;
    type Msg = EnvironmentMsg;

    fn routed(&self) -> &Routed<EnvironmentId, EnvironmentMsg> {
        &self.routed
    }

    fn config(&self) -> RouterConfig {
        RouterConfig {
            // Each actor knows when it is idle (no command running) and asks.
            idle_after: None,
            restart: Restart::Transient,
            intensity: Intensity::new(5, Duration::from_secs(60)),
            backoff: Backoff::None,
            shutdown: Duration::from_secs(5),
            events: 256,
            report_activations: false,
        }
    }

    async fn activate(
        self: Arc<Self>,
        id: EnvironmentId,
        supervisor: ActorCell,
        restarted: bool,
    ) -> Result<ActorRef<EnvironmentMsg>, ActorProcessingErr> {
        let (actor, _) = ractor::Actor::spawn_linked(
            None,
            actor::EnvironmentActor,
            actor::EnvironmentArgs {
                node: self.node.clone(),
                environments: Arc::downgrade(&self),
                id,
                restarted,
            },
            supervisor,
        )
        .await?;
        Ok(actor)
    }

    /// Loads which thread each environment is bound to.
    async fn prepare(&self) -> Result<(), ActorProcessingErr> {
        let node = self.node.upgrade().ok_or("the node is stopping")?;
        for (thread, env) in node.store().read(table::bindings).await? {
            self.bind(thread, env);
        }
        Ok(())
    }

    async fn on_event(&self, event: RouterEvent<EnvironmentId>) {
        match event {
            RouterEvent::Exited { key, .. } | RouterEvent::GaveUp { key, .. } => {
                self.empty_group(key);
            }
            RouterEvent::Activated { .. } | RouterEvent::Passivated { .. } => {}
        }
    }
}

//! The Rust API of environments: [`HouseRef::environments`], then an
//! [`EnvironmentsRef`] to list, create, run commands in and stop a house's
//! environments. Every call is scoped to its house.

use std::time::Duration;

use troupe_runtime::environment::{
    CommandOutcome, EnvironmentInfo, EnvironmentStatus, HouseEnvironmentPolicy,
};
use troupe_runtime::id::{EnvironmentId, ThreadId};
use troupe_runtime::rusqlite::{params, OptionalExtension};
use troupe_runtime::store::environments::{self as table, EnvironmentRow};

use super::EnvironmentMsg;
use crate::house::HouseRef;
use crate::node::{Node, NodeError};

fn refused(text: impl Into<String>) -> NodeError {
    NodeError::Refused(text.into())
}

impl HouseRef {
    /// The house's environments.
    pub fn environments(&self) -> EnvironmentsRef {
        EnvironmentsRef {
            house: self.clone(),
        }
    }
}

/// The environments of one house.
#[derive(Debug, Clone)]
pub struct EnvironmentsRef {
    house: HouseRef,
}

/// What [`EnvironmentsRef::create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioned {
    /// The environment.
    pub info: EnvironmentInfo,
    /// Whether an existing, unbound environment was reused.
    pub reused: bool,
}

impl EnvironmentsRef {
    fn node(&self) -> &Node {
        self.house.node()
    }

    /// Its environments, newest first (stopped ones with `include_stopped`).
    pub async fn list(
        &self,
        include_stopped: bool,
        limit: usize,
    ) -> Result<Vec<EnvironmentInfo>, NodeError> {
        let house = self.house.house.id;
        let rows = self
            .node()
            .store()
            .read(move |c| table::list(c, house, include_stopped, limit))
            .await?;
        Ok(rows.into_iter().map(|r| self.info(r)).collect())
    }

    /// The environment `id` of this house.
    pub async fn get(&self, id: EnvironmentId) -> Result<EnvironmentInfo, NodeError> {
        let house = self.house.house.id;
        let row = self
            .node()
            .store()
            .read(move |c| table::get(c, id))
            .await?
            .filter(|r| r.house == house)
            .ok_or_else(|| {
                refused(format!(
                    "`{}` has no environment {id}; `troupe env list {}` lists them",
                    self.house.house.name, self.house.house.name
                ))
            })?;
        Ok(self.info(row))
    }

    /// The environment `reference` names: its id, or the thread bound to it
    /// (an id, name or link).
    pub async fn find(&self, reference: &str) -> Result<EnvironmentInfo, NodeError> {
        if let Ok(id) = reference.parse::<EnvironmentId>() {
            return self.get(id).await;
        }
        let thread = self.house.thread(reference).await?;
        let id = self
            .node()
            .environments()
            .bound(thread.info.id)
            .ok_or_else(|| {
                refused(format!(
                    "thread `{}` has no environment; `troupe env create {} --thread {}` makes one",
                    thread.info.label(),
                    self.house.house.name,
                    thread.info.label()
                ))
            })?;
        self.get(id).await
    }

    fn info(&self, row: EnvironmentRow) -> EnvironmentInfo {
        let live = self.node().environments().live().contains(&row.id);
        EnvironmentInfo {
            id: row.id,
            house: row.house,
            status: if row.stopped {
                EnvironmentStatus::Stopped
            } else if live {
                EnvironmentStatus::Active
            } else {
                EnvironmentStatus::Idle
            },
            sandboxed: row.sandboxed,
            created_at: row.created_at,
            last_used: row.last_used,
            threads: row.threads,
            workdir: super::workdir(self.node().home(), row.id),
            lost_commands: row.lost,
        }
    }

    /// The house's policy about environments.
    pub async fn policy(&self) -> Result<HouseEnvironmentPolicy, NodeError> {
        Ok(house_policy(self.node().store(), self.house.house.id)
            .await?
            .map(|(_, policy)| policy)
            .unwrap_or_default())
    }

    /// Sets the house's policy about environments.
    pub async fn set_policy(&self, policy: HouseEnvironmentPolicy) -> Result<(), NodeError> {
        let id = self.house.house.id.to_string();
        let json = serde_json::to_string(&policy).map_err(|e| refused(e.to_string()))?;
        self.node()
            .store()
            .write(move |tx| {
                tx.execute(
                    "UPDATE houses SET settings = json_set(settings, '$.environments', json(?2)) \
                     WHERE id = ?1",
                    params![id, json],
                )?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Provisions an environment (or reuses an unbound one of the house)
    /// and binds `thread` to it when given. Fails closed: without a
    /// working sandbox, no environment is made unless the house's policy
    /// allows unsandboxed ones.
    pub async fn create(&self, thread: Option<ThreadId>) -> Result<Provisioned, NodeError> {
        if let Some(thread) = thread {
            if let Some(env) = self.node().environments().bound(thread) {
                return Ok(Provisioned {
                    info: self.get(env).await?,
                    reused: true,
                });
            }
        }
        let sandboxed = match self.node().environments().readiness(self.node()).await {
            Ok(()) => true,
            Err(why) => {
                if !self.policy().await?.allow_unsandboxed {
                    return Err(refused(format!(
                        "no environment was made: {why}. Environments run only in a sandbox \
                         unless the house allows otherwise (`troupe env policy {} \
                         --allow-unsandboxed`, which marks every command's result unsandboxed)",
                        self.house.house.name
                    )));
                }
                false
            }
        };
        let house = self.house.house.id;
        let with_uid = rustix::process::geteuid().is_root();
        let (row, reused) = self
            .node()
            .store()
            .write(move |tx| {
                let reusable = match table::unbound(tx, house)? {
                    Some(id) => table::get(tx, id)?.filter(|r| r.sandboxed == sandboxed),
                    None => None,
                };
                let (row, reused) = match reusable {
                    Some(row) => (row, true),
                    None => (table::create(tx, house, sandboxed, with_uid)?, false),
                };
                if let Some(thread) = thread {
                    table::bind(tx, row.id, thread)?;
                }
                let row = table::get(tx, row.id)?.unwrap_or(row);
                Ok((row, reused))
            })
            .await?;
        if let Some(thread) = thread {
            self.node().environments().bind(thread, row.id);
        }
        // Provisioned now: the workdir, the control group, the actor.
        let router = self.node().environments().router().map_err(refused)?;
        router
            .call(row.id, EnvironmentMsg::Touch, Duration::from_secs(30))
            .await
            .map_err(|e| refused(format!("the environment {} did not start: {e}", row.id)))?;
        Ok(Provisioned {
            info: self.info(row),
            reused,
        })
    }

    /// Binds `thread` to the environment `id` (another thread may share it).
    pub async fn bind(&self, id: EnvironmentId, thread: ThreadId) -> Result<(), NodeError> {
        let info = self.get(id).await?;
        if info.status == EnvironmentStatus::Stopped {
            return Err(refused(format!("environment {id} is stopped")));
        }
        self.node()
            .store()
            .write(move |tx| table::bind(tx, id, thread))
            .await?;
        self.node().environments().bind(thread, id);
        Ok(())
    }

    /// Runs `command` in the environment `id`, at most `timeout` (the
    /// default of `[environments]` when `None`).
    pub async fn exec(
        &self,
        id: EnvironmentId,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<CommandOutcome, NodeError> {
        let info = self.get(id).await?;
        if info.status == EnvironmentStatus::Stopped {
            return Err(refused(format!(
                "environment {id} is stopped; create another (`troupe env create {}`)",
                self.house.house.name
            )));
        }
        run(self.node(), id, command, timeout).await
    }

    /// [`exec`](Self::exec) for the house's owner to free space while the
    /// workdir is over its quota (`troupe env exec --free-space`): it runs
    /// where every other command is refused, and is killed if it makes the
    /// workdir grow.
    pub async fn free_space(
        &self,
        id: EnvironmentId,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<CommandOutcome, NodeError> {
        let info = self.get(id).await?;
        if info.status == EnvironmentStatus::Stopped {
            return Err(refused(format!("environment {id} is stopped")));
        }
        run_to_free_space(self.node(), id, command, timeout).await
    }

    /// Stops the environment `id` for good: its processes are killed, its
    /// threads unbound; its workdir stays on disk.
    pub async fn stop(&self, id: EnvironmentId) -> Result<EnvironmentInfo, NodeError> {
        self.get(id).await?;
        self.node()
            .store()
            .write(move |tx| table::stop(tx, id))
            .await?;
        self.node().environments().unbind_env(id);
        if self.node().environments().live().contains(&id) {
            if let Ok(router) = self.node().environments().router() {
                let _ = router
                    .call(id, EnvironmentMsg::Stop, Duration::from_secs(30))
                    .await;
            }
        }
        self.node().environments().remove_group(id);
        self.get(id).await
    }

    /// Makes the actor of `id` fail (tests of supervision).
    #[doc(hidden)]
    pub async fn inject_failure(&self, id: EnvironmentId) -> Result<(), NodeError> {
        let router = self.node().environments().router().map_err(refused)?;
        router
            .send(id, EnvironmentMsg::Fail)
            .map_err(|e| refused(e.to_string()))
    }
}

/// The name and environment policy of `house` (`None`: no such house).
pub(crate) async fn house_policy(
    store: &troupe_runtime::store::Store,
    house: troupe_runtime::id::HouseId,
) -> Result<Option<(String, HouseEnvironmentPolicy)>, troupe_runtime::store::StoreError> {
    let id = house.to_string();
    let found: Option<(String, String)> = store
        .read(move |c| {
            Ok(
                c.prepare_cached("SELECT name, settings FROM houses WHERE id = ?1")?
                    .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?,
            )
        })
        .await?;
    Ok(found.map(|(name, settings)| {
        let policy = serde_json::from_str::<serde_json::Value>(&settings)
            .ok()
            .and_then(|v| v.get("environments").cloned())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        (name, policy)
    }))
}

/// Runs `command` in environment `id` through its actor.
pub(crate) async fn run(
    node: &Node,
    id: EnvironmentId,
    command: &str,
    timeout: Option<Duration>,
) -> Result<CommandOutcome, NodeError> {
    run_watched(node, id, command, timeout, None).await
}

/// [`run`] for the house's owner while the workdir is over its quota: the
/// command runs, and is killed if it makes the workdir grow.
pub(crate) async fn run_to_free_space(
    node: &Node,
    id: EnvironmentId,
    command: &str,
    timeout: Option<Duration>,
) -> Result<CommandOutcome, NodeError> {
    run_ordered(node, id, command, timeout, None, true).await
}

/// [`run`], with `watch` given the output as it comes.
pub(crate) async fn run_watched(
    node: &Node,
    id: EnvironmentId,
    command: &str,
    timeout: Option<Duration>,
    watch: Option<super::actor::Watch>,
) -> Result<CommandOutcome, NodeError> {
    run_ordered(node, id, command, timeout, watch, false).await
}

async fn run_ordered(
    node: &Node,
    id: EnvironmentId,
    command: &str,
    timeout: Option<Duration>,
    watch: Option<super::actor::Watch>,
    free_space: bool,
) -> Result<CommandOutcome, NodeError> {
    let settings = &node.settings().environments;
    let timeout = timeout
        .unwrap_or(Duration::from_secs(settings.command_timeout_secs))
        .min(Duration::from_secs(settings.max_command_timeout_secs));
    let router = node.environments().router().map_err(refused)?;
    let owned = command.to_string();
    let answer = router
        .call(
            id,
            move |reply| EnvironmentMsg::Run {
                command: owned,
                timeout,
                watch,
                free_space,
                reply,
            },
            timeout + Duration::from_secs(30),
        )
        .await;
    match answer {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(why)) => Err(refused(why)),
        Err(troupe_runtime::router::RouterError::NoReply { .. }) => Err(refused(format!(
            "the command's outcome is lost: environment {id} stopped or failed while it ran \
             (its processes were killed). It was not run again; run it again if it is safe to"
        ))),
        Err(e) => Err(refused(e.to_string())),
    }
}

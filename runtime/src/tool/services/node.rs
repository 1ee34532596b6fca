//! The typed part of a tool call's services the node sets once, when it
//! starts, and every conversation shares: the store, the handles through
//! which tools reach the actors above them, the tool sources started late,
//! its background commands and whom one's end is told, the executors'
//! accounts it started with, the files conversations read.

use std::sync::Arc;

use parking_lot::RwLock;

use super::agents::{AgentServices, Agents};
use super::background_commands::BackgroundCommandServices;
use super::command_notifier::CommandNotifier;
use super::environments::Environments;
use super::houses::Houses;
use crate::executors::settings::Executors;
use crate::store::house_files::FileLimits;
use crate::store::Store;
use crate::tool::catalog::Lazy;
use crate::tool::ledger::ReadLedger;

/// What the node lends every conversation's tools, each typed, each unset
/// (`None`) where no node set it (a tool run alone, a test): a tool then
/// answers that it needs a node, a house or an environment.
#[derive(Default)]
pub struct NodeServices {
    store: Slot<Store>,
    houses: Slot<Arc<Houses>>,
    environments: Slot<Arc<Environments>>,
    agents: Slot<Arc<dyn AgentServices>>,
    file_limits: Slot<FileLimits>,
    lazy_sources: Slot<Arc<Lazy>>,
    command_notifier: Slot<Arc<dyn CommandNotifier>>,
    background_commands: Slot<Arc<dyn BackgroundCommandServices>>,
    executors: Slot<Arc<Executors>>,
    read_ledger: Arc<ReadLedger>,
}

/// One service: set at start-up (or by a test), read by every call.
struct Slot<T>(RwLock<Option<T>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self(RwLock::new(None))
    }
}

impl<T: Clone> Slot<T> {
    fn get(&self) -> Option<T> {
        self.0.read().clone()
    }

    fn set(&self, value: T) {
        *self.0.write() = Some(value);
    }

    fn get_or_set_with(&self, make: impl FnOnce() -> T) -> T {
        if let Some(value) = self.get() {
            return value;
        }
        // Another caller may have set it meanwhile.
        self.0.write().get_or_insert_with(make).clone()
    }
}

impl NodeServices {
    /// The store.
    pub fn store(&self) -> Option<Store> {
        self.store.get()
    }

    /// Sets the store.
    pub fn set_store(&self, store: Store) {
        self.store.set(store);
    }

    /// The house threads' services.
    pub fn houses(&self) -> Option<Arc<Houses>> {
        self.houses.get()
    }

    /// Sets the house threads' services.
    pub fn set_houses(&self, houses: Houses) {
        self.houses.set(Arc::new(houses));
    }

    /// The environments' services.
    pub fn environments(&self) -> Option<Arc<Environments>> {
        self.environments.get()
    }

    /// Sets the environments' services.
    pub fn set_environments(&self, environments: Environments) {
        self.environments.set(Arc::new(environments));
    }

    /// What the actors do for the agent tools (`delegate`, `ask_user`, …).
    pub fn agents(&self) -> Option<Arc<dyn AgentServices>> {
        self.agents.get()
    }

    /// Sets what the actors do for the agent tools.
    pub fn set_agents(&self, agents: Agents) {
        self.agents.set(agents.0);
    }

    /// How big house files may grow (`[files]`).
    pub fn file_limits(&self) -> Option<FileLimits> {
        self.file_limits.get()
    }

    /// Sets how big house files may grow.
    pub fn set_file_limits(&self, limits: FileLimits) {
        self.file_limits.set(limits);
    }

    /// The tool sources started when first needed (MCP servers not
    /// loaded yet), for `tool_search`.
    pub fn lazy_sources(&self) -> Option<Arc<Lazy>> {
        self.lazy_sources.get()
    }

    /// Sets the tool sources started when first needed.
    pub fn set_lazy_sources(&self, lazy: Lazy) {
        self.lazy_sources.set(Arc::new(lazy));
    }

    /// Whom `run_command` tells when a background command ends.
    pub fn command_notifier(&self) -> Option<Arc<dyn CommandNotifier>> {
        self.command_notifier.get()
    }

    /// Sets whom `run_command` tells when a background command ends.
    pub fn set_command_notifier(&self, notifier: Arc<dyn CommandNotifier>) {
        self.command_notifier.set(notifier);
    }

    /// The background commands `run_command` starts and stops.
    pub fn background_commands(&self) -> Option<Arc<dyn BackgroundCommandServices>> {
        self.background_commands.get()
    }

    /// The background commands, or where none were set (a tool run
    /// without a node) the ones `make` makes, kept for the next call.
    pub fn background_commands_or(
        &self,
        make: impl FnOnce() -> Arc<dyn BackgroundCommandServices>,
    ) -> Arc<dyn BackgroundCommandServices> {
        self.background_commands.get_or_set_with(make)
    }

    /// Sets the background commands `run_command` starts and stops (the
    /// node's supervisor of them).
    pub fn set_background_commands(&self, commands: Arc<dyn BackgroundCommandServices>) {
        self.background_commands.set(commands);
    }

    /// The executors' accounts the node started with (`config.toml`'s
    /// `[executors]`), for `executor_accounts`.
    pub fn executors(&self) -> Option<Arc<Executors>> {
        self.executors.get()
    }

    /// Sets the executors' accounts the node started with.
    pub fn set_executors(&self, executors: Executors) {
        self.executors.set(Arc::new(executors));
    }

    /// The files each conversation read (`read_file`), checked before
    /// `write_file` and `edit_file` change one: one per node, shared by its
    /// conversations, so what a conversation read survives its
    /// passivation.
    pub fn read_ledger(&self) -> Arc<ReadLedger> {
        Arc::clone(&self.read_ledger)
    }

    /// How many services are set.
    pub(super) fn len(&self) -> usize {
        usize::from(self.store.0.read().is_some())
            + usize::from(self.houses.0.read().is_some())
            + usize::from(self.environments.0.read().is_some())
            + usize::from(self.agents.0.read().is_some())
            + usize::from(self.file_limits.0.read().is_some())
            + usize::from(self.lazy_sources.0.read().is_some())
            + usize::from(self.command_notifier.0.read().is_some())
            + usize::from(self.background_commands.0.read().is_some())
            + usize::from(self.executors.0.read().is_some())
    }
}

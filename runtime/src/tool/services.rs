//! What the actors lend a tool call, typed, and where a `#[tool]`
//! function keeps its own state, by type.
//!
//! Tools live in `troupe-tools`, below the actors in the dependency order,
//! so they cannot name an actor. What they need from one is a trait or a
//! type of this crate, which the node sets when it starts or opens a
//! conversation. Three parts, each saying where a service lives:
//!
//! - [`NodeServices`], typed, set once when the node starts and shared by
//!   every conversation: the store, the house threads' [`Houses`], the
//!   [`Environments`], the agent tools' [`AgentServices`], the house files'
//!   limits, the tool sources started late, the background commands
//!   ([`BackgroundCommandServices`]) and whom one's end is told
//!   ([`CommandNotifier`]), the executors' accounts the node started with
//!   (`config::Executors`, defined in [`crate::executors::settings`]: `config`
//!   names `environment`, which names this module), the files
//!   conversations read ([`ReadLedger`](crate::tool::ledger::ReadLedger)).
//!   A tool reads `ctx.services.houses()`.
//! - [`ConversationServices`], typed, set when the node opens a
//!   conversation: its [`Seat`], its [`HouseScope`], whether it may update
//!   itself, its deferred tool catalog, its [`GateSession`], its
//!   [`ModelTraits`], its [`LibrarySkills`], its [`VisibleTools`], whether
//!   its memory changes are proposals, and for the turn in progress its
//!   [`UserChannel`] and budget [`Scope`]. A tool reads
//!   `ctx.services.seat()`.
//! - [`Extensions`], by type (`ctx.services.get::<T>()`): the extension
//!   point of the Rust API, where a `#[tool]` function keeps what it needs
//!   between calls — a program's own tools, and the built-in tools that
//!   keep their own state the same way (`plan`'s plan, `use_skill`'s
//!   skills in use). Nothing the node lends is found there: a type the
//!   typed parts hold is never looked up there (a debug build panics if it
//!   is), and `tests/suite/shape.rs` fails on a lookup by type in the
//!   crates' code outside those two tools.
//!
//! The browser `browser_exec` drives is not lent through these at all: an
//! actor of `troupe-tools`, its handle is given to the tool when the tools
//! are built (`BrowserExecHost`), by whoever made and supervises it.
//!
//! What the actors lend for their own use (the routines' service, the MCP
//! servers and whose tools they offer) is not a tool service at all: the
//! node holds it, typed (`troupe_actors::boot`).
//!
//! The service traits are defined in this module's children, beside the
//! tool context that holds them: a trait whose methods take a
//! [`ToolContext`](crate::tool::ToolContext) and a context holding it must
//! sit in one module, or the modules would name each other.
//! [`crate::house`], [`crate::environment`] and [`crate::agents`] name
//! them where their users look.

pub mod agents;
pub mod background_commands;
mod command_notifier;
mod conversation;
pub mod environments;
mod extensions;
mod gate_session;
pub mod houses;
mod node;
pub mod turn;

use std::sync::Arc;

use parking_lot::RwLock;

pub use agents::{AgentServices, Agents};
pub use background_commands::BackgroundCommandServices;
pub use command_notifier::CommandNotifier;
pub use conversation::{
    ConversationServices, HouseScope, LibrarySkills, ModelTraits, Seat, VisibleTools,
};
pub use environments::{EnvironmentServices, Environments};
pub use extensions::Extensions;
pub use gate_session::GateSession;
pub use houses::{HouseServices, Houses};
pub use node::NodeServices;
pub use turn::UserChannel;

use crate::budget::Scope;
use crate::store::house_files::FileLimits;
use crate::store::Store;
use crate::tool::catalog::{DeferredCatalog, Lazy};

/// The services a tool call gets. Cloning shares them; a
/// [fork](Services::fork) is a conversation's own over the node's.
#[derive(Clone, Default)]
pub struct Services {
    node: Arc<NodeServices>,
    conversation: Arc<RwLock<ConversationServices>>,
    extensions: Extensions,
}

impl Services {
    /// The node's typed services (set them here, once, at start-up).
    pub fn node(&self) -> &NodeServices {
        &self.node
    }

    /// The store.
    pub fn store(&self) -> Option<Store> {
        self.node.store()
    }

    /// The house threads' services.
    pub fn houses(&self) -> Option<Arc<Houses>> {
        self.node.houses()
    }

    /// The environments' services.
    pub fn environments(&self) -> Option<Arc<Environments>> {
        self.node.environments()
    }

    /// What the actors do for the agent tools.
    pub fn agents(&self) -> Option<Arc<dyn AgentServices>> {
        self.node.agents()
    }

    /// How big house files may grow.
    pub fn file_limits(&self) -> Option<FileLimits> {
        self.node.file_limits()
    }

    /// The tool sources started when first needed.
    pub fn lazy_sources(&self) -> Option<Arc<Lazy>> {
        self.node.lazy_sources()
    }

    /// The conversation's typed services, as they are now.
    pub fn conversation(&self) -> ConversationServices {
        self.conversation.read().clone()
    }

    /// The house thread the conversation sits in.
    pub fn seat(&self) -> Option<Seat> {
        self.conversation.read().seat
    }

    /// Seats the conversation in a house thread.
    pub fn set_seat(&self, seat: Seat) {
        self.conversation.write().seat = Some(seat);
    }

    /// The house the conversation works for.
    pub fn house_scope(&self) -> Option<HouseScope> {
        self.conversation.read().house_scope
    }

    /// Sets the house the conversation works for.
    pub fn set_house_scope(&self, scope: HouseScope) {
        self.conversation.write().house_scope = Some(scope);
    }

    /// Whether the conversation's bot may rewrite its own record.
    pub fn self_update_allowed(&self) -> bool {
        self.conversation.read().self_update
    }

    /// Lets the conversation's bot rewrite its own record.
    pub fn allow_self_update(&self) {
        self.conversation.write().self_update = true;
    }

    /// The deferred tools the conversation may load (`tool_search`).
    pub fn deferred_catalog(&self) -> Option<Arc<DeferredCatalog>> {
        self.conversation.read().deferred.clone()
    }

    /// Sets the deferred tools the conversation may load.
    pub fn set_deferred_catalog(&self, catalog: Arc<DeferredCatalog>) {
        self.conversation.write().deferred = Some(catalog);
    }

    /// The conversation's memory of the gate, made the first time.
    pub fn gate_session(&self) -> Arc<GateSession> {
        if let Some(session) = &self.conversation.read().gate_session {
            return Arc::clone(session);
        }
        Arc::clone(
            self.conversation
                .write()
                .gate_session
                .get_or_insert_with(Arc::default),
        )
    }

    /// What the conversation's model takes in (nothing but text when unset).
    pub fn model_traits(&self) -> ModelTraits {
        self.conversation.read().model
    }

    /// Says what the conversation's model takes in.
    pub fn set_model_traits(&self, traits: ModelTraits) {
        self.conversation.write().model = traits;
    }

    /// The library skills the conversation's bot may load besides its own.
    pub fn library_skills(&self) -> Option<Arc<LibrarySkills>> {
        self.conversation.read().library_skills.clone()
    }

    /// Sets the library skills the conversation's bot may load.
    pub fn set_library_skills(&self, skills: LibrarySkills) {
        self.conversation.write().library_skills = Some(Arc::new(skills));
    }

    /// The tools the conversation offers now.
    pub fn visible_tools(&self) -> Option<VisibleTools> {
        self.conversation.read().visible_tools.clone()
    }

    /// Sets the tools the conversation offers now.
    pub fn set_visible_tools(&self, tools: VisibleTools) {
        self.conversation.write().visible_tools = Some(tools);
    }

    /// Whether the conversation's memory replaces and removes become
    /// proposals the user approves (a background review's).
    pub fn proposes_removals(&self) -> bool {
        self.conversation.read().propose_removals
    }

    /// Makes the conversation's memory replaces and removes proposals.
    pub fn propose_removals(&self) {
        self.conversation.write().propose_removals = true;
    }

    /// The turn in progress's channel to the user, if a turn is on.
    pub fn user_channel(&self) -> Option<Arc<dyn UserChannel>> {
        self.conversation.read().user_channel.clone()
    }

    /// Sets the turn's channel to the user (when a turn begins).
    pub fn set_user_channel(&self, channel: Arc<dyn UserChannel>) {
        self.conversation.write().user_channel = Some(channel);
    }

    /// Drops the turn's channel to the user (the turn ended: its caller's
    /// stream ends).
    pub fn clear_user_channel(&self) {
        self.conversation.write().user_channel = None;
    }

    /// The budget scope of the turn in progress (or the last one).
    pub fn turn_scope(&self) -> Option<Arc<Scope>> {
        self.conversation.read().turn_scope.clone()
    }

    /// Sets the budget scope of the turn that begins.
    pub fn set_turn_scope(&self, scope: Arc<Scope>) {
        self.conversation.write().turn_scope = Some(scope);
    }

    /// The services found by type.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// Adds (or replaces) a service found by type, in this layer.
    pub fn insert<T: std::any::Any + Send + Sync>(&self, value: Arc<T>) {
        debug_assert_untyped::<T>();
        self.extensions.insert(value);
    }

    /// Takes the service of type `T` out of this layer.
    pub fn remove<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        debug_assert_untyped::<T>();
        self.extensions.remove::<T>()
    }

    /// The service of type `T`, if this layer or a parent holds one.
    pub fn get<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        debug_assert_untyped::<T>();
        self.extensions.get::<T>()
    }

    /// The service of type `T`, made with `make` (in this layer) the first time.
    pub fn get_or_insert_with<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        debug_assert_untyped::<T>();
        self.extensions.get_or_insert_with(make)
    }

    /// A conversation's services over these: the node's are shared, the
    /// conversation's typed ones start as a copy of these, and what is
    /// found by type is a layer over these (it finds what they get later).
    pub fn fork(&self) -> Self {
        Self {
            node: Arc::clone(&self.node),
            conversation: Arc::new(RwLock::new(self.conversation())),
            extensions: self.extensions.fork(),
        }
    }
}

/// In a debug build (the tests), refuses to look a typed service up by
/// type: it would never be found there, nor seen by its typed reader.
fn debug_assert_untyped<T: std::any::Any>() {
    use std::any::TypeId;
    let typed = [
        TypeId::of::<Store>(),
        TypeId::of::<Houses>(),
        TypeId::of::<Environments>(),
        TypeId::of::<Agents>(),
        TypeId::of::<FileLimits>(),
        TypeId::of::<Lazy>(),
        TypeId::of::<Seat>(),
        TypeId::of::<HouseScope>(),
        TypeId::of::<ConversationServices>(),
        TypeId::of::<DeferredCatalog>(),
        TypeId::of::<GateSession>(),
        TypeId::of::<ModelTraits>(),
        TypeId::of::<LibrarySkills>(),
        TypeId::of::<VisibleTools>(),
        TypeId::of::<Scope>(),
        TypeId::of::<crate::tool::ledger::ReadLedger>(),
        TypeId::of::<crate::executors::settings::Executors>(),
    ];
    debug_assert!(
        !typed.contains(&TypeId::of::<T>()),
        "{} is a typed tool service: use its accessor on `Services`, not the type map",
        std::any::type_name::<T>()
    );
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("node", &self.node.len())
            .field("conversation", &self.conversation())
            .field("extensions", &self.extensions.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{HouseId, ThreadId};

    #[test]
    fn a_fork_shares_the_node_and_copies_the_conversation() {
        let services = Services::default();
        let fork = services.fork();
        services.node().set_file_limits(FileLimits::default());
        assert_eq!(fork.file_limits(), Some(FileLimits::default()));
        let seat = Seat {
            house: HouseId::new(),
            thread: ThreadId::new(),
        };
        fork.set_seat(seat);
        fork.allow_self_update();
        assert_eq!(fork.seat(), Some(seat));
        assert!(services.seat().is_none() && !services.self_update_allowed());
        let deeper = fork.fork();
        assert_eq!(deeper.seat(), Some(seat));
        assert!(deeper.self_update_allowed());
        deeper.set_house_scope(HouseScope {
            house: seat.house,
            home: false,
        });
        assert!(fork.house_scope().is_none());
    }

    #[test]
    fn a_conversation_s_catalog_and_gate_session_are_its_own_and_typed() {
        let node = Services::default();
        let one = node.fork();
        let two = node.fork();
        let catalog = Arc::new(DeferredCatalog::default());
        one.set_deferred_catalog(Arc::clone(&catalog));
        assert!(Arc::ptr_eq(&one.deferred_catalog().unwrap(), &catalog));
        assert!(two.deferred_catalog().is_none() && node.deferred_catalog().is_none());
        // Made at the first gated call, then the same for the conversation.
        let session = one.gate_session();
        session.approve("run_command:ls");
        assert!(Arc::ptr_eq(&one.gate_session(), &session));
        assert!(!two.gate_session().is_approved("run_command:ls"));
        // A fork made later (a subagent's) starts from a copy: it shares them.
        assert!(one.fork().gate_session().is_approved("run_command:ls"));
        assert_eq!(
            one.extensions().len(),
            0,
            "nothing went through the type map"
        );
    }

    #[derive(Debug)]
    struct Listening;

    impl UserChannel for Listening {
        fn has_listeners(&self) -> bool {
            true
        }

        fn emit(&self, _event: crate::protocol::AgentEvent) {}
    }

    #[test]
    fn the_turn_s_channel_and_scope_and_the_node_s_ledger_are_typed() {
        let node = Services::default();
        let one = node.fork();
        let two = node.fork();
        one.set_user_channel(Arc::new(Listening));
        let scope = Scope::root("turn", crate::budget::Limits::default());
        one.set_turn_scope(Arc::clone(&scope));
        assert!(one.user_channel().is_some_and(|c| c.has_listeners()));
        assert!(Arc::ptr_eq(&one.turn_scope().unwrap(), &scope));
        assert!(two.user_channel().is_none() && two.turn_scope().is_none());
        // The channel goes with the turn; the scope stays for the next.
        one.clear_user_channel();
        assert!(one.user_channel().is_none() && one.turn_scope().is_some());
        // One ledger for the node, whichever conversation reads it.
        assert!(Arc::ptr_eq(
            &one.node().read_ledger(),
            &two.node().read_ledger()
        ));
        assert_eq!(
            one.extensions().len(),
            0,
            "nothing went through the type map"
        );
    }

    #[test]
    fn the_executors_accounts_are_the_node_s_typed() {
        let node = Services::default();
        let conversation = node.fork();
        let started: crate::config::Executors = [("codex".to_string(), Default::default())].into();
        node.node().set_executors(started.clone());
        assert_eq!(conversation.node().executors().as_deref(), Some(&started));
        assert_eq!(
            conversation.extensions().len(),
            0,
            "nothing went through the type map"
        );
    }

    #[test]
    #[should_panic(expected = "typed tool service")]
    #[cfg(debug_assertions)]
    fn the_executors_accounts_are_not_looked_up_by_type() {
        let _ = Services::default().get::<crate::config::Executors>();
    }

    #[test]
    #[should_panic(expected = "typed tool service")]
    #[cfg(debug_assertions)]
    fn a_gate_session_is_not_looked_up_by_type() {
        let _ = Services::default().get::<GateSession>();
    }

    #[test]
    #[should_panic(expected = "typed tool service")]
    #[cfg(debug_assertions)]
    fn a_typed_service_is_not_looked_up_by_type() {
        let _ = Services::default().get::<Seat>();
    }
}

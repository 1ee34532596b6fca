//! The toolsets last computed, by what decides them, so that a new
//! conversation whose tools cannot differ from an earlier one's takes that
//! toolset without walking the registry.
//!
//! What decides a conversation's toolset is of two sorts. Most of it is in
//! the [`Key`]: the registry and its generation, the actor kind, whether
//! the home has other bots, the bot's name and tool lists, and the
//! narrowing. The rest depends on the conversation or the moment and is
//! asked again on every use ([`Memo::holds`]): what each tool whose offer
//! varies ([`Tool::offer_varies`]) offers now, which MCP servers offer the
//! bot their tools, and which lazy servers are still pending. Only a
//! conversation with no deferred tool loaded yet is looked up here (a new
//! one, or one activated before its first `tool_search`).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use troupe_runtime::protocol::ActorKind;
use troupe_runtime::tool::registry::Registry;
use troupe_runtime::tool::{Tool, ToolContext, ToolSpec};

use super::{Narrowing, Offer, Toolset};
use crate::bot::BotSpec;

/// Entries past which those whose toolset nobody holds are swept.
const SWEEP_AT: usize = 256;

/// The toolsets last computed, one per key.
#[derive(Default)]
pub(super) struct Memos {
    entries: Mutex<troupe_runtime::hash::FastMap<u64, Arc<Memo>>>,
}

impl std::fmt::Debug for Memos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memos")
            .field("entries", &self.entries.lock().len())
            .finish()
    }
}

impl Memos {
    /// The toolset memoised for `key` when it still holds for `ctx`
    /// (and then the conversation's deferred catalog is set to it).
    pub(super) fn find(
        &self,
        key: &Key<'_>,
        offer: &Offer<'_>,
        ctx: &ToolContext,
    ) -> Option<Arc<Toolset>> {
        let memo = Arc::clone(self.entries.lock().get(&key.hash())?);
        if !memo.key.matches(key) {
            return None;
        }
        let toolset = memo.toolset.upgrade()?;
        memo.holds(&toolset, offer, ctx).then_some(toolset)
    }

    /// Remembers `toolset` as what `key` computed, with what was asked.
    pub(super) fn keep(&self, key: &Key<'_>, toolset: &Arc<Toolset>, asked: Asked) {
        let memo = Arc::new(Memo {
            key: key.owned(),
            toolset: Arc::downgrade(toolset),
            varying: asked.varying.into_inner(),
            sources: asked.sources.into_inner(),
        });
        let mut entries = self.entries.lock();
        if entries.len() >= SWEEP_AT {
            entries.retain(|_, memo| memo.toolset.strong_count() > 0);
        }
        entries.insert(key.hash(), memo);
    }
}

/// What decides a toolset, beyond what is asked again at each use.
pub(super) struct Key<'a> {
    pub registry: &'a Registry,
    pub kind: ActorKind,
    pub has_bots: bool,
    pub bot: &'a BotSpec,
    pub narrowing: &'a Narrowing,
}

impl Key<'_> {
    fn hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = super::Fingerprint::default();
        std::ptr::from_ref(self.registry).hash(&mut h);
        self.registry.generation().hash(&mut h);
        self.kind.hash(&mut h);
        self.has_bots.hash(&mut h);
        self.bot.name.hash(&mut h);
        self.bot.tools.hash(&mut h);
        self.bot.deny_tools.hash(&mut h);
        self.narrowing.only.hash(&mut h);
        self.narrowing.parent.as_ref().map(Arc::as_ptr).hash(&mut h);
        h.finish()
    }

    fn owned(&self) -> OwnedKey {
        OwnedKey {
            registry: std::ptr::from_ref(self.registry).addr(),
            generation: self.registry.generation(),
            kind: self.kind,
            has_bots: self.has_bots,
            bot: self.bot.name.clone(),
            allow: self.bot.tools.clone(),
            deny: self.bot.deny_tools.clone(),
            only: self.narrowing.only.clone(),
            // Weak: the parent's set cannot be freed and another take its
            // address while this is held.
            parent: self.narrowing.parent.as_ref().map(Arc::downgrade),
        }
    }
}

/// A [`Key`] as kept.
struct OwnedKey {
    registry: usize,
    generation: u64,
    kind: ActorKind,
    has_bots: bool,
    bot: String,
    allow: Vec<String>,
    deny: Vec<String>,
    only: Option<Vec<String>>,
    parent: Option<Weak<HashSet<String>>>,
}

impl OwnedKey {
    fn matches(&self, key: &Key<'_>) -> bool {
        self.registry == std::ptr::from_ref(key.registry).addr()
            && self.generation == key.registry.generation()
            && self.kind == key.kind
            && self.has_bots == key.has_bots
            && self.bot == key.bot.name
            && self.allow == key.bot.tools
            && self.deny == key.bot.deny_tools
            && self.only == key.narrowing.only
            && match (&self.parent, &key.narrowing.parent) {
                (None, None) => true,
                (Some(held), Some(parent)) => std::ptr::eq(held.as_ptr(), Arc::as_ptr(parent)),
                _ => false,
            }
    }
}

/// Each tool whose offer varies, and what it offered.
type Varying = Vec<(Arc<dyn Tool>, Held)>;

/// What a tool whose offer varies offered.
enum Held {
    /// Nothing: not on offer.
    Nothing,
    /// Its own spec, borrowed: told apart by its address, which stays its
    /// spec's while the memo holds the tool.
    Own(usize),
    /// A spec made for the conversation.
    Made(ToolSpec),
}

impl Held {
    fn of(spec: Option<&Cow<'_, ToolSpec>>) -> Self {
        match spec {
            None => Self::Nothing,
            Some(Cow::Borrowed(spec)) => Self::Own(std::ptr::from_ref(*spec).addr()),
            Some(Cow::Owned(spec)) => Self::Made(spec.clone()),
        }
    }

    /// Whether `now` is what was held.
    fn is(&self, now: Option<&Cow<'_, ToolSpec>>) -> bool {
        match (self, now) {
            (Self::Nothing, None) => true,
            (Self::Own(held), Some(Cow::Borrowed(now))) => *held == std::ptr::from_ref(*now).addr(),
            (Self::Made(held), Some(now)) => super::same_spec(now, held),
            _ => false,
        }
    }
}

/// What a selection asked that may answer otherwise next time.
#[derive(Default)]
pub(super) struct Asked {
    varying: RefCell<Varying>,
    /// Each MCP server asked whether it offers the bot its tools, and its answer.
    sources: RefCell<Vec<(String, bool)>>,
}

impl Asked {
    pub(super) fn offered(&self, tool: &Arc<dyn Tool>, spec: Option<&Cow<'_, ToolSpec>>) {
        if tool.offer_varies() {
            self.varying
                .borrow_mut()
                .push((Arc::clone(tool), Held::of(spec)));
        }
    }

    pub(super) fn source(&self, server: &str, offers: bool) {
        self.sources.borrow_mut().push((server.to_string(), offers));
    }
}

/// A toolset computed, and what it was computed from.
struct Memo {
    key: OwnedKey,
    toolset: Weak<Toolset>,
    varying: Varying,
    sources: Vec<(String, bool)>,
}

impl Memo {
    /// Whether `toolset` is what a selection for `ctx` would compute now.
    fn holds(&self, toolset: &Arc<Toolset>, offer: &Offer<'_>, ctx: &ToolContext) -> bool {
        let offers = |server: &str| offer.sources.is_some_and(|s| s.offers(server, offer.bot));
        if !self
            .sources
            .iter()
            .all(|(server, answer)| offers(server) == *answer)
        {
            return false;
        }
        let pending = super::pending(ctx, |source| super::source_offered(offer, source));
        if pending != toolset.deferred.pending {
            return false;
        }
        // `tool_search` describes the catalog it finds in the services.
        ctx.services
            .set_deferred_catalog(Arc::clone(&toolset.deferred));
        self.varying
            .iter()
            .all(|(tool, held)| held.is(tool.offered(ctx).as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use troupe_runtime::home::Home;

    use super::*;
    use crate::toolset::tests::context;
    use crate::toolset::{compute, compute_shared, SharedToolsets};

    fn add_skill(home: &std::path::Path, name: &str) {
        let dir = Home::new(home)
            .skills_dir(troupe_runtime::home::MAIN_AGENT)
            .join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Makes {name}.\n---\nSteps.\n"),
        )
        .unwrap();
    }

    #[test]
    fn a_kept_toolset_is_taken_only_while_what_varies_offers_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let registry = troupe_tools::builtin();
        let bot = BotSpec::new(troupe_runtime::home::MAIN_AGENT, "Main", "Helps.");
        let shared = SharedToolsets::default();
        let (none, narrowing) = (BTreeSet::new(), Narrowing::default());
        let shared_for = |ctx: &ToolContext| {
            compute_shared(&shared, &registry, &bot, false, &narrowing, ctx, &none)
        };
        let fresh_for = |ctx: &ToolContext| compute(&registry, &bot, false, &narrowing, ctx, &none);

        let first = shared_for(&context(dir.path()));
        let again = context(dir.path());
        let second = shared_for(&again);
        assert!(
            Arc::ptr_eq(&first, &second),
            "the kept toolset was not taken"
        );
        assert!(Arc::ptr_eq(
            &again.services.deferred_catalog().unwrap(),
            &first.deferred
        ));
        assert!(!first.names.contains("use_skill"), "offered with no skill");

        // A skill appears: `use_skill`'s offer varies, so the toolset is
        // computed again, and equals one computed from nothing.
        add_skill(dir.path(), "tea");
        let with_skill = shared_for(&context(dir.path()));
        assert!(!Arc::ptr_eq(&first, &with_skill));
        assert!(with_skill.names.contains("use_skill"));
        assert_eq!(*with_skill, fresh_for(&context(dir.path())));
        // Its description lists the skills: another one, another toolset.
        add_skill(dir.path(), "coffee");
        let two_skills = shared_for(&context(dir.path()));
        assert!(!Arc::ptr_eq(&with_skill, &two_skills));
        assert_eq!(*two_skills, fresh_for(&context(dir.path())));
        assert!(Arc::ptr_eq(&two_skills, &shared_for(&context(dir.path()))));

        // What the key holds: another kind, another narrowing.
        let mut routine = context(dir.path());
        routine.kind = ActorKind::RoutineRun;
        let for_routine = shared_for(&routine);
        assert_eq!(*for_routine, fresh_for(&routine));
        let only = Narrowing {
            only: Some(vec!["read_file".into()]),
            parent: None,
        };
        let narrowed = compute_shared(
            &shared,
            &registry,
            &bot,
            false,
            &only,
            &context(dir.path()),
            &none,
        );
        assert_eq!(narrowed.names.iter().collect::<Vec<_>>(), vec!["read_file"]);
    }

    #[test]
    fn a_parents_set_is_told_apart_by_identity_while_kept() {
        let dir = tempfile::tempdir().unwrap();
        let registry = troupe_tools::builtin();
        let bot = BotSpec::new(troupe_runtime::home::MAIN_AGENT, "Main", "Helps.");
        let shared = SharedToolsets::default();
        let none = BTreeSet::new();
        let ctx = context(dir.path());
        let under = |names: &[&str]| {
            let narrowing = Narrowing {
                only: None,
                parent: Some(Arc::new(names.iter().map(|n| n.to_string()).collect())),
            };
            compute_shared(&shared, &registry, &bot, false, &narrowing, &ctx, &none)
        };
        // Each call makes (and drops) a new parent set: the weak hold keeps
        // its address from being taken by the next one while kept.
        let reads = under(&["read_file"]);
        let writes = under(&["write_file"]);
        assert!(reads.names.contains("read_file") && !reads.names.contains("write_file"));
        assert!(writes.names.contains("write_file") && !writes.names.contains("read_file"));
    }
}

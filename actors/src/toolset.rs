//! The tools one conversation is offered, in the registry's stable order.
//!
//! A tool is offered when the who-has-which-tool table gives it to the
//! conversation's kind, the bot's own lists allow it, and the tool itself is
//! available there (`use_skill` needs a skill). Always-on tools go in every
//! request; deferred ones wait in the conversation's [`DeferredCatalog`]
//! until `tool_search` loads them.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use troupe_runtime::tool::catalog::{DeferredCatalog, TOOL_SEARCH};
use troupe_runtime::tool::registry::Registry;
use troupe_runtime::tool::{Exposure, Tool, ToolContext, ToolDefinition, ToolSpec};
use troupe_tools::table;

use crate::intern::Interner;

use crate::bot::BotSpec;

mod memo;

/// The tools of one conversation for the coming model calls. Conversations
/// with the same tools share one (see [`crate::intern::Interner`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Toolset {
    /// The specs sent to the model, in registry order.
    pub specs: Vec<ToolSpec>,
    /// Their names, for the dispatcher.
    pub names: Arc<HashSet<String>>,
    /// What the model receives, built once.
    pub definitions: Arc<Vec<ToolDefinition>>,
    /// The deferred tools `tool_search` can load.
    pub deferred: Arc<DeferredCatalog>,
}

impl Toolset {
    /// Whether `name` is failure-tolerant.
    pub fn is_failure_tolerant(&self, name: &str) -> bool {
        self.specs
            .iter()
            .any(|s| s.name == name && s.flags.failure_tolerant)
    }
}

/// Whose tools a bot is offered, by source: the node's MCP servers answer
/// for theirs (`mcp:<server>`).
pub trait SourceOffers: Send + Sync + 'static {
    /// Whether `bot` gets the tools of the MCP server `server`.
    fn offers(&self, server: &str, bot: &BotSpec) -> bool;
}

/// What narrows a conversation's tools beyond the table.
#[derive(Debug, Clone, Default)]
pub struct Narrowing {
    /// Only these tools, when not empty (a run's `--tools`).
    pub only: Option<Vec<String>>,
    /// Tools the parent had (a subagent gets at most its parent's).
    pub parent: Option<Arc<HashSet<String>>>,
}

/// The node's shared toolsets and deferred catalogs: conversations with the
/// same tools hold one copy, and a new conversation whose tools equal a held
/// toolset's copies nothing (see [`compute_shared`]). It also holds whose
/// tools a bot is offered by source (the node's MCP servers, once started).
#[derive(Default)]
pub struct SharedToolsets {
    toolsets: Interner<Toolset>,
    catalogs: Interner<DeferredCatalog>,
    memos: memo::Memos,
    sources: std::sync::OnceLock<Arc<dyn SourceOffers>>,
}

impl std::fmt::Debug for SharedToolsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedToolsets")
            .field("toolsets", &self.toolsets)
            .field("catalogs", &self.catalogs)
            .field("memos", &self.memos)
            .field("sources", &self.sources.get().is_some())
            .finish()
    }
}

impl SharedToolsets {
    /// Says whose tools a bot is offered, by source (once: the node's MCP
    /// servers when they start); until then no `mcp:` tool is offered.
    pub fn offer_sources(&self, offers: Arc<dyn SourceOffers>) {
        let _ = self.sources.set(offers);
    }
}

/// Computes the toolset of a conversation (and puts its deferred catalog
/// into `ctx.services`).
pub fn compute(
    registry: &Registry,
    bot: &BotSpec,
    has_bots: bool,
    narrowing: &Narrowing,
    ctx: &ToolContext,
    loaded: &BTreeSet<String>,
) -> Toolset {
    let tools: Vec<_> = registry.iter().collect();
    let made = |parts: CatalogParts<'_>| Arc::new(parts.build());
    let offer = Offer {
        bot,
        has_bots,
        sources: None,
    };
    select(&tools, &offer, narrowing, ctx, loaded, made, None).build()
}

/// Like [`compute`], but the shared copy from `shared` when an equal
/// toolset is held already: then only the specs on offer are gathered,
/// borrowed from their tools where they cannot vary
/// ([`Tool::offer_varies`](troupe_runtime::tool::Tool::offer_varies)), and
/// nothing is copied or built (a thousand conversations of one bot compute
/// one).
pub fn compute_shared(
    shared: &SharedToolsets,
    registry: &Registry,
    bot: &BotSpec,
    has_bots: bool,
    narrowing: &Narrowing,
    ctx: &ToolContext,
    loaded: &BTreeSet<String>,
) -> Arc<Toolset> {
    let offer = Offer {
        bot,
        has_bots,
        sources: shared.sources.get().map(|s| s.as_ref()),
    };
    // A conversation with a deferred tool loaded has a toolset of its own.
    let key = loaded.is_empty().then_some(memo::Key {
        registry,
        kind: ctx.kind,
        has_bots,
        bot,
        narrowing,
    });
    if let Some(found) = key
        .as_ref()
        .and_then(|key| shared.memos.find(key, &offer, ctx))
    {
        return found;
    }
    let asked = memo::Asked::default();
    let tools: Vec<_> = registry.iter().collect();
    let catalog = |parts: CatalogParts<'_>| {
        shared.catalogs.get_or_make(
            parts.fingerprint(),
            parts,
            |held, parts| parts.equals(held),
            |parts| Arc::new(parts.build()),
        )
    };
    let selection = select(
        &tools,
        &offer,
        narrowing,
        ctx,
        loaded,
        catalog,
        Some(&asked),
    );
    let toolset = shared.toolsets.get_or_make(
        selection.fingerprint(),
        selection,
        |held, selection| {
            Arc::ptr_eq(&held.deferred, &selection.deferred)
                && held.specs.len() == selection.specs.len()
                && held
                    .specs
                    .iter()
                    .zip(&selection.specs)
                    .all(|(a, b)| same_spec(a, b))
        },
        |selection| Arc::new(selection.build()),
    );
    if let Some(key) = &key {
        shared.memos.keep(key, &toolset, asked);
    }
    toolset
}

/// Whether two specs are equal; a schema both share is not walked (held
/// toolsets share their schemas with the tools).
fn same_spec(a: &ToolSpec, b: &ToolSpec) -> bool {
    // Every field, so that a new one cannot be left out.
    let ToolSpec {
        name,
        description,
        parameters,
        flags,
        exposure,
        source,
        timeout_secs,
        gate,
        aliases,
    } = a;
    std::ptr::eq(a, b)
        || (*name == b.name
            && *description == b.description
            && *parameters == b.parameters
            && *flags == b.flags
            && *exposure == b.exposure
            && *source == b.source
            && *timeout_secs == b.timeout_secs
            && *gate == b.gate
            && *aliases == b.aliases)
}

/// The hasher of the toolsets' and catalogs' keys: a multiply-rotate hash
/// (as rustc's `FxHasher`), a tenth of SipHash's cost over the 40 names a
/// new conversation hashes. A key only finds a candidate, which is then
/// compared whole, so it needs no resistance to chosen collisions.
#[derive(Default)]
struct Fingerprint(u64);

impl Fingerprint {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl std::hash::Hasher for Fingerprint {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.add(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A spec on offer: the tool's own, borrowed, or one made for this
/// conversation. Two words, where a `Cow<ToolSpec>` moved the whole spec
/// at each step of a selection.
#[derive(Clone)]
enum Spec<'a> {
    Borrowed(&'a ToolSpec),
    Owned(Box<ToolSpec>),
}

impl<'a> Spec<'a> {
    fn new(spec: std::borrow::Cow<'a, ToolSpec>) -> Self {
        match spec {
            std::borrow::Cow::Borrowed(spec) => Self::Borrowed(spec),
            std::borrow::Cow::Owned(spec) => Self::Owned(Box::new(spec)),
        }
    }

    fn into_owned(self) -> ToolSpec {
        match self {
            Self::Borrowed(spec) => spec.clone(),
            Self::Owned(spec) => *spec,
        }
    }
}

impl std::ops::Deref for Spec<'_> {
    type Target = ToolSpec;

    fn deref(&self) -> &ToolSpec {
        match self {
            Self::Borrowed(spec) => spec,
            Self::Owned(spec) => spec,
        }
    }
}

/// What a deferred catalog is made of, the specs borrowed where they can be.
struct CatalogParts<'a> {
    specs: Vec<Spec<'a>>,
    pending: Vec<String>,
    allow: &'a [String],
    deny: &'a [String],
}

impl CatalogParts<'_> {
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = Fingerprint::default();
        for spec in &self.specs {
            spec.name.hash(&mut h);
            spec.description.len().hash(&mut h);
        }
        self.pending.hash(&mut h);
        self.allow.hash(&mut h);
        self.deny.hash(&mut h);
        h.finish()
    }

    fn equals(&self, held: &DeferredCatalog) -> bool {
        held.specs.len() == self.specs.len()
            && held
                .specs
                .iter()
                .zip(&self.specs)
                .all(|(a, b)| same_spec(a, b))
            && held.pending == self.pending
            && held.allow == self.allow
            && held.deny == self.deny
    }

    fn build(self) -> DeferredCatalog {
        DeferredCatalog {
            specs: self.specs.into_iter().map(Spec::into_owned).collect(),
            pending: self.pending,
            allow: self.allow.to_vec(),
            deny: self.deny.to_vec(),
        }
    }
}

/// The specs a conversation is offered, before the toolset is built.
struct Selection<'a> {
    specs: Vec<Spec<'a>>,
    deferred: Arc<DeferredCatalog>,
}

impl Selection<'_> {
    /// A cheap key for [`Interner`]: the names and the descriptions'
    /// lengths, and the catalog (two selections with one key are compared
    /// whole anyway).
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = Fingerprint::default();
        for spec in &self.specs {
            spec.name.hash(&mut h);
            spec.description.len().hash(&mut h);
        }
        Arc::as_ptr(&self.deferred).hash(&mut h);
        self.specs.len().hash(&mut h);
        h.finish()
    }

    fn build(self) -> Toolset {
        let specs: Vec<ToolSpec> = self.specs.into_iter().map(Spec::into_owned).collect();
        let names = Arc::new(specs.iter().map(|s| s.name.clone()).collect());
        let definitions = Arc::new(specs.iter().map(ToolSpec::definition).collect());
        Toolset {
            specs,
            names,
            definitions,
            deferred: self.deferred,
        }
    }
}

/// To whom tools are offered: the bot, whether it has others to message,
/// and whose sources offer it their tools (none: no `mcp:` tool).
struct Offer<'a> {
    bot: &'a BotSpec,
    has_bots: bool,
    sources: Option<&'a dyn SourceOffers>,
}

/// Gathers the specs on offer; `catalog` makes (or finds) the deferred
/// catalog, which goes into `ctx.services` before `tool_search` is asked
/// (its description lists the catalog).
fn select<'a>(
    tools: &'a [Arc<dyn Tool>],
    offer: &Offer<'a>,
    narrowing: &Narrowing,
    ctx: &ToolContext,
    loaded: &BTreeSet<String>,
    catalog: impl FnOnce(CatalogParts<'a>) -> Arc<DeferredCatalog>,
    asked: Option<&memo::Asked>,
) -> Selection<'a> {
    let (bot, has_bots) = (offer.bot, offer.has_bots);
    let source_offered = |source: &str| {
        let answer = source_offered(offer, source);
        if let (Some(asked), Some(server)) = (asked, source.strip_prefix("mcp:")) {
            asked.source(server, answer);
        }
        answer
    };
    let offered_now = |tool: &'a Arc<dyn Tool>| {
        let spec = tool.offered(ctx);
        if let Some(asked) = asked {
            asked.offered(tool, spec.as_ref());
        }
        spec.map(Spec::new)
    };
    let offered = |spec: &ToolSpec| {
        source_offered(&spec.source)
            && table::is_offered(&spec.name, ctx.kind, has_bots)
            && table::allowed_by_lists(&spec.name, &bot.tools, &bot.deny_tools)
            && narrowing
                .only
                .as_ref()
                .is_none_or(|only| only.contains(&spec.name))
            && narrowing
                .parent
                .as_ref()
                .is_none_or(|p| p.contains(&spec.name) || spec.name == TOOL_SEARCH)
    };
    let mut deferred = Vec::new();
    let mut chosen: Vec<Option<Spec<'a>>> = Vec::with_capacity(tools.len());
    for tool in tools {
        let base = tool.spec();
        if base.name == TOOL_SEARCH || !offered(base) {
            chosen.push(None);
            continue;
        }
        let Some(spec) = offered_now(tool) else {
            chosen.push(None);
            continue;
        };
        match spec.exposure {
            Exposure::AlwaysOn => chosen.push(Some(spec)),
            Exposure::Deferred => {
                let is_loaded = loaded.contains(&spec.name);
                if is_loaded {
                    deferred.push(spec.clone());
                    chosen.push(Some(spec));
                } else {
                    deferred.push(spec);
                    chosen.push(None);
                }
            }
        }
    }
    // `tool_search` is available when this catalog holds something.
    let pending = pending(ctx, source_offered);
    let deferred = catalog(CatalogParts {
        specs: deferred,
        pending,
        allow: &bot.tools,
        deny: &bot.deny_tools,
    });
    ctx.services.set_deferred_catalog(Arc::clone(&deferred));
    let mut specs = Vec::new();
    for (tool, spec) in tools.iter().zip(chosen) {
        if tool.spec().name == TOOL_SEARCH {
            if offered(tool.spec()) {
                specs.extend(offered_now(tool));
            }
        } else if let Some(spec) = spec {
            specs.push(spec);
        }
    }
    Selection { specs, deferred }
}

/// Whether the tools of `source` are offered to the bot: an MCP server's
/// when it offers them to the bot, a tool the program added for one bot
/// to that bot only (`crate::added_tools`), any other always.
fn source_offered(offer: &Offer<'_>, source: &str) -> bool {
    if let Some(server) = source.strip_prefix("mcp:") {
        return offer.sources.is_some_and(|s| s.offers(server, offer.bot));
    }
    match source.strip_prefix(crate::added_tools::FOR_BOT) {
        Some(owner) => owner == offer.bot.name,
        None => true,
    }
}

/// The lazy sources not started yet whose tools are offered.
fn pending(ctx: &ToolContext, offered: impl Fn(&str) -> bool) -> Vec<String> {
    ctx.services
        .lazy_sources()
        .map(|lazy| lazy.0.pending())
        .unwrap_or_default()
        .into_iter()
        .filter(|source| offered(source))
        .collect()
}

pub use troupe_runtime::tool::services::VisibleTools;

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_runtime::home::Home;

    pub(super) fn context(home: &std::path::Path) -> ToolContext {
        ToolContext::standalone(Home::new(home), home.to_path_buf())
    }

    #[test]
    fn conversations_with_the_same_tools_share_one_toolset_equal_to_a_fresh_one() {
        let dir = tempfile::tempdir().unwrap();
        let registry = troupe_tools::builtin();
        let bot = BotSpec::new("assistant", "Assistant", "Helps.");
        let shared = SharedToolsets::default();
        let none = BTreeSet::new();
        let narrowing = Narrowing::default();
        let (a, b) = (context(dir.path()), context(dir.path()));
        let first = compute_shared(&shared, &registry, &bot, false, &narrowing, &a, &none);
        let second = compute_shared(&shared, &registry, &bot, false, &narrowing, &b, &none);
        assert!(
            Arc::ptr_eq(&first, &second),
            "a second conversation built its own"
        );
        assert!(Arc::ptr_eq(
            &b.services.deferred_catalog().unwrap(),
            &first.deferred
        ));
        let fresh = compute(
            &registry,
            &bot,
            false,
            &narrowing,
            &context(dir.path()),
            &none,
        );
        assert_eq!(*first, fresh);
        assert!(!fresh.specs.is_empty() && !fresh.deferred.specs.is_empty());

        // Another offer (a bot that denies a tool) is another toolset.
        let mut narrow = bot.clone();
        narrow.deny_tools = vec![fresh.specs[0].name.clone()];
        let other = compute_shared(&shared, &registry, &narrow, false, &narrowing, &a, &none);
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(!other.names.contains(&fresh.specs[0].name));
        // A deferred tool once loaded is offered whole.
        let loaded: BTreeSet<String> = [fresh.deferred.specs[0].name.clone()].into();
        let with = compute_shared(&shared, &registry, &bot, false, &narrowing, &a, &loaded);
        assert!(with.names.contains(&fresh.deferred.specs[0].name));
        assert!(!first.names.contains(&fresh.deferred.specs[0].name));
    }
}

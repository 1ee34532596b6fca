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
use troupe_runtime::tool::{Exposure, ToolContext, ToolDefinition, ToolSpec};
use troupe_tools::table;

use crate::intern::Interner;

use crate::bot::BotSpec;

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

/// The [`SourceOffers`] of the node's MCP servers, as kept in its services.
#[derive(Clone)]
pub struct McpOffers(pub Arc<dyn SourceOffers>);

/// What narrows a conversation's tools beyond the table.
#[derive(Debug, Clone, Default)]
pub struct Narrowing {
    /// Only these tools, when not empty (a run's `--tools`).
    pub only: Option<Vec<String>>,
    /// Tools the parent had (a subagent gets at most its parent's).
    pub parent: Option<Arc<HashSet<String>>>,
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
    select(registry, bot, has_bots, narrowing, ctx, loaded).build()
}

/// Like [`compute`], but the shared copy from `toolsets` when an equal
/// toolset is held already: then only the specs on offer are gathered, and
/// nothing is built (a thousand conversations of one bot compute one).
pub fn compute_shared(
    toolsets: &Interner<Toolset>,
    registry: &Registry,
    bot: &BotSpec,
    has_bots: bool,
    narrowing: &Narrowing,
    ctx: &ToolContext,
    loaded: &BTreeSet<String>,
) -> Arc<Toolset> {
    let selection = select(registry, bot, has_bots, narrowing, ctx, loaded);
    toolsets.get_or_make(
        selection.fingerprint(),
        selection,
        |shared, selection| {
            shared.specs == selection.specs && shared.deferred == selection.deferred
        },
        |selection| Arc::new(selection.build()),
    )
}

/// The specs a conversation is offered, before the toolset is built.
struct Selection {
    specs: Vec<ToolSpec>,
    deferred: Arc<DeferredCatalog>,
}

impl Selection {
    /// A cheap key for [`Interner`]: the names and the descriptions'
    /// lengths (two selections with one key are compared whole anyway).
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for spec in self.specs.iter().chain(&self.deferred.specs) {
            spec.name.hash(&mut h);
            spec.description.len().hash(&mut h);
        }
        self.deferred.pending.hash(&mut h);
        self.deferred.allow.hash(&mut h);
        self.deferred.deny.hash(&mut h);
        self.specs.len().hash(&mut h);
        h.finish()
    }

    fn build(self) -> Toolset {
        let names = Arc::new(self.specs.iter().map(|s| s.name.clone()).collect());
        let definitions = Arc::new(self.specs.iter().map(ToolSpec::definition).collect());
        Toolset {
            specs: self.specs,
            names,
            definitions,
            deferred: self.deferred,
        }
    }
}

fn select(
    registry: &Registry,
    bot: &BotSpec,
    has_bots: bool,
    narrowing: &Narrowing,
    ctx: &ToolContext,
    loaded: &BTreeSet<String>,
) -> Selection {
    let mcp = ctx.services.get::<McpOffers>();
    let source_offered = |source: &str| {
        if let Some(server) = source.strip_prefix("mcp:") {
            return mcp.as_ref().is_some_and(|m| m.0.offers(server, bot));
        }
        // A tool the program added for one bot (`crate::added_tools`).
        match source.strip_prefix(crate::added_tools::FOR_BOT) {
            Some(owner) => owner == bot.name,
            None => true,
        }
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
    let tools: Vec<_> = registry.iter().collect();
    let mut chosen: Vec<Option<ToolSpec>> = Vec::with_capacity(tools.len());
    for tool in &tools {
        let base = tool.spec();
        if base.name == TOOL_SEARCH || !offered(base) {
            chosen.push(None);
            continue;
        }
        let Some(spec) = tool.available(ctx) else {
            chosen.push(None);
            continue;
        };
        match spec.exposure {
            Exposure::AlwaysOn => chosen.push(Some(spec)),
            Exposure::Deferred => {
                let is_loaded = loaded.contains(&spec.name);
                deferred.push(spec.clone());
                chosen.push(is_loaded.then_some(spec));
            }
        }
    }
    // `tool_search` is available when this catalog holds something.
    let pending = ctx
        .services
        .get::<troupe_runtime::tool::catalog::Lazy>()
        .map(|lazy| lazy.0.pending())
        .unwrap_or_default()
        .into_iter()
        .filter(|source| source_offered(source))
        .collect();
    let deferred = Arc::new(DeferredCatalog {
        specs: deferred,
        pending,
        allow: bot.tools.clone(),
        deny: bot.deny_tools.clone(),
    });
    ctx.services.insert(Arc::clone(&deferred));
    let mut specs = Vec::new();
    for (tool, spec) in tools.iter().zip(chosen) {
        if tool.spec().name == TOOL_SEARCH {
            if offered(tool.spec()) {
                specs.extend(tool.available(ctx));
            }
        } else if let Some(spec) = spec {
            specs.push(spec);
        }
    }
    Selection { specs, deferred }
}

/// The tools a conversation offers now (what its subagents may have at most),
/// in its tools' services.
#[derive(Debug, Clone, Default)]
pub struct VisibleTools(pub Arc<std::collections::HashSet<String>>);

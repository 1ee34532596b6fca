//! Tools a program adds to a running node — for every bot, or for one —
//! and may remove again.
//!
//! They are a [`ToolSource`] of the registry, after the built-in tools and
//! those given at build time: adding or removing one moves the registry's
//! generation, so each conversation offers the new list from its next
//! model call (the list is part of every request's cached prefix, which is
//! why it does not change within a call). A tool for one bot carries the
//! source `program:BOT` and only that bot's conversations (its subagents'
//! included, through their parent's tools) are offered it
//! ([`crate::toolset`]); the others' carry `program`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::registry::{Registry, RegistryError, ToolSource};
use troupe_runtime::tool::{Tool, ToolContext, ToolSpec};

/// The source of a tool added for every bot.
pub const SOURCE: &str = "program";

/// The source prefix of a tool added for one bot (`program:scout`).
pub const FOR_BOT: &str = "program:";

/// Why a tool could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddToolError {
    /// Its name is not one a provider takes.
    #[error(transparent)]
    Name(#[from] RegistryError),
    /// A tool of that name is offered already.
    #[error(
        "a tool named `{0}` exists already; remove it first (`remove_tool`) or pick another name"
    )]
    Exists(String),
}

/// The tools added while the node runs, in the order they were added.
pub struct AddedTools {
    /// The names of the registry's fixed tools (built in, given at build).
    fixed: HashSet<String>,
    tools: RwLock<Vec<Arc<dyn Tool>>>,
    generation: AtomicU64,
}

impl std::fmt::Debug for AddedTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.read().iter().map(|t| t.spec().name.clone()))
            .finish()
    }
}

impl AddedTools {
    /// None added yet, beside the `registry`'s fixed tools.
    pub fn new(registry: &Registry) -> Self {
        Self {
            fixed: registry.iter().map(|t| t.spec().name.clone()).collect(),
            tools: RwLock::new(Vec::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// Adds `tool`, for the bot `bot` only or for every bot; refused when
    /// a tool of its name exists (an MCP server's names, `mcp__…`, are
    /// kept for them).
    pub fn add(&self, tool: Arc<dyn Tool>, bot: Option<&str>) -> Result<(), AddToolError> {
        // A registry of its own checks the name as the node's would.
        Registry::new().register(Arc::clone(&tool))?;
        let name = tool.spec().name.clone();
        let mut tools = self.tools.write();
        if self.fixed.contains(&name)
            || name.starts_with("mcp__")
            || tools.iter().any(|t| t.spec().name == name)
        {
            return Err(AddToolError::Exists(name));
        }
        let mut spec = tool.spec().clone();
        spec.source = match bot {
            Some(bot) => format!("{FOR_BOT}{bot}"),
            None => SOURCE.to_string(),
        };
        tools.push(Arc::new(Added { tool, spec }));
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes the added tool `name`; `false` when none was added by that
    /// name. A call of it already running finishes.
    pub fn remove(&self, name: &str) -> bool {
        let mut tools = self.tools.write();
        let before = tools.len();
        tools.retain(|t| t.spec().name != name);
        let removed = tools.len() != before;
        if removed {
            self.generation.fetch_add(1, Ordering::Relaxed);
        }
        removed
    }
}

impl ToolSource for AddedTools {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.read().clone()
    }

    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .read()
            .iter()
            .find(|t| t.spec().name == name)
            .cloned()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }
}

/// An added tool: the program's, with the source saying whose it is.
struct Added {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
}

#[async_trait::async_trait]
impl Tool for Added {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        self.tool.call(args, ctx).await
    }

    fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
        let mut spec = self.tool.available(ctx)?;
        spec.source.clone_from(&self.spec.source);
        Some(spec)
    }

    fn offer_varies(&self) -> bool {
        self.tool.offer_varies()
    }

    fn carried(&self, ctx: &ToolContext) -> Option<String> {
        self.tool.carried(ctx)
    }

    fn carried_call(&self, ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        self.tool.carried_call(ctx)
    }

    fn restore(&self, ctx: &ToolContext, args: &serde_json::Value, result: &ToolResult) {
        self.tool.restore(ctx, args, result);
    }
}

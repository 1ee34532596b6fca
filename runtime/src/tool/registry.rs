//! The tool registry: every tool of a runtime, in one stable order.
//!
//! The order is the order of registration and never changes afterwards: the
//! tool list is part of every model request's prefix, and a provider's prompt
//! cache only holds while those bytes stay the same from call to call.
//!
//! Tools that come and go while the process runs (an MCP server's, listed
//! when it connects and again when it says its list changed) come from a
//! [`ToolSource`]: they follow the registered tools, in the source's order,
//! and the registry's [`Registry::generation`] moves when they change so
//! conversations know to look again.

use std::sync::Arc;

use super::{Exposure, Tool, ToolSpec};

/// A registration that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("a tool named `{0}` is already registered; tool names must be unique")]
    Duplicate(String),
    /// A name the providers would refuse.
    #[error("`{0}` is not a valid tool name: use 1 to 64 letters, digits, `_` or `-`")]
    InvalidName(String),
}

/// Tools that change while the process runs (an MCP server's).
pub trait ToolSource: Send + Sync + 'static {
    /// Its tools now, in a stable order.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// Its tool called `name`, if it has one now.
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>>;
    /// A number that changes whenever its tools do.
    fn generation(&self) -> u64;
}

/// The tools of a runtime, in registration order, then those of its sources.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
    index: crate::hash::FastMap<String, usize>,
    sources: Vec<Arc<dyn ToolSource>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|t| t.spec().name.clone()))
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool at the end of the order.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.spec().name.clone();
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(RegistryError::InvalidName(name));
        }
        if self.index.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        self.index.insert(name, self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    /// Adds a source of changing tools, after everything added before.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// Changes whenever a source's tools change.
    pub fn generation(&self) -> u64 {
        self.sources
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.generation()))
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        match self.index.get(name) {
            Some(&i) => Some(Arc::clone(&self.tools[i])),
            None => self.sources.iter().find_map(|s| s.get(name)),
        }
    }

    /// Every tool, in order: the registered ones, then each source's
    /// (a source's tool named like a registered one is left out).
    pub fn iter(&self) -> impl Iterator<Item = Arc<dyn Tool>> + '_ {
        let sourced = self
            .sources
            .iter()
            .flat_map(|s| s.tools())
            .filter(|t| !self.index.contains_key(&t.spec().name));
        self.tools.iter().cloned().chain(sourced)
    }

    /// Every tool's spec, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.iter().map(|t| t.spec().clone()).collect()
    }

    /// How many tools there are now.
    pub fn len(&self) -> usize {
        self.tools.len() + self.sources.iter().map(|s| s.tools().len()).sum::<usize>()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A registry of the tools `keep` accepts, in the same order (a
    /// snapshot: sources' tools are taken as they are now).
    pub fn narrowed(&self, mut keep: impl FnMut(&ToolSpec) -> bool) -> Registry {
        let mut out = Registry::new();
        for tool in self.iter() {
            if keep(tool.spec()) {
                out.index.insert(tool.spec().name.clone(), out.tools.len());
                out.tools.push(tool);
            }
        }
        out
    }

    /// Whether any tool is deferred (so `tool_search` has something to find).
    pub fn has_deferred(&self) -> bool {
        self.iter().any(|t| t.spec().exposure == Exposure::Deferred)
    }
}

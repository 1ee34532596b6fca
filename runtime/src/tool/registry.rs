//! The tool registry: every tool of a runtime, in one stable order.
//!
//! The order is the order of registration and never changes afterwards: the
//! tool list is part of every model request's prefix, and a provider's prompt
//! cache only holds while those bytes stay the same from call to call.

use std::collections::HashMap;
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

/// The tools of a runtime, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
    index: HashMap<String, usize>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| &t.spec().name))
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

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// Every tool, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// Every tool's spec, in order.
    pub fn specs(&self) -> Vec<&ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// A registry of the tools `keep` accepts, in the same order.
    pub fn narrowed(&self, mut keep: impl FnMut(&ToolSpec) -> bool) -> Registry {
        let mut out = Registry::new();
        for tool in &self.tools {
            if keep(tool.spec()) {
                out.index.insert(tool.spec().name.clone(), out.tools.len());
                out.tools.push(Arc::clone(tool));
            }
        }
        out
    }

    /// Whether any tool is deferred (so `tool_search` has something to find).
    pub fn has_deferred(&self) -> bool {
        self.tools
            .iter()
            .any(|t| t.spec().exposure == Exposure::Deferred)
    }
}

//! The deferred tools a conversation could load, and which ones it has.
//!
//! A deferred tool is listed by name until `tool_search` loads it; from then
//! on it is a real tool for as long as the search's result stays in the
//! history. So the loaded set is not state of its own: it is read from the
//! history, from the `loaded` names in `tool_search` results, and a compaction
//! that summarizes a search away unloads what it loaded.

use std::collections::BTreeSet;

use crate::protocol::Message;
use crate::tool::ToolSpec;

/// The name of the tool that loads deferred tools.
pub const TOOL_SEARCH: &str = "tool_search";

/// The deferred tools offered to one conversation, in registry order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeferredCatalog {
    /// Their specs.
    pub specs: Vec<ToolSpec>,
    /// Sources offered to the conversation whose tools are not known yet
    /// (`mcp:<server>` before it is connected): a search starts them.
    pub pending: Vec<String>,
    /// The agent's own allow list (all when empty), for tools a search finds
    /// in a source it started.
    pub allow: Vec<String>,
    /// The agent's deny list.
    pub deny: Vec<String>,
}

/// Sources of tools that start on first use (MCP servers), as `tool_search`
/// sees them: it starts the pending ones a conversation is offered.
#[async_trait::async_trait]
pub trait LazySources: Send + Sync + 'static {
    /// The sources not started yet (`mcp:<server>`).
    fn pending(&self) -> Vec<String>;
    /// Starts `sources` (together, each within its own timeout) and returns
    /// the specs of their tools; a source that fails to start is reported in
    /// the returned notes instead.
    async fn start(&self, sources: &[String]) -> (Vec<ToolSpec>, Vec<String>);
}

/// The node's lazy sources, as tools find them in their services.
pub struct Lazy(pub std::sync::Arc<dyn LazySources>);

/// The names of the deferred tools loaded by the `tool_search` results in
/// `history`.
pub fn loaded_tools(history: &[Message]) -> BTreeSet<String> {
    let mut loaded = BTreeSet::new();
    for message in history {
        if let Message::Tool { name, result, .. } = message {
            if name == TOOL_SEARCH {
                if let Some(names) = result.data.get("loaded").and_then(|v| v.as_array()) {
                    loaded.extend(names.iter().filter_map(|n| n.as_str()).map(str::to_string));
                }
            }
        }
    }
    loaded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolResult;

    #[test]
    fn loaded_tools_come_from_search_results_in_the_history() {
        let history = vec![
            Message::user("hi"),
            Message::Tool {
                call_id: "1".into(),
                name: TOOL_SEARCH.into(),
                result: ToolResult::ok_with("loaded plan", serde_json::json!({"loaded": ["plan"]})),
            },
            Message::Tool {
                call_id: "2".into(),
                name: "other".into(),
                result: ToolResult::ok_with("", serde_json::json!({"loaded": ["x"]})),
            },
        ];
        assert_eq!(loaded_tools(&history), BTreeSet::from(["plan".to_string()]));
        assert!(loaded_tools(&history[..1]).is_empty());
    }
}

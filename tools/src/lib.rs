//! troupe-tools: the agents' tools, one file per tool.
//!
//! Each file holds a tool's params type (its JSON schema is derived from it),
//! its description, its flags and its handler, with its tests.
pub mod ask_user;
pub mod bot_create;
pub mod cronjob_manage;
pub mod delegate;
pub mod documents;
pub mod file_lock;
pub mod memory;
pub mod message_agent;
pub mod plan;
pub mod scan;
pub mod skill_manage;
pub mod skills;
pub mod table;
pub mod tool_search;
pub mod use_skill;

use std::sync::Arc;

use troupe_runtime::tool::registry::Registry;

/// Every built-in tool, in the table's order (the order the model sees).
pub fn builtin() -> Registry {
    let tools: Vec<Arc<dyn troupe_runtime::tool::Tool>> =
        vec![Arc::new(tool_search::ToolSearch::new())];
    let mut registry = Registry::new();
    for tool in tools {
        // Built-in names are unique and valid; a clash is a bug caught by the tests.
        if let Err(e) = registry.register(tool) {
            tracing::error!(error = %e, "built-in tool not registered");
        }
    }
    registry
}
pub mod edit_file;
pub mod find_files;
pub mod ledger;
pub mod paths;
pub mod read_file;
pub mod run_command;
pub mod write_file;

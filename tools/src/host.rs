//! The tools that touch this machine, and why a house's conversations do
//! not get them.
//!
//! A conversation working for a house (a bot's seat in a thread, or what
//! it started: a subagent, a message to another bot) serves people who do
//! not own the machine. It reaches files through the house's files
//! (`read_file`, `write_file`, `list_files`, `search_files`,
//! `delete_file`) and commands through its thread's environment, never
//! the machine's: `edit_file` and `find_files` are not offered there, and
//! `run_command` without a thread's environment refuses. One rule, one
//! place: [`in_house`].

use troupe_runtime::house::HouseScope;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// Whether the conversation of `ctx` works for a house (and so gets no
/// tool that touches the machine).
pub fn in_house(ctx: &ToolContext) -> bool {
    HouseScope::of(ctx).is_some()
}

/// Whether the conversation of `ctx` may be offered the tools that touch
/// this machine: it does not work for a house.
pub fn not_in_house(ctx: &ToolContext) -> bool {
    !in_house(ctx)
}

/// The refusal of a machine's-files tool called in a house's conversation.
pub fn refused(tool: &str) -> ToolResult {
    ToolResult::error(format!(
        "`{tool}` works on this machine's files, which a house's conversation cannot reach; \
         here read_file, write_file, list_files, search_files and delete_file mean the house's files."
    ))
}

/// The refusal of a command in a house's conversation with no thread
/// environment to run it in.
pub fn no_environment() -> ToolResult {
    ToolResult::error(
        "in a house, commands run in the thread's environment, never on this machine, and this \
         conversation has none: from the thread, create one with create_environment, then run_command.",
    )
}

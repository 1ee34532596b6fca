//! The house files tools: `search_files`, `list_files`, `delete_file`, and
//! what `read_file` and `write_file` mean in a house turn.
//!
//! A conversation that works for a house (its services hold a
//! [`HouseScope`]: a seat in a thread, or what a seated conversation
//! started) is offered the house's shared files: `read_file` and
//! `write_file` then read and write those (their local-file form is not on
//! offer there), and the three others appear. Outside a house nothing here
//! is offered and `read_file`/`write_file` stay the local-file tools.
//! Every call is scoped to that house through the store
//! ([`troupe_runtime::store::house_files`]).

pub mod delete_file;
pub mod list_files;
mod prepare;
pub mod read_file;
pub mod search_files;
pub mod write_file;

use troupe_runtime::house::HouseScope;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files::FileLimits;
use troupe_runtime::store::{Store, StoreError};
use troupe_runtime::tool::ToolContext;

pub use prepare::{prepare, strip_html};

/// The house scope and the store of `ctx`, or the error result to return.
pub(crate) fn scope(ctx: &ToolContext) -> Result<(HouseScope, Store), ToolResult> {
    let seat = HouseScope::of(ctx).ok_or_else(|| {
        ToolResult::error("this conversation is not in a house thread; house files are there.")
    })?;
    let store = ctx
        .services
        .store()
        .ok_or_else(|| ToolResult::error("the store is not available to this conversation."))?;
    Ok((seat, store))
}

/// The limits set in `[files]` (defaults when the node gave none).
pub(crate) fn limits(ctx: &ToolContext) -> FileLimits {
    ctx.services.file_limits().unwrap_or_default()
}

/// A store failure as the tool's error: a refusal says what to do.
pub(crate) fn failed(e: StoreError) -> ToolResult {
    ToolResult::error(e.to_string())
}

#[cfg(test)]
#[path = "house_files_tests.rs"]
mod tests;

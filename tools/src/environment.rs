//! The environment tools: `create_environment` and `list_sandboxes`, one
//! file each. (A house turn's `run_command` runs on the thread's
//! environment too: see [`crate::run_command`].)
//!
//! Offered to a conversation in a house thread (its services hold a
//! [`Seat`](troupe_runtime::house::Seat)); `create_environment` only while
//! the thread has no environment. Each hands the request to the node's
//! [`Environments`](troupe_runtime::environment::Environments), which scopes
//! it to the caller's house and thread.

pub mod create_environment;
pub mod list_sandboxes;

use std::sync::Arc;

use troupe_runtime::tool::Tool;

/// The environment tools and `delegate_task`, in the table's order.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(create_environment::create_environment::tool()),
        Arc::new(list_sandboxes::list_sandboxes::tool()),
        Arc::new(crate::delegate_task::delegate_task::tool()),
    ]
}

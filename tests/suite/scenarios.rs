//! The field's known failures, as named scenarios troupe passes.
//!
//! Agent runtimes fail their users in a handful of recurring ways: a
//! subagent's result lost, a routine fired twice or silently missed, memory
//! clobbered, a plan forgotten after compaction, a runaway loop, tokens
//! burnt while idle, an approval skipped because the action ran out of
//! sight, work left running after a kill, one tenant reading another's data.
//! Each module here is one short story named after the failure it rules
//! out, run end to end through the real binary or the Rust API with
//! scripted models and fault injection. `docs/scenarios.md` lists every
//! scenario with what troupe promises and the tests that hold it, these and
//! the older ones that already held part of the story.

mod approval_bypass_through_the_background;
mod compaction_amnesia;
mod idle_token_burn;
mod killed_process_leaves_work_behind;
mod lost_subagent_results;
mod memory_clobbered;
mod routine_fires_twice;

use troupe::runtime::model::ModelRequest;

/// Whether `request` is a conversation's own step: not a background
/// review's, nor a compaction's summary (both are asked for too, by the
/// turns before them, and run beside the story).
fn is_turn(request: &ModelRequest) -> bool {
    !request.system.contains("# Background review")
        && !request
            .messages
            .first()
            .is_some_and(|m| m.text().starts_with("Summarize this part"))
}

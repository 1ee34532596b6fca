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
mod routine_silently_misses;
mod runaway_loop;
mod tenant_sees_anothers_data;

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

/// `docs/scenarios.md` names its tests as "`FILE` `function`": each file
/// must exist and define that function, so a rename cannot leave the page
/// naming a test that no longer holds anything.
#[test]
fn every_test_this_page_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/scenarios.md")).unwrap();
    let spans: Vec<&str> = page.split('`').collect();
    let mut named = 0;
    let mut missing = Vec::new();
    // Code spans are the odd pieces; a file's span, one space, a name's span.
    for i in (1..spans.len().saturating_sub(2)).step_by(2) {
        let (file, between, function) = (spans[i], spans[i + 1], spans[i + 2]);
        if !file.ends_with(".rs") || !matches!(between, " " | "\n") {
            continue;
        }
        named += 1;
        let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        if !source.contains(&format!("fn {function}(")) {
            missing.push(format!("{file} {function}"));
        }
    }
    assert!(named >= 30, "only {named} tests found on the page");
    assert_eq!(missing, Vec::<String>::new(), "named in docs/scenarios.md");
}

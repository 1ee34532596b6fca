use serde_json::json;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{Tool, ToolContext};

use super::*;

struct Review {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    store: Store,
}

fn review() -> Review {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf());
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    ctx.services.node().set_store(store.clone());
    ctx.services.propose_removals();
    Review {
        _dir: dir,
        ctx,
        store,
    }
}

fn notes(ctx: &ToolContext) -> String {
    std::fs::read_to_string(ctx.home.agent_notes(&ctx.agent)).unwrap_or_default()
}

async fn memory(ctx: &ToolContext, args: serde_json::Value) -> ToolResult {
    crate::memory::memory::tool().call(args, ctx).await
}

#[tokio::test]
async fn in_a_review_adds_land_and_removals_wait_for_the_user() {
    let r = review();
    std::fs::create_dir_all(r.ctx.home.agent_notes(&r.ctx.agent).parent().unwrap()).unwrap();
    std::fs::write(
        r.ctx.home.agent_notes(&r.ctx.agent),
        "The build uses make\n§\nDeploys on Fridays\n",
    )
    .unwrap();
    let result = memory(
        &r.ctx,
        json!({"target": "memory", "operations": [
            {"action": "add", "content": "Tests run with nextest"},
            {"action": "replace", "old_text": "make", "content": "The build uses cargo"},
            {"action": "remove", "old_text": "Fridays"},
        ]}),
    )
    .await;
    assert!(!result.is_error(), "{}", result.text);
    assert!(
        result.text.contains("Proposed #1, #2 (not applied)"),
        "{}",
        result.text
    );
    assert_eq!(
        notes(&r.ctx),
        "The build uses make\n§\nDeploys on Fridays\n§\nTests run with nextest\n"
    );

    let pending = r.store.read(|c| proposals::list(c, true)).await.unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(
        pending[0].summary,
        "memory memory: replace the entry containing \"make\" with \"The build uses cargo\""
    );
    assert_eq!(pending[1].change["action"], "remove");

    approve(&r.ctx.home, &r.store, 1).await.unwrap();
    reject(&r.store, 2).await.unwrap();
    assert_eq!(
        notes(&r.ctx),
        "The build uses cargo\n§\nDeploys on Fridays\n§\nTests run with nextest\n"
    );
    let again = approve(&r.ctx.home, &r.store, 2).await.unwrap_err();
    assert_eq!(again.to_string(), "proposal #2 was rejected already");
    let missing = approve(&r.ctx.home, &r.store, 9).await.unwrap_err();
    assert_eq!(
        missing.to_string(),
        "there is no proposal #9; `troupe proposals --all` lists them"
    );
}

#[tokio::test]
async fn a_wrong_operation_in_a_review_changes_nothing() {
    let r = review();
    let result = memory(
        &r.ctx,
        json!({"target": "user", "operations": [
            {"action": "add", "content": "Prefers tea"},
            {"action": "remove", "old_text": "coffee"},
        ]}),
    )
    .await;
    assert!(result.is_error());
    assert!(
        result.text.contains("no entry contains \"coffee\""),
        "{}",
        result.text
    );
    assert!(!r.ctx.home.user_profile().exists());
    assert!(r
        .store
        .read(|c| proposals::list(c, false))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_proposal_the_memory_outgrew_is_marked_failed() {
    let r = review();
    memory(
        &r.ctx,
        json!({"target": "user", "action": "add", "content": "Likes tea"}),
    )
    .await;
    let proposed = memory(
        &r.ctx,
        json!({"target": "user", "action": "remove", "old_text": "tea"}),
    )
    .await;
    assert!(!proposed.is_error(), "{}", proposed.text);
    // The user edits the file meanwhile.
    std::fs::write(r.ctx.home.user_profile(), "Likes coffee\n").unwrap();
    let err = approve(&r.ctx.home, &r.store, 1).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("proposal #1 no longer applies and was marked failed: operations[0] (remove): no entry contains \"tea\""),
        "{err}"
    );
    let stored = r
        .store
        .read(|c| proposals::get(c, 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, ProposalStatus::Failed);
    assert_eq!(
        std::fs::read_to_string(r.ctx.home.user_profile()).unwrap(),
        "Likes coffee\n"
    );
}

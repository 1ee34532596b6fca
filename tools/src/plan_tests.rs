use super::*;
use troupe_runtime::tool::Tool as _;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe_runtime::home::Home;

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf());
    (dir, ctx)
}

#[test]
fn the_spec_is_deferred_and_carried() {
    let spec = plan::tool().spec().clone();
    assert_eq!(spec.exposure, troupe_runtime::tool::Exposure::Deferred);
    assert!(spec.flags.carried);
}

#[tokio::test]
async fn write_read_and_merge() {
    let (_d, ctx) = ctx();
    let tool = plan::tool();
    let r = tool.call(json!({}), &ctx).await;
    assert_eq!(r.text, "The plan is empty.");
    let r = tool
        .call(
            json!({"todos": [
                {"id": "1", "content": "read the code", "status": "in_progress"},
                {"id": "2", "content": "write the fix"},
                {"id": "2a", "content": "add a test", "parent": "2"}]}),
            &ctx,
        )
        .await;
    assert!(!r.is_error(), "{}", r.text);
    let r = tool
        .call(
            json!({"merge": true, "todos": [
                {"id": "1", "status": "completed"},
                {"id": "2", "status": "in_progress"},
                {"id": "3", "content": "ship it"}]}),
            &ctx,
        )
        .await;
    assert_eq!(
        r.text,
        "Plan: 1 completed, 1 in progress, 2 pending, 0 cancelled.\n[x] 1: read the code\n[>] 2: write the fix\n  [ ] 2a: add a test\n[ ] 3: ship it"
    );
    assert_eq!(tool.call(json!({}), &ctx).await.text, r.text);
    // Without merge the list is replaced.
    let r = tool
        .call(json!({"todos": [{"id": "x", "content": "only"}]}), &ctx)
        .await;
    assert_eq!(
        r.text,
        "Plan: 0 completed, 0 in progress, 1 pending, 0 cancelled.\n[ ] x: only"
    );
}

#[tokio::test]
async fn one_in_progress_and_known_parents_only() {
    let (_d, ctx) = ctx();
    let tool = plan::tool();
    tool.call(
        json!({"todos": [{"id": "1", "content": "a", "status": "in_progress"}]}),
        &ctx,
    )
    .await;
    let r = tool
        .call(
            json!({"merge": true, "todos": [{"id": "2", "content": "b", "status": "in_progress"}]}),
            &ctx,
        )
        .await;
    assert_eq!(
        r.text,
        "only one item may be in_progress, but 2 are: 1, 2; set the others to pending or completed. The plan was not changed."
    );
    let r = tool
        .call(
            json!({"merge": true, "todos": [{"id": "2", "content": "b", "parent": "9"}]}),
            &ctx,
        )
        .await;
    assert_eq!(
        r.text,
        "item \"2\" names parent \"9\", which is not in the plan. The plan was not changed."
    );
    let r = tool
        .call(json!({"todos": [{"id": "a", "content": "a", "parent": "b"}, {"id": "b", "content": "b", "parent": "a"}]}), &ctx)
        .await;
    assert!(r.text.contains("is its own ancestor"), "{}", r.text);
    let r = tool
        .call(json!({"merge": true, "todos": [{"id": "new"}]}), &ctx)
        .await;
    assert!(
        r.text
            .starts_with("item \"new\" is new and needs `content`"),
        "{}",
        r.text
    );
    assert_eq!(
        tool.call(json!({}), &ctx).await.data["todos"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn open_items_are_carried_and_restored() {
    let (_d, ctx) = ctx();
    let tool = plan::tool();
    assert_eq!(tool.carried(&ctx), None);
    let args = json!({"todos": [
        {"id": "1", "content": "done", "status": "completed"},
        {"id": "2", "content": "doing", "status": "in_progress"},
        {"id": "3", "content": "later"}]});
    let r = tool.call(args.clone(), &ctx).await;
    let carried = "Plan, open items:\n[>] 2: doing\n[ ] 3: later";
    assert_eq!(tool.carried(&ctx).as_deref(), Some(carried));

    let resumed = ToolContext::standalone(ctx.home.clone(), ctx.cwd.clone());
    tool.restore(&resumed, &args, &r);
    assert_eq!(tool.carried(&resumed).as_deref(), Some(carried));

    // A result without data falls back to the arguments.
    let from_args = ToolContext::standalone(ctx.home.clone(), ctx.cwd.clone());
    tool.restore(&from_args, &args, &ToolResult::ok("old result"));
    assert_eq!(tool.carried(&from_args).as_deref(), Some(carried));

    tool.call(json!({"merge": true, "todos": [{"id": "2", "status": "completed"}, {"id": "3", "status": "cancelled"}]}), &ctx).await;
    assert_eq!(tool.carried(&ctx), None);
}

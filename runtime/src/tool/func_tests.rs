use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde_json::json;

use super::*;
use crate::home::Home;

/// Arguments of `add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

fn context(dir: &std::path::Path) -> ToolContext {
    ToolContext::standalone(Home::new(dir), dir.to_path_buf())
}

fn add() -> FnTool<impl Handler> {
    FnTool::from_fn(
        "add",
        "Add two numbers.",
        |p: Params, ctx: ToolContext| async move {
            if p.b == 0 {
                return Err(format!("{} asked to add nothing: give `b`.", ctx.agent));
            }
            Ok(Json(json!({"sum": p.a + p.b})))
        },
    )
}

#[test]
fn the_spec_is_the_params_schema_with_the_builders_flags() {
    let tool = add().read_only().deferred().failure_tolerant();
    let spec = Tool::spec(&tool);
    assert_eq!(spec.name, "add");
    assert_eq!(spec.description, "Add two numbers.");
    assert_eq!(*spec.parameters, schema_for::<Params>());
    assert!(spec.flags.read_only && spec.flags.failure_tolerant);
    assert_eq!(spec.exposure, super::super::Exposure::Deferred);
}

#[tokio::test]
async fn a_call_parses_its_params_and_returns_what_the_function_returns() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let ok = add().call(json!({"a": 2, "b": 3}), &ctx).await;
    assert_eq!(
        ok,
        ToolResult::ok_with("{\n  \"sum\": 5\n}", json!({"sum": 5}))
    );
    let refused = add().call(json!({"a": 2, "b": 0}), &ctx).await;
    assert_eq!(
        refused,
        ToolResult::error("assistant asked to add nothing: give `b`.")
    );
}

#[tokio::test]
async fn bad_arguments_are_an_error_result_naming_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let result = add()
        .call(json!({"a": 2, "c": 3}), &context(dir.path()))
        .await;
    assert!(result.is_error());
    assert!(
        result
            .text
            .starts_with("invalid arguments for `add`: unknown field `c`"),
        "{}",
        result.text
    );
}

#[test]
fn offered_decides_which_conversations_see_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    assert!(add().available(&ctx).is_some());
    let only_bots = add().offered(|ctx| ctx.agent != crate::home::MAIN_AGENT);
    assert_eq!(only_bots.available(&ctx), None);
}

#[test]
fn results_convert_from_text_json_and_results() {
    assert_eq!("hi".into_tool_result(), ToolResult::ok("hi"));
    assert_eq!(String::from("hi").into_tool_result(), ToolResult::ok("hi"));
    let failed: Result<String, std::io::Error> = Err(std::io::Error::other("disk full"));
    assert_eq!(failed.into_tool_result(), ToolResult::error("disk full"));
    let refused: Result<String, ToolResult> = Err(ToolResult::error("no"));
    assert_eq!(refused.into_tool_result(), ToolResult::error("no"));
}

use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde_json::json;

use super::*;
use crate::home::Home;
use crate::tool::schema_for;

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

#[test]
fn offered_as_gives_each_conversation_its_own_spec() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let tool = add().offered_as(|ctx, spec| {
        let mut spec = spec.clone();
        spec.description = format!("{} For {}.", spec.description, ctx.agent);
        Some(spec)
    });
    assert_eq!(
        tool.available(&ctx).unwrap().description,
        "Add two numbers. For assistant."
    );
    assert_eq!(Tool::spec(&tool).description, "Add two numbers.");
    let hidden = add().offered_as(|_, _| None);
    assert_eq!(hidden.available(&ctx), None);
}

/// Carries the sum of the last call, as a plan carries its items.
struct LastSum;

impl Carry for LastSum {
    fn carried(&self, ctx: &ToolContext) -> Option<String> {
        Some(format!("last sum: {}", ctx.services.get::<i64>()?))
    }

    fn carried_call(&self, ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        let sum = *ctx.services.get::<i64>()?;
        Some((json!({"a": sum, "b": 0}), ToolResult::ok(sum.to_string())))
    }

    fn restore(&self, ctx: &ToolContext, _args: &serde_json::Value, result: &ToolResult) {
        if let Ok(sum) = result.text.parse::<i64>() {
            ctx.services.insert(std::sync::Arc::new(sum));
        }
    }
}

#[test]
fn carrying_marks_the_spec_carried_and_holds_through_a_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let tool = add().carrying(LastSum);
    assert!(Tool::spec(&tool).flags.carried);
    assert_eq!(tool.carried(&ctx), None);
    tool.restore(&ctx, &json!({"a": 2, "b": 3}), &ToolResult::ok("5"));
    assert_eq!(tool.carried(&ctx).as_deref(), Some("last sum: 5"));
    assert_eq!(
        tool.carried_call(&ctx),
        Some((json!({"a": 5, "b": 0}), ToolResult::ok("5")))
    );
    assert_eq!(add().carried(&ctx), None, "a plain tool carries nothing");
}

/// Arguments of the other `add`: one list.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Terms {
    /// The numbers to add.
    terms: Vec<i64>,
}

fn by_bots(ctx: &ToolContext) -> bool {
    ctx.agent != crate::home::MAIN_AGENT
}

#[tokio::test]
async fn instead_where_offers_and_runs_the_other_meaning_in_its_scope() {
    let dir = tempfile::tempdir().unwrap();
    let main = context(dir.path());
    let mut bot = context(dir.path());
    bot.agent = "scribe".into();
    let listed = FnTool::from_fn(
        "add",
        "Add a list of numbers.",
        |p: Terms, _ctx: ToolContext| async move { p.terms.iter().sum::<i64>().to_string() },
    );
    let tool = add().instead_where(by_bots, listed);
    assert_eq!(Tool::spec(&tool).description, "Add two numbers.");
    assert_eq!(
        tool.available(&main).unwrap().parameters,
        Schema::from(schema_for::<Params>())
    );
    assert_eq!(
        tool.available(&bot).unwrap().parameters,
        Schema::from(schema_for::<Terms>())
    );
    assert_eq!(
        tool.call(json!({"terms": [1, 2, 3]}), &bot).await,
        ToolResult::ok("6")
    );
    assert_eq!(
        tool.call(json!({"a": 1, "b": 2}), &main).await,
        ToolResult::ok_with("{\n  \"sum\": 3\n}", json!({"sum": 3}))
    );
    assert!(tool.call(json!({"a": 1, "b": 2}), &bot).await.is_error());
}

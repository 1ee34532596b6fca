//! The holes found by attacking the landed build, pinned end to end
//! (see docs/security.md): what a hostile model sends cannot make a
//! conversation unloadable.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::runtime::model::Turn;
use troupe::runtime::protocol::Message;
use troupe::TurnOutcome;

use super::support::*;

/// `levels` nested objects and arrays around a string.
fn nested(levels: usize) -> Value {
    let mut value = json!("Paris");
    for i in 0..levels {
        value = if i % 2 == 0 {
            json!({ "a": value })
        } else {
            json!([value])
        };
    }
    value
}

#[tokio::test]
async fn arguments_nested_126_deep_get_an_error_result_and_the_conversation_still_loads() {
    let home = TestHome::new();
    // 125 levels inside the arguments object: 126 in all, which serde_json
    // read once but not inside a stored message.
    let model = script(vec![
        Turn::tool_call("lookup_weather", json!({ "city": nested(125) })),
        Turn::text("I will keep my arguments flat.").expecting("the limit is 64"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(Weather::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "Weather?").await;
    assert_eq!(report.outcome, TurnOutcome::Finished);
    assert_eq!(report.text, "I will keep my arguments flat.");
    runtime.shutdown().await;

    // Reopened, the conversation loads, with the call's arguments replaced
    // by a stand-in and its error result kept.
    let again = script(vec![Turn::text("Still here.").expecting("again")]);
    let runtime = home
        .builder(Arc::clone(&again))
        .tool(Weather::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    assert_eq!(ask(&bot, "again").await.text, "Still here.");
    let history = &again.requests()[0].messages;
    let arguments = history.iter().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.first().map(|c| c.arguments.clone()),
        _ => None,
    });
    assert_eq!(
        arguments,
        Some(json!({
            "troupe_omitted": "not kept: it nested 126 levels deep, more than the limit of 64"
        }))
    );
    let result = history.iter().find_map(|m| match m {
        Message::Tool { result, .. } => Some(result.text.clone()),
        _ => None,
    });
    assert_eq!(
        result,
        Some(
            "the arguments of `lookup_weather` nest objects and arrays 126 levels deep; the \
             limit is 64. The call did not run. Call it again with flatter arguments (pass deep \
             data as a JSON string or in a file)."
                .to_string()
        )
    );
    runtime.shutdown().await;
}

//! A tool from a function: `#[troupe::tool]` on an async function, and
//! `FnTool::from_fn` with a closure — the way troupe's built-in tools are
//! written too.
//!
//! `word_count` is a function and a params struct: the struct's derived
//! JSON schema is what the model sees, the doc comment is the tool's
//! description, and `#[troupe::tool(read_only)]` sets its flag. `greet`
//! captures a greeting, so it is a closure. A scripted model first calls
//! `word_count` with a bad argument (a number for `text`) and gets the
//! schema's error back, corrects itself, then greets.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example tool_from_fn
//! ```

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::{AgentEvent, FnTool, Json, Runtime, ToolContext};

/// Arguments of `word_count`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    /// The text to count the words of.
    text: String,
    /// Count only words at least this long (default 1).
    min_len: Option<usize>,
}

/// Count the words of a text (words are separated by whitespace).
#[troupe::tool(read_only)]
async fn word_count(p: Params, _ctx: &ToolContext) -> anyhow::Result<Json<serde_json::Value>> {
    let min = p.min_len.unwrap_or(1);
    let count = p
        .text
        .split_whitespace()
        .filter(|w| w.chars().count() >= min)
        .count();
    // `Json` is shown to the model as JSON and kept as the result's data.
    Ok(Json(json!({ "count": count })))
}

/// Arguments of `greet`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Greet {
    /// Who to greet.
    name: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let greeting = String::from("Hello");
    let greet = FnTool::from_fn(
        "greet",
        "Greet someone by name.",
        move |p: Greet, ctx: ToolContext| {
            let greeting = greeting.clone();
            async move { format!("{greeting}, {}! (from {})", p.name, ctx.agent) }
        },
    );

    let home = tempfile::tempdir()?;
    let model = Arc::new(ScriptedProvider::new(vec![
        Turn::tool_call("word_count", json!({"text": 42})),
        // `expecting` makes the script fail loudly if the tool said something else.
        Turn::tool_call(
            "word_count",
            json!({"text": "the quick brown fox jumps over the lazy dog"}),
        )
        .expecting("`text` must be string, not an integer"),
        Turn::tool_call("greet", json!({"name": "Ada"})).expecting("\"count\": 9"),
        Turn::text("That sentence has 9 words. Hello, Ada!").expecting("Hello, Ada!"),
    ]));
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(model.clone())
        .tool(Arc::new(word_count::tool()))
        .tool(Arc::new(greet))
        .build()
        .await?;

    let bot = runtime.bot("assistant").await?;
    let mut turn = bot.send("Count the words, then greet Ada.").await?;
    while let Some(event) = turn.next_event().await {
        match event {
            AgentEvent::ToolCallStarted { call } => {
                println!("model called {} {}", call.name, call.arguments);
            }
            AgentEvent::ToolCallFinished { name, result, .. } => {
                println!("{name} returned {:?}", result.text);
            }
            _ => {}
        }
    }
    let report = turn.result().await?;
    println!("answer: {}", report.text);
    anyhow::ensure!(
        report.text.contains("Hello, Ada!"),
        "the script did not run to its end: {report:?}"
    );

    // The model saw `word_count` with the schema derived from `Params`.
    let first = model.requests().into_iter().next();
    if let Some(tool) = first.and_then(|r| r.tools.iter().find(|t| t.name == "word_count").cloned())
    {
        println!("{}: {}", tool.name, tool.description);
        println!("schema the model saw: {}", tool.parameters);
    }

    runtime.shutdown().await;
    Ok(())
}

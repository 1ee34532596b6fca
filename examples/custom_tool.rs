//! A tool of your own: implement the `Tool` trait and register it with
//! `RuntimeBuilder::tool`.
//!
//! `word_count` takes its arguments as a params struct; its JSON schema (what
//! the model sees) is derived from the struct with `schema_for`, and
//! `parse_args` turns a call's arguments into it, or into an error result that
//! tells the model what to fix. A scripted model calls the tool, then answers
//! with what it returned.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example custom_tool
//! ```

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::ToolResult;
use troupe::runtime::tool::{parse_args, schema_for};
use troupe::{AgentEvent, Runtime, Tool, ToolContext, ToolSpec};

// The doc comments below become the schema's descriptions.
/// Arguments of `word_count`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    /// The text to count the words of.
    text: String,
    /// Count only words at least this long (default 1).
    min_len: Option<usize>,
}

/// Counts the words of a text.
struct WordCount {
    spec: ToolSpec,
}

impl WordCount {
    fn new() -> Self {
        let spec = ToolSpec::new(
            "word_count",
            "Count the words of a text (words are separated by whitespace).",
            schema_for::<Params>(),
        )
        // It changes nothing, so the loop may run it alongside other read-only calls.
        .read_only();
        Self { spec }
    }
}

#[async_trait::async_trait]
impl Tool for WordCount {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: serde_json::Value, _ctx: &ToolContext) -> ToolResult {
        let params: Params = match parse_args("word_count", args) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let min = params.min_len.unwrap_or(1);
        let count = params
            .text
            .split_whitespace()
            .filter(|w| w.chars().count() >= min)
            .count();
        // `text` is what the model reads; `data` is for programs (the CLI, the API).
        ToolResult::ok_with(format!("{count} words"), json!({ "count": count }))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let model = Arc::new(ScriptedProvider::new(vec![
        Turn::tool_call(
            "word_count",
            json!({"text": "the quick brown fox jumps over the lazy dog"}),
        ),
        // `expecting` makes the script fail loudly if the tool said something else.
        Turn::text("That sentence has 9 words.").expecting("9 words"),
    ]));
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(model.clone())
        .tool(Arc::new(WordCount::new()))
        .build()
        .await?;

    let bot = runtime.bot("assistant").await?;
    let mut turn = bot
        .send("How many words in 'the quick brown fox jumps over the lazy dog'?")
        .await?;
    while let Some(event) = turn.next_event().await {
        match event {
            AgentEvent::ToolCallStarted { call } => {
                println!("model called {} {}", call.name, call.arguments);
            }
            AgentEvent::ToolCallFinished { name, result, .. } => {
                println!("{name} returned {:?} (data {})", result.text, result.data);
            }
            _ => {}
        }
    }
    let report = turn.result().await?;
    println!("answer: {}", report.text);

    // The model saw the tool with the schema derived from `Params`.
    let first = model.requests().into_iter().next();
    if let Some(tool) = first.and_then(|r| r.tools.iter().find(|t| t.name == "word_count").cloned())
    {
        println!("schema the model saw: {}", tool.parameters);
    }

    runtime.shutdown().await;
    Ok(())
}

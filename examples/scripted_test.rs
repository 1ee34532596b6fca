//! Testing your own bot offline, with a scripted model.
//!
//! A script is a JSON file `{"turns": [...]}`: each model call is answered by
//! the next turn (text, tool calls, or both), and a turn's `expect` is a
//! substring the latest user or tool message must contain, so the test fails
//! loudly, naming the turn, when the bot sent something else.
//!
//! Two forms are shown:
//! 1. `.model(format!("script:{path}"))`: the spec any bot or `troupe run
//!    --model` takes (a relative path is read from the home; an absolute
//!    one is used as is). Assert on the turn's report.
//! 2. `.provider(Arc::new(ScriptedProvider::load(path)?))`: the same script,
//!    with the provider kept, so the requests the bot made (system prompt,
//!    history, tools) can be asserted on too.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example scripted_test
//! ```
//!
//! In your own crate, the body of each `check_*` function is a `#[tokio::test]`.

use std::path::Path;
use std::sync::Arc;

use troupe::runtime::model::ScriptedProvider;
use troupe::runtime::protocol::Message;
use troupe::{BotSpec, Runtime, TurnOutcome};

/// The bot under test: it reads the to-do list and says what is on it.
fn bot_spec() -> BotSpec {
    let mut spec = BotSpec::new("todo", "To-do keeper", "Reads the to-do list.");
    spec.mission = "You keep the user's to-do list in todo.txt.".into();
    spec.tools = vec!["read_file".into()];
    spec
}

const SCRIPT: &str = r#"{"turns": [
  {"text": "Let me read the list.",
   "tool_calls": [{"name": "read_file", "arguments": {"path": "todo.txt"}}],
   "expect": "what is on my list"},
  {"text": "You have to buy milk and call Ada.", "expect": "buy milk"}
]}"#;

/// Form 1: the `script:PATH` spec.
async fn check_with_spec(dir: &Path, script: &Path) -> anyhow::Result<()> {
    let home = dir.join("home-spec");
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(dir)
        .model(format!("script:{}", script.display()))
        .build()
        .await?;
    let bot = runtime.spawn_bot(bot_spec()).await?;
    let report = bot.send("what is on my list?").await?.result().await?;
    runtime.shutdown().await;

    anyhow::ensure!(report.outcome == TurnOutcome::Finished, "{report:?}");
    anyhow::ensure!(
        report.text == "You have to buy milk and call Ada.",
        "{report:?}"
    );
    anyhow::ensure!(report.steps == 2, "two model calls, not {}", report.steps);
    println!(
        "script:PATH form   ok: {:?} in {} steps",
        report.text, report.steps
    );
    Ok(())
}

/// Form 2: the provider itself, whose requests are recorded.
async fn check_with_provider(dir: &Path, script: &Path) -> anyhow::Result<()> {
    let model = Arc::new(ScriptedProvider::load(script)?);
    let runtime = Runtime::builder()
        .home(dir.join("home-provider"))
        .cwd(dir)
        .provider(model.clone())
        .build()
        .await?;
    let bot = runtime.spawn_bot(bot_spec()).await?;
    let report = bot.send("what is on my list?").await?.result().await?;
    runtime.shutdown().await;
    anyhow::ensure!(report.outcome == TurnOutcome::Finished, "{report:?}");

    let requests = model.requests();
    anyhow::ensure!(requests.len() == 2, "{} requests", requests.len());
    // The bot's mission is in its system prompt.
    anyhow::ensure!(
        requests[0].system.contains("todo.txt"),
        "{}",
        requests[0].system
    );
    // Its tool list is narrowed to what its spec allows.
    let tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    anyhow::ensure!(
        tools.contains(&"read_file") && !tools.contains(&"run_command"),
        "{tools:?}"
    );
    // The second call saw the file's content as the tool's result.
    match requests[1].messages.last() {
        Some(Message::Tool { name, result, .. }) => {
            anyhow::ensure!(
                name == "read_file" && result.text.contains("call Ada"),
                "{result:?}"
            );
        }
        other => anyhow::bail!("the last message was not the tool result: {other:?}"),
    }
    println!(
        "provider form      ok: {} requests, tools {tools:?}",
        requests.len()
    );
    Ok(())
}

/// A failed expectation: the bot read the wrong file, the script says so.
async fn check_a_failed_expectation(dir: &Path) -> anyhow::Result<()> {
    let script = dir.join("wrong.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"text": "Sure.", "expect": "shopping list"}]}"#,
    )?;
    let runtime = Runtime::builder()
        .home(dir.join("home-wrong"))
        .cwd(dir)
        .model(format!("script:{}", script.display()))
        .build()
        .await?;
    let bot = runtime.spawn_bot(bot_spec()).await?;
    let report = bot.send("what is on my list?").await?.result().await?;
    runtime.shutdown().await;
    match &report.outcome {
        TurnOutcome::Failed { error } => {
            anyhow::ensure!(error.contains("expected"), "{error}");
            println!("failed expectation ok: {error}");
            Ok(())
        }
        other => anyhow::bail!("the turn should have failed, not {other:?}"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("todo.txt"), "- buy milk\n- call Ada\n")?;
    let script = dir.path().join("todo-script.json");
    std::fs::write(&script, SCRIPT)?;

    check_with_spec(dir.path(), &script).await?;
    check_with_provider(dir.path(), &script).await?;
    check_a_failed_expectation(dir.path()).await?;
    println!("all checks passed");
    Ok(())
}

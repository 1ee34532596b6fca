//! One bot, one turn: the smallest use of troupe's Rust API.
//!
//! A runtime is built on a throwaway home with a scripted model (no network,
//! no key), the main agent (`assistant`) is sent one message, and the turn's
//! events are printed as they stream, then its answer.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example hello_bot
//! ```

use std::sync::Arc;

use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::Runtime;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    // The model: one scripted answer. A real one would be `.model("openai:gpt-4o-mini")`.
    let model = Arc::new(ScriptedProvider::new(vec![Turn::text(
        "Hello! I am troupe's main agent, answering from a script.",
    )]));
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(model)
        .build()
        .await?;

    let bot = runtime.bot("assistant").await?;
    let mut turn = bot.send("Say hello.").await?;
    println!("events:");
    // The stream ends with the turn (its last event is `turn_finished`).
    while let Some(event) = turn.next_event().await {
        println!("  {}", serde_json::to_string(&event)?);
    }
    let report = turn.result().await?;
    println!("outcome: {:?}", report.outcome);
    println!("answer: {}", report.text);

    runtime.shutdown().await;
    Ok(())
}

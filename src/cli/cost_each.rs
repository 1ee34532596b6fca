//! `troupe tools --cost --each [--model M]`: what each always-on tool
//! costs, as the real model counts it.
//!
//! `--cost` estimates from characters; a model's tokenizer and the way its
//! provider lays tool definitions into the prompt make the real figure
//! differ. So this asks the provider: one request carrying no tool, then
//! one per always-on tool of the main agent's conversation carrying that
//! tool alone, each with the same one-line prompt and one output token.
//! A tool's cost is its request's input tokens (cache reads and writes
//! included) less the first request's, as the provider's usage reports
//! them. It spends credit, so it says so first, and on a terminal asks.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use futures::StreamExt;
use troupe_actors::bot::BotSpec;
use troupe_runtime::model::{ModelEvent, ModelRequest, ModelsConfig, ResolvedModel};
use troupe_runtime::protocol::{ActorKind, Message};
use troupe_runtime::tool::ToolDefinition;

use super::super::view::View;

/// One tool's measured cost.
#[derive(Debug, serde::Serialize)]
struct Measured {
    /// The tool.
    name: String,
    /// Input tokens it added to the request, as the provider counted.
    tokens: u64,
    /// troupe's estimate, for comparison.
    estimate: u64,
}

/// `troupe tools --cost --each`.
pub async fn each(
    view: &View,
    model: Option<String>,
    yes: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let bots = view.bots().await?;
    let tools = super::always_on(
        &view.home,
        &BotSpec::default(),
        ActorKind::Conversation,
        bots.len() > 1,
    );
    let spec = model.unwrap_or_else(|| view.config.agent.model.clone());
    let models = ModelsConfig::load(&view.home.models_file())?;
    let env = |k: &str| std::env::var(k).ok();
    let resolved = troupe_runtime::model::resolve(&spec, &models, &env, view.home.root())
        .map_err(|e| anyhow::anyhow!("the model `{spec}` cannot be used: {e}"))?;
    eprintln!(
        "This sends {} small requests to `{spec}` (one without tools, one per always-on tool) \
         and spends credit on that provider.",
        tools.len() + 1
    );
    if std::io::stdin().is_terminal() && !yes {
        eprint!("Go on? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            anyhow::bail!("nothing was sent");
        }
    }
    let baseline = input_tokens(&resolved, Vec::new())
        .await
        .map_err(|e| anyhow::anyhow!("the request without tools failed: {e}"))?;
    let mut measured = Vec::with_capacity(tools.len());
    for tool in tools {
        let name = tool.name.clone();
        let estimate = tool.estimated_tokens();
        let with = input_tokens(&resolved, vec![tool])
            .await
            .map_err(|e| anyhow::anyhow!("the request with `{name}` failed: {e}"))?;
        measured.push(Measured {
            name,
            tokens: with.saturating_sub(baseline),
            estimate,
        });
    }
    let total: u64 = measured.iter().map(|m| m.tokens).sum();
    let estimated: u64 = measured.iter().map(|m| m.estimate).sum();
    if json {
        let out = serde_json::json!({
            "model": spec,
            "baseline_tokens": baseline,
            "tools": measured,
            "total_tokens": total,
            "estimated_tokens": estimated,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Input tokens each always-on tool adds to a call of `{spec}`, as its provider counted \
         (a request without tools took {baseline}):\n"
    );
    let width = measured.iter().map(|m| m.name.len()).max().unwrap_or(10) + 2;
    println!("{:<width$}{:>10}{:>10}", "tool", "measured", "estimate");
    for m in &measured {
        println!("{:<width$}{:>10}{:>10}", m.name, m.tokens, m.estimate);
    }
    println!("{:<width$}{total:>10}{estimated:>10}", "total tokens");
    Ok(ExitCode::SUCCESS)
}

/// The input tokens of one small request carrying `tools`, from the
/// provider's usage.
async fn input_tokens(model: &ResolvedModel, tools: Vec<ToolDefinition>) -> anyhow::Result<u64> {
    let request = ModelRequest {
        model: model.model.clone(),
        system: Arc::from("Answer with one word."),
        messages: Arc::new(vec![Message::user("Say ok.")]),
        tools: Arc::new(tools),
        max_tokens: Some(1),
        temperature: None,
    };
    let mut stream = model.provider.stream(request).await?;
    let mut usage = None;
    while let Some(event) = stream.next().await {
        if let ModelEvent::Usage { usage: u } = event? {
            usage = Some(u);
        }
    }
    let u = usage.ok_or_else(|| {
        anyhow::anyhow!("the provider reported no usage, so nothing can be measured")
    })?;
    Ok(u.input_tokens + u.cache_read_tokens + u.cache_write_tokens)
}

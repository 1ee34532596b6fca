//! `troupe tools --cost`: what the always-on tool definitions cost in every
//! model call, per kind of actor and per bot of the home.
//!
//! Every model call carries the definitions of the always-on tools offered
//! to the conversation, so each one is paid for on every call (prompt
//! caching makes it cheaper, not free). The figures are estimates: the
//! definition's JSON as the OpenAI-compatible client sends it, at four
//! characters a token ([`troupe_runtime::tool::estimate_tokens`]); no
//! tokenizer is bundled, and the real count differs by model. Deferred
//! tools cost nothing until `tool_search` loads them; their names are in
//! `tool_search`'s description, which is counted. `--each` asks the real
//! model instead ([`each`]).

#[path = "cost_each.rs"]
pub mod each;

use std::collections::BTreeSet;
use std::process::ExitCode;

use troupe_actors::bot::BotSpec;
use troupe_actors::toolset::{self, Narrowing, Toolset};
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ActorKind;
use troupe_runtime::tool::{ToolContext, ToolDefinition, CHARS_PER_TOKEN};

use super::view::View;

/// The context window the estimates assume (the use_skill index is sized by it).
const ASSUMED_WINDOW: u64 = 128_000;

/// One toolset's cost.
#[derive(Debug, serde::Serialize)]
pub(super) struct Cost {
    /// The kind of actor, or the bot's name.
    pub(super) who: String,
    /// Estimated tokens in all.
    pub(super) tokens: u64,
    /// Each always-on tool's estimate, in the order the model sees them.
    pub(super) tools: Vec<(String, u64)>,
    /// The deferred tools `tool_search` can load.
    #[serde(skip)]
    pub(super) deferred: Vec<String>,
}

/// The built-in tools `spec` is offered as a `kind` actor, and their cost.
pub(super) fn cost_of(
    home: &Home,
    spec: &BotSpec,
    kind: ActorKind,
    has_bots: bool,
    who: String,
) -> Cost {
    let set = toolset_of(home, spec, kind, has_bots);
    let tools: Vec<(String, u64)> = set
        .definitions
        .iter()
        .map(|d| (d.name.clone(), d.estimated_tokens()))
        .collect();
    Cost {
        who,
        tokens: tools.iter().map(|(_, t)| t).sum(),
        tools,
        deferred: set.deferred.specs.iter().map(|s| s.name.clone()).collect(),
    }
}

/// The always-on tool definitions `spec` is offered as `kind`, in the order
/// the model sees them.
pub(super) fn always_on(
    home: &Home,
    spec: &BotSpec,
    kind: ActorKind,
    has_bots: bool,
) -> Vec<ToolDefinition> {
    toolset_of(home, spec, kind, has_bots)
        .definitions
        .iter()
        .cloned()
        .collect()
}

/// The toolset `spec` is offered as a `kind` actor in this home.
fn toolset_of(home: &Home, spec: &BotSpec, kind: ActorKind, has_bots: bool) -> Toolset {
    let mut ctx = ToolContext::standalone(home.clone(), home.root().to_path_buf());
    ctx.kind = kind;
    ctx.agent = spec.name.clone();
    ctx.context_window = ASSUMED_WINDOW;
    ctx.services
        .set_library_skills(troupe_tools::use_skill::LibrarySkills(spec.skills.clone()));
    let registry = troupe_tools::builtin();
    toolset::compute(
        &registry,
        spec,
        has_bots,
        &Narrowing::default(),
        &ctx,
        &BTreeSet::new(),
    )
}

/// `troupe tools --cost`.
pub async fn cost(view: &View, json: bool) -> anyhow::Result<ExitCode> {
    let bots = view.bots().await?;
    let has_bots = bots.len() > 1;
    let main = BotSpec::default();
    let kinds: Vec<Cost> = ActorKind::ALL
        .iter()
        .map(|kind| {
            let spec = match kind {
                ActorKind::Bot => BotSpec::new("bot", "Bot", "A bot with no tools list."),
                _ => main.clone(),
            };
            cost_of(
                &view.home,
                &spec,
                *kind,
                has_bots,
                kind.as_str().to_string(),
            )
        })
        .collect();
    let per_bot: Vec<Cost> = bots
        .iter()
        .map(|bot| {
            let kind = bot.spec.kind();
            cost_of(&view.home, &bot.spec, kind, has_bots, bot.spec.name.clone())
        })
        .collect();
    if json {
        let out = serde_json::json!({
            "estimator": format!("characters / {CHARS_PER_TOKEN}, rounded up, of each definition's JSON"),
            "kinds": kinds,
            "bots": per_bot,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Estimated tokens of the always-on tool definitions sent with every model call \
         ({CHARS_PER_TOKEN} characters a token; deferred tools cost nothing until loaded).\n"
    );
    let width = kinds[0]
        .tools
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(10)
        + 2;
    let names: Vec<&str> = kinds[0].tools.iter().map(|(n, _)| n.as_str()).collect();
    let mut all: Vec<&str> = names.clone();
    for k in &kinds[1..] {
        for (n, _) in &k.tools {
            if !all.contains(&n.as_str()) {
                all.push(n);
            }
        }
    }
    print!("{:<width$}", "tool");
    for k in &kinds {
        print!("{:>14}", k.who);
    }
    println!();
    for name in &all {
        print!("{name:<width$}");
        for k in &kinds {
            match k.tools.iter().find(|(n, _)| n == name) {
                Some((_, t)) => print!("{t:>14}"),
                None => print!("{:>14}", "-"),
            }
        }
        println!();
    }
    print!("{:<width$}", "total tokens");
    for k in &kinds {
        print!("{:>14}", k.tokens);
    }
    println!("\n\nPer bot of this home:");
    for bot in &per_bot {
        let count = bot.tools.len();
        println!(
            "  {:<16} {:>6} tokens in {count} tool{}",
            bot.who,
            bot.tokens,
            if count == 1 { "" } else { "s" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

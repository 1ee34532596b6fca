//! `troupe bots`: list the bots, or make one (`bots create`) without asking
//! a model to call `bot_create`.
//!
//! Beside a running `troupe serve`, `bots create` goes through its API
//! (`POST /api/bots`, over the owner's socket), so the server's node knows
//! the bot at once; otherwise it starts a node of the home for the write.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use troupe_actors::bot::BotSpec;

use super::view::View;
use super::Builder;

/// `troupe bots [create …]`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe bots
  troupe bots --json | jq -r .name
  troupe bots create scout --description \"Finds and summarises sources\" --tools web_search,web_fetch")]
pub struct BotsArgs {
    /// Make a bot; without it, list them.
    #[command(subcommand)]
    pub command: Option<BotsCommand>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// What `troupe bots` does besides listing.
#[derive(Debug, Subcommand)]
pub enum BotsCommand {
    /// Make a bot: a named agent with its own mission, memory, skills,
    /// conversation and routines.
    #[command(after_help = "Examples:
  troupe bots create scout --description \"Finds and summarises sources\"
  troupe bots create reviewer --title \"Code reviewer\" --description \"Reviews diffs\" \\
      --model anthropic:claude-sonnet-4-5 --tools read_file,find_files,run_command
  troupe bots create notes --description \"Keeps the notes\" --mission \"$(cat mission.md)\" --json")]
    Create(CreateArgs),
}

/// `troupe bots create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Its name: lowercase letters, digits, `-` and `_`.
    pub name: String,
    /// One line: its role.
    #[arg(long)]
    pub description: String,
    /// A short title (default: the name, capitalised).
    #[arg(long)]
    pub title: Option<String>,
    /// Its standing rules, the core of its system prompt (default: composed
    /// from the title and description).
    #[arg(long)]
    pub mission: Option<String>,
    /// Its model spec (`openai:MODEL`, `anthropic:MODEL`, a name of
    /// models.toml, …); default: the home's model.
    #[arg(long)]
    pub model: Option<String>,
    /// The tools it may use, comma-separated (default: all); `troupe tools`
    /// lists them.
    #[arg(long, value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Tools it may never use, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub deny_tools: Vec<String>,
    /// Skills of the home's library it may load, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub skills: Vec<String>,
    /// Print the bot as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `troupe bots`.
pub async fn bots<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    home: Option<&std::path::Path>,
    args: BotsArgs,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    match args.command {
        None => super::info::bots(&read_only().await?, args.json).await,
        Some(BotsCommand::Create(create)) => self::create(builder, home, create).await,
    }
}

/// The definition `args` describe, checked: a valid name, one-line
/// description, tools that exist.
fn spec(args: &CreateArgs) -> anyhow::Result<BotSpec> {
    let known = troupe_tools::builtin();
    let unknown: Vec<&str> = args
        .tools
        .iter()
        .chain(&args.deny_tools)
        .map(|t| t.trim())
        .filter(|t| known.get(t).is_none())
        .collect();
    if !unknown.is_empty() {
        anyhow::bail!(
            "no tool named {}; `troupe tools` lists the tools a bot may be given",
            unknown
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let mut chars = args.name.chars();
        chars.next().map_or_else(String::new, |c| {
            c.to_uppercase().chain(chars).collect::<String>()
        })
    });
    let spec = BotSpec {
        name: args.name.trim().to_owned(),
        title,
        description: args.description.trim().to_owned(),
        mission: args.mission.clone().unwrap_or_default(),
        model: args.model.clone().unwrap_or_default().trim().to_owned(),
        tools: args.tools.iter().map(|t| t.trim().to_owned()).collect(),
        deny_tools: args
            .deny_tools
            .iter()
            .map(|t| t.trim().to_owned())
            .collect(),
        skills: args.skills.iter().map(|s| s.trim().to_owned()).collect(),
        ..BotSpec::default()
    };
    spec.validate()
        .map_err(|e| anyhow::anyhow!("bot `{}`: {e}", args.name))?;
    Ok(spec)
}

async fn create(
    builder: Builder,
    home: Option<&std::path::Path>,
    args: CreateArgs,
) -> anyhow::Result<ExitCode> {
    let spec = spec(&args)?;
    if let Some(remote) = super::remote::Remote::find(home) {
        let answer = remote.post("/bots", &serde_json::to_value(&spec)?).await?;
        let made: BotSpec = serde_json::from_value(answer["bot"]["spec"].clone())?;
        eprintln!("troupe: made through the server at {}", remote.url());
        print(&made, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = builder.build().await?;
    let made = runtime.node().create_bot(spec).await;
    let checked = made
        .as_ref()
        .ok()
        .map(|r| super::preflight::bots(runtime.node(), [r.spec.name.as_str()]));
    runtime.shutdown().await;
    let made = made?;
    print(&made.spec, args.json)?;
    if let Some(Err(e)) = checked {
        eprintln!("troupe: warning: {e}; its turns fail until that is fixed");
    }
    Ok(ExitCode::SUCCESS)
}

fn print(spec: &BotSpec, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(spec)?);
    } else {
        let model = if spec.model.is_empty() {
            "the home's model"
        } else {
            &spec.model
        };
        let tools = if spec.tools.is_empty() {
            "all tools".to_owned()
        } else {
            spec.tools.join(", ")
        };
        println!(
            "made bot `{}` ({}): {}\nmodel: {model}; tools: {tools}\ntalk with it: troupe chat --bot {}",
            spec.name, spec.title, spec.description, spec.name
        );
    }
    Ok(())
}

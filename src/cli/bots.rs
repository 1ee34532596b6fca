//! `troupe bots`: list the bots, make one (`bots create`) without asking
//! a model to call `bot_create`, change one (`bots edit`) or remove one
//! (`bots remove`).
//!
//! Beside a running `troupe serve`, the changes go through its API
//! (`POST /api/bots`, `PATCH` and `DELETE /api/bots/{bot}`, over the
//! owner's socket), so the server's node knows at once; otherwise they
//! start a node of the home for the write.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use troupe_actors::bot::BotSpec;
use troupe_actors::bot_edit::BotRemoval;

use super::view::View;
use super::Builder;

/// `troupe bots [create …]`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe bots
  troupe bots --json | jq -r .name
  troupe bots create scout --description \"Finds and summarises sources\" --tools web_search,web_fetch
  troupe bots edit scout --model anthropic:claude-sonnet-4-5
  troupe bots remove scout")]
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
    /// Change a bot's model, title, description or mission; its
    /// conversations use the new definition from their next activation.
    #[command(after_help = "Examples:
  troupe bots edit scout --model anthropic:claude-sonnet-4-5
  troupe bots edit scout --description \"Finds, checks and summarises sources\"
  troupe bots edit notes --mission \"$(cat mission.md)\" --json")]
    Edit(EditArgs),
    /// Remove a bot: it leaves every house and thread and its routines are
    /// deleted; its conversations and usage stay in the history, and its
    /// name is free for a new bot.
    #[command(after_help = "Examples:
  troupe bots remove scout
  troupe bots remove scout --json")]
    Remove {
        /// The bot.
        name: String,
        /// What was removed, as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// `troupe bots edit`.
#[derive(Debug, Args)]
pub struct EditArgs {
    /// The bot.
    pub name: String,
    /// Its model (`openai:MODEL`, `anthropic:MODEL`, a name from
    /// `models.toml`); an empty value gives it the home's model.
    #[arg(long)]
    pub model: Option<String>,
    /// Its short title.
    #[arg(long)]
    pub title: Option<String>,
    /// One line: its role.
    #[arg(long)]
    pub description: Option<String>,
    /// Its standing rules, the core of its system prompt.
    #[arg(long)]
    pub mission: Option<String>,
    /// The new definition as one JSON object.
    #[arg(long)]
    pub json: bool,
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
        Some(BotsCommand::Edit(edit)) => self::edit(builder, home, edit).await,
        Some(BotsCommand::Remove { name, json }) => remove(builder, home, &name, json).await,
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

async fn edit(
    builder: Builder,
    home: Option<&std::path::Path>,
    args: EditArgs,
) -> anyhow::Result<ExitCode> {
    let edit = troupe_actors::bot_edit::BotEdit {
        model: args.model,
        title: args.title,
        description: args.description,
        mission: args.mission,
    };
    if edit.model.is_none()
        && edit.title.is_none()
        && edit.description.is_none()
        && edit.mission.is_none()
    {
        anyhow::bail!(
            "nothing to change: give --model, --title, --description or --mission \
             (`troupe bots edit --help`)"
        );
    }
    if let Some(description) = &edit.description {
        anyhow::ensure!(
            !description.trim().is_empty() && !description.contains('\n'),
            "bot `{}`: the description is one line of text",
            args.name
        );
    }
    let spec = if let Some(remote) = super::remote::Remote::find(home) {
        let path = format!("/bots/{}", args.name);
        let answer = remote.patch(&path, &serde_json::to_value(&edit)?).await?;
        eprintln!("troupe: changed through the server at {}", remote.url());
        serde_json::from_value(answer["bot"]["spec"].clone())?
    } else {
        let runtime = builder.build().await?;
        let edited = runtime.node().edit_bot(&args.name, edit).await;
        runtime.shutdown().await;
        edited?
    };
    if args.json {
        println!("{}", serde_json::to_string(&spec)?);
    } else {
        let model = if spec.model.is_empty() {
            "the home's model"
        } else {
            &spec.model
        };
        println!(
            "changed bot `{}` ({}): {}\nmodel: {model}",
            spec.name, spec.title, spec.description
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn remove(
    builder: Builder,
    home: Option<&std::path::Path>,
    name: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let removed: BotRemoval = if let Some(remote) = super::remote::Remote::find(home) {
        let path = format!("/bots/{}", super::remote::encode(name));
        let answer = remote.delete(&path).await?;
        eprintln!("troupe: removed through the server at {}", remote.url());
        serde_json::from_value(answer["removed"].clone())?
    } else {
        let runtime = builder.build().await?;
        let removed = runtime.node().remove_bot(name).await;
        runtime.shutdown().await;
        removed?
    };
    if json {
        println!("{}", serde_json::to_string(&removed)?);
    } else {
        println!(
            "removed bot `{}`: it left {} house(s); {} routine(s) deleted; its conversations stay in the history",
            removed.name, removed.houses, removed.routines
        );
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

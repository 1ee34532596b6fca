//! The command line: `troupe init | run | chat | demo | serve | bots | …`.
//!
//! Every command takes `--home DIR` (or `TROUPE_HOME`). Results go to
//! stdout, progress and errors to stderr; an error is one paragraph saying
//! what was wrong and what to do.
//!
//! Two kinds of command: the writing ones (`init`, `run`, `chat`, `serve`,
//! `demo`, `doctor`, `proposals approve|reject`, the `house` and `thread`
//! commands that change or post) take the home's lock, and create or
//! complete the home; only one process at a time runs them on a home. The
//! listing ones (`bots`, `conversations`, `show`, `search`, `usage`,
//! `routines`, `proposals`, `house list|members`, `thread list|read|search`)
//! read the home read-only beside it and never start a node ([`view`]).

mod bots;
mod browser;
mod chat;
mod config;
mod cost;
mod doctor;
mod env;
mod executors;
pub mod exit;
mod files;
mod house;
mod info;
mod mcp;
mod owner;
mod preflight;
mod proposals;
mod ps;
mod questions;
mod remote;
mod run;
mod serve;
mod serve_cluster;
mod show;
mod source;
mod thread;
mod token;
mod view;
mod workbench;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::api::{Runtime, RuntimeBuilder};
use view::View;

/// troupe: an actor runtime for LLM agents that work together.
#[derive(Debug, Parser)]
#[command(name = "troupe", version, about, long_about = None)]
pub struct Cli {
    /// The home folder (default: $TROUPE_HOME, else ~/.troupe).
    #[arg(long, global = true, env = "TROUPE_HOME")]
    pub home: Option<PathBuf>,
    /// A config override, `section.key=value` (repeatable).
    #[arg(long = "set", short = 'c', global = true, value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented default home (config.toml, models.toml, folders).
    #[command(after_help = "Examples:
  troupe init                  a commented config.toml and models.toml in ~/.troupe
  troupe --home ./h init       in another home
  troupe init --force          write the defaults again")]
    Init {
        /// Rewrite files that exist.
        #[arg(long)]
        force: bool,
    },
    /// Watch a small house of bots work, offline (a scripted model).
    ///
    /// It runs in a fresh temporary home, whatever TROUPE_HOME says (the
    /// demo makes bots, a house and a routine: none of them lands in your
    /// home), and says where; `--home DIR` runs it there instead.
    #[command(after_help = "Examples:
  troupe demo                  in a fresh temporary home (it says where)
  troupe --home ./demo demo    in ./demo, to look around afterwards")]
    Demo,
    /// Run one turn and print the answer.
    Run(run::RunArgs),
    /// Talk with a bot in the terminal.
    Chat(chat::ChatArgs),
    /// List the bots, or make one (`bots create`).
    Bots(bots::BotsArgs),
    /// List the latest conversations.
    #[command(after_help = "Examples:
  troupe conversations
  troupe conversations --bot researcher --limit 5 --json")]
    Conversations {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only this bot's.
        #[arg(long)]
        bot: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a conversation's transcript (its id from `conversations` or `search`).
    #[command(after_help = "Examples:
  troupe show conv_0190f3…
  troupe show conv_0190f3… --json")]
    Show {
        /// The conversation id (`conv_…`).
        conversation: String,
        /// One JSON object per message.
        #[arg(long)]
        json: bool,
    },
    /// Search past conversations (all words, accents ignored).
    #[command(after_help = "Examples:
  troupe search launch notes
  troupe search \"tent\" --limit 3 --json")]
    Search {
        /// The words (quoted or not).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// How many hits.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Tokens and cost by bot and day.
    #[command(after_help = "Examples:
  troupe usage
  troupe usage --json")]
    Usage {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// List the routines, with their next fire and last run.
    #[command(after_help = "Examples:
  troupe routines
  troupe routines --json")]
    Routines {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Memory changes the background review proposed: list, approve, reject.
    Proposals(proposals::ProposalsArgs),
    /// Every tool, its flags, and which actor kinds have it.
    #[command(after_help = "Examples:
  troupe tools
  troupe tools --cost          what the always-on definitions cost per model call")]
    Tools {
        /// As JSON.
        #[arg(long)]
        json: bool,
        /// Estimate the tokens the always-on tool definitions cost in every
        /// model call, per kind of actor and per bot.
        #[arg(long)]
        cost: bool,
        /// With --cost: ask the real model what each always-on tool costs,
        /// one small request per tool (spends credit; asks first on a terminal).
        #[arg(long, requires = "cost")]
        each: bool,
        /// With --each: the model to ask (default `agent.model`).
        #[arg(long, requires = "each")]
        model: Option<String>,
        /// With --each: do not ask before spending credit.
        #[arg(long, requires = "each")]
        yes: bool,
    },
    /// Host the home's bots, fire its routines, and serve the HTTP API and
    /// the web page until stopped (SIGINT/SIGTERM).
    #[command(after_help = "Examples:
  troupe serve                              on [server] listen (127.0.0.1:7878)
  troupe serve --listen 0.0.0.0:8080
  RUST_LOG=troupe=debug troupe serve")]
    Serve {
        /// The address to listen on (default `[server] listen`, 127.0.0.1:7878).
        #[arg(long)]
        listen: Option<String>,
        /// Run as a node of this cluster (docs/cluster.md; `[cluster] name`).
        /// The cookie comes from TROUPE_CLUSTER_COOKIE or `[cluster] cookie_file`.
        #[command(flatten)]
        cluster: serve::ClusterArgs,
    },
    /// The actor tree: supervisors, live conversations, restarts; and what
    /// waits to be resumed.
    #[command(after_help = "Examples:
  troupe ps
  troupe ps --json")]
    Ps {
        /// One JSON object per actor.
        #[arg(long)]
        json: bool,
        /// The cluster's members (nodes, where they listen, their bots)
        /// as the running server's node sees them.
        #[arg(long)]
        cluster: bool,
    },
    /// Check the home's database (integrity and full-text indexes) and say how to recover a copy.
    Doctor(doctor::DoctorArgs),
    /// Houses: make one, list them, their members (people and bots).
    House(house::HouseArgs),
    /// Threads of a house: open, list, post (and see the bots answer), read, search, archive.
    Thread(thread::ThreadArgs),
    /// A house's shared files: list, put local files, get, the log of versions, remove, search.
    Files(files::FilesArgs),
    /// People's tokens for the server: issue, list, revoke.
    Token(token::TokenArgs),
    /// A house's environments: list, create, exec a command, stop; its policy.
    Env(env::EnvArgs),
    /// Measure a workload with a zero-latency model; prints one JSON line.
    Bench(crate::bench::BenchArgs),
    /// The MCP servers of mcp.json: list them, or test one.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// troupe's own browser (browser_exec): status, start it on its profile to sign in, stop it.
    #[command(subcommand)]
    Browser(browser::BrowserCommand),
    /// The outside coding harnesses (pi): list them, install one at its pinned version, remove one.
    #[command(subcommand)]
    Executors(executors::ExecutorsCommand),
    /// Outside executors' instances (pi): list, show, log; start one of your own.
    Workbench(workbench::WorkbenchArgs),
    /// The effective configuration: `troupe config show [--json]`.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Print the completion script of a shell.
    ///
    /// Examples:
    ///   troupe completions bash > ~/.local/share/bash-completion/completions/troupe
    ///   troupe completions zsh > "${fpath[1]}/_troupe"
    ///   troupe completions fish > ~/.config/fish/completions/troupe.fish
    #[command(verbatim_doc_comment)]
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let overrides = parse_overrides(&cli.overrides)?;
    let serving = matches!(cli.command, Command::Serve { .. });
    let telemetry = logs(cli.home.as_deref(), &overrides, serving)?;
    let result = command(cli, overrides).await;
    telemetry.shutdown().await;
    result
}

async fn command(cli: Cli, overrides: Vec<(String, String)>) -> anyhow::Result<ExitCode> {
    let home = cli.home.clone();
    let read_only = || View::open(cli.home.clone(), &overrides);
    let builder = || {
        let mut b = Runtime::builder();
        if let Some(h) = &home {
            b = b.home(h.clone());
        }
        for (k, v) in &overrides {
            b = b.set(k.clone(), v.clone());
        }
        b
    };
    match cli.command {
        Command::Init { force } => info::init(cli.home.clone(), force).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "troupe", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run::run(builder(), args).await,
        Command::Config(command) => config::config(cli.home.clone(), &overrides, command),
        Command::Demo => {
            // Only a `--home` given on this command line: TROUPE_HOME is
            // the user's real home, which the demo must not write into.
            let given = <Cli as clap::CommandFactory>::command()
                .get_matches_from(std::env::args_os())
                .value_source("home")
                == Some(clap::parser::ValueSource::CommandLine);
            crate::demo::run(cli.home.clone().filter(|_| given)).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Chat(args) => chat::chat(|| builder().scheduler(true), args).await,
        Command::Bots(args) => bots::bots(builder(), read_only, cli.home.as_deref(), args).await,
        Command::Conversations { limit, bot, json } => {
            info::conversations(&read_only().await?, limit, bot.as_deref(), json).await
        }
        Command::Show { conversation, json } => {
            show::show(&read_only().await?, &conversation, json).await
        }
        Command::Search { query, limit, json } => {
            info::search(&read_only().await?, &query.join(" "), limit, json).await
        }
        Command::Usage { json } => info::usage(&read_only().await?, json).await,
        Command::Routines { json } => info::routines(&read_only().await?, json).await,
        Command::Proposals(args) => proposals::proposals(cli.home.clone(), &overrides, args).await,
        Command::Tools {
            json,
            cost: true,
            each: true,
            model,
            yes,
        } => cost::each::each(&read_only().await?, model, yes, json).await,
        Command::Tools {
            json, cost: true, ..
        } => cost::cost(&read_only().await?, json).await,
        Command::Tools {
            json, cost: false, ..
        } => info::tools(json),
        Command::Serve { listen, cluster } => {
            serve::serve(builder().scheduler(true), listen, cluster).await
        }
        Command::Ps { json, cluster } => ps::ps(builder(), read_only, json, cluster).await,
        Command::Doctor(args) => doctor::doctor(cli.home.clone(), args).await,
        Command::House(args) => house::house(builder(), read_only, args).await,
        Command::Thread(args) => thread::thread(builder(), read_only, args).await,
        Command::Mcp(command) => mcp::mcp(cli.home.clone(), command).await,
        Command::Executors(command) => executors::executors(cli.home.clone(), command).await,
        Command::Browser(command) => browser::browser(cli.home.clone(), command).await,
        Command::Files(args) => files::files(builder(), read_only, args).await,
        Command::Token(args) => token::token(builder(), read_only, args).await,
        Command::Env(args) => env::env(builder(), args).await,
        Command::Workbench(args) => workbench::workbench(builder(), read_only, args).await,
        Command::Bench(args) => {
            let quiet = args.probe
                || matches!(
                    args.workload,
                    crate::bench::Workload::CrashWorker | crate::bench::Workload::ServerClients
                );
            let line = crate::bench::run(args, cli.home.clone()).await?;
            if !quiet {
                println!("{line}");
            }
            Ok(if crate::bench::crash::passed(&line) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// Installs the log as the layered `[log]` says, `RUST_LOG` over its
/// filter; colours only for a terminal without `NO_COLOR`; and beside it
/// the metrics (`serve`) and traces `[telemetry]` asks for. A config that
/// does not load leaves the defaults here: the command reports it.
fn logs(
    home: Option<&std::path::Path>,
    overrides: &[(String, String)],
    serving: bool,
) -> anyhow::Result<crate::telemetry::Guard> {
    use std::io::IsTerminal;
    use troupe_runtime::home::Home;

    let home = home.map_or_else(Home::from_env, Home::new);
    let env = |key: &str| std::env::var(key).ok().filter(|v| !v.trim().is_empty());
    let (log, telemetry) = troupe_runtime::config::Config::load(&home, &env, overrides)
        .map(|c| (c.log, c.telemetry))
        .unwrap_or_default();
    let (extra, guard) = crate::telemetry::layers(&telemetry, serving, &env)
        .map_err(|e| exit::Misconfigured(format!("[telemetry]: {e:#}")))?;
    let file = (!log.file.trim().is_empty()).then(|| home.root().join(log.file.trim()));
    let options = troupe_runtime::telemetry::LogOptions {
        filter: env("RUST_LOG").unwrap_or(log.filter),
        json: log.json,
        file,
        ansi: std::io::stderr().is_terminal() && env("NO_COLOR").is_none(),
    };
    troupe_runtime::telemetry::install_with(&options, extra).map_err(|e| match e {
        troupe_runtime::telemetry::TelemetryError::Filter { .. } => {
            anyhow::Error::from(exit::Misconfigured(format!("RUST_LOG: {e}")))
        }
        other => other.into(),
    })?;
    Ok(guard)
}

/// A conversation id given on the command line, with where to find one.
fn conversation_id(text: &str) -> anyhow::Result<troupe_runtime::id::ConversationId> {
    text.parse().map_err(|e| {
        anyhow::anyhow!("{e}; `troupe conversations` lists the conversations with their ids")
    })
}

fn parse_overrides(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    raw.iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| exit::Misconfigured(format!("`--set {s}` needs the form section.key=value, e.g. --set agent.max_steps_per_turn=20")).into())
        })
        .collect()
}

/// One paragraph for an error and its causes.
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}

/// The builder type the commands receive.
pub(crate) type Builder = RuntimeBuilder;

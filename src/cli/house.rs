//! `troupe house …`: houses and their members.
//!
//! Beside a running `troupe serve`, every command goes through its API
//! (`src/cli/source.rs`, `src/cli/remote.rs`): in a cluster, that reaches
//! a house of another node. Without one, listings read the store
//! read-only and changes start a node of the home.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use troupe_actors::house::Rules;
use troupe_runtime::protocol::house::{ListenMode, MemberKind};
use troupe_runtime::store::house as table;

use serde_json::json;

use super::remote::{encode, Remote};
use super::source::Source;
use super::view::View;
use super::Builder;

/// `troupe house`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe house create acme
  troupe house create acme --node b      (in a cluster: on node b)
  troupe house move acme c               (in a cluster: from its node to node c)
  troupe house add acme --human ada --name \"Ada L.\"
  troupe house add acme --bot assistant --listen all
  troupe house members acme --json")]
pub struct HouseArgs {
    #[command(subcommand)]
    command: HouseCommand,
}

#[derive(Debug, Subcommand)]
enum HouseCommand {
    /// Make a house (in a cluster: on the node given, else the one
    /// rendezvous hashing picks).
    Create {
        /// Its name: letters, digits, `-`, `_`, `.`.
        name: String,
        /// The node of the cluster to make it on (needs this home's
        /// `troupe serve --cluster …` running).
        #[arg(long)]
        node: Option<String>,
    },
    /// Move a house to another node of the cluster, with its threads,
    /// files, members and tokens (needs this home's `troupe serve
    /// --cluster …` running; docs/cluster.md).
    Move {
        /// The house.
        house: String,
        /// The node to move it to.
        node: String,
    },
    /// List the houses (in a cluster: every node's, with its node).
    List {
        /// One JSON object per house.
        #[arg(long)]
        json: bool,
    },
    /// List a house's members: people and bots, with the bots' listen modes.
    Members {
        /// The house.
        house: String,
        /// One JSON object per member.
        #[arg(long)]
        json: bool,
    },
    /// Add a person or a bot to a house (again: change the bot's listen mode).
    Add {
        /// The house.
        house: String,
        /// A person's handle.
        #[arg(long, conflicts_with = "bot", required_unless_present = "bot")]
        human: Option<String>,
        /// The person's display name.
        #[arg(long, requires = "human")]
        name: Option<String>,
        /// A bot of this home (`troupe bots` lists them).
        #[arg(long)]
        bot: Option<String>,
        /// When the bot is offered turns: all, mentions or off.
        #[arg(long, default_value = "mentions", requires = "bot")]
        listen: String,
    },
    /// Show or change a house's turn-taking rules (docs/house.md).
    Rules {
        /// The house.
        house: String,
        /// At most this many bot turns per round (a person's message and what follows).
        #[arg(long)]
        max_turns: Option<u32>,
        /// At most this many bot turns in a chain of bots answering bots.
        #[arg(long)]
        max_chain: Option<u32>,
        /// At most this many unseen messages shown to a bot offered a turn.
        #[arg(long)]
        context: Option<u32>,
    },
    /// Take a member out of a house and its threads.
    Remove {
        /// The house.
        house: String,
        /// The member's handle.
        handle: String,
    },
}

/// Runs `troupe house …`.
pub async fn house<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    args: HouseArgs,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    match args.command {
        HouseCommand::List { json } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                list_remote(&remote, json).await?;
                return Ok(ExitCode::SUCCESS);
            }
            let view = read_only().await?;
            let houses = view.read(table::list_houses).await?;
            for h in houses {
                if json {
                    println!("{}", serde_json::to_string(&h)?);
                } else {
                    println!("{:<24} {}", h.name, h.id);
                }
            }
        }
        HouseCommand::Members { house, json } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            for m in source.members(&house).await? {
                if json {
                    println!("{}", serde_json::to_string(&m)?);
                } else {
                    match m.kind {
                        MemberKind::Human => {
                            println!("{:<24} person  {}", m.handle, m.display_name)
                        }
                        MemberKind::Bot => println!(
                            "{:<24} bot     listens to {}",
                            m.handle,
                            m.listen.unwrap_or_default()
                        ),
                    }
                }
            }
        }
        HouseCommand::Move { house, node } => {
            let Some(remote) = Remote::find(builder.home_dir()) else {
                anyhow::bail!(
                    "no `troupe serve` runs on this home, so house `{house}` cannot be moved: a house moves between the nodes of a running cluster (start this node with `troupe serve --cluster NAME …`; docs/cluster.md)"
                );
            };
            let moved = remote
                .post(
                    &format!("/houses/{}/move", encode(&house)),
                    &json!({ "node": node }),
                )
                .await?;
            println!(
                "moved house `{}` from node `{}` to node `{}` (epoch {}): {} threads, {} messages, {} files, {} bytes sent; not served for {} ms",
                moved["house"]["name"].as_str().unwrap_or(&house),
                moved["from"].as_str().unwrap_or_default(),
                moved["to"].as_str().unwrap_or(&node),
                moved["epoch"],
                moved["threads"],
                moved["messages"],
                moved["files"],
                moved["bytes"],
                moved["took_ms"],
            );
        }
        HouseCommand::Create { name, node } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let made = remote
                    .post("/houses", &json!({ "name": name, "node": node }))
                    .await?;
                println!(
                    "made house `{}` ({}){}",
                    made["house"]["name"].as_str().unwrap_or(&name),
                    made["house"]["id"].as_str().unwrap_or_default(),
                    made["node"]
                        .as_str()
                        .map(|n| format!(" on node `{n}`"))
                        .unwrap_or_default()
                );
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(node) = node {
                anyhow::bail!(
                    "no `troupe serve` runs on this home, so house `{name}` cannot be placed on node `{node}`: start this node with `troupe serve --cluster NAME …` (docs/cluster.md), or leave out --node"
                );
            }
            let runtime = builder.recover(false).build().await?;
            let made = runtime.create_house(&name).await;
            runtime.shutdown().await;
            let h = made?;
            println!("made house `{}` ({})", h.house.name, h.house.id);
        }
        HouseCommand::Add {
            house,
            human,
            name,
            bot,
            listen,
        } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                println!(
                    "{}",
                    add_remote(&remote, &house, human, name, bot, &listen).await?
                );
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = builder.recover(false).build().await?;
            let result = async {
                let h = runtime.house(&house).await?;
                match (human, bot) {
                    (Some(handle), _) => {
                        let known = h.members().await?.iter().any(|m| m.handle == handle);
                        let m = h.add_human(&handle, name.as_deref()).await?;
                        if known {
                            return anyhow::Ok(format!(
                                "`{}` is a person of `{house}` (already; `troupe token issue {house} {}` gives a new token)",
                                m.handle, m.handle
                            ));
                        }
                        let token = h.issue_token(&m.handle).await?;
                        Ok(format!(
                            "`{}` is a person of `{house}`\ntheir token for the server (shown once; `troupe token revoke {}` revokes it):\n{}",
                            m.handle, token.id, token.secret
                        ))
                    }
                    (None, Some(bot)) => {
                        let mode = ListenMode::parse(&listen).ok_or_else(|| {
                            anyhow::anyhow!("--listen must be all, mentions or off, not `{listen}`")
                        })?;
                        let m = h.add_bot(&bot, mode).await?;
                        Ok(format!(
                            "`{}` is a bot of `{house}`, listening to {mode}",
                            m.handle
                        ))
                    }
                    (None, None) => Err(anyhow::anyhow!("give --human HANDLE or --bot NAME")),
                }
            }
            .await;
            runtime.shutdown().await;
            println!("{}", result?);
        }
        HouseCommand::Rules {
            house,
            max_turns,
            max_chain,
            context,
        } => {
            let changes = [
                ("--max-turns", max_turns),
                ("--max-chain", max_chain),
                ("--context", context),
            ];
            if let Some((name, _)) = changes.iter().find(|(_, v)| *v == Some(0)) {
                anyhow::bail!("{name} must be at least 1");
            }
            let change = |mut rules: Rules| {
                rules.max_turns_per_round = max_turns.unwrap_or(rules.max_turns_per_round);
                rules.max_chain = max_chain.unwrap_or(rules.max_chain);
                rules.context_messages = context.unwrap_or(rules.context_messages);
                rules
            };
            let changing = changes.iter().any(|(_, v)| v.is_some());
            // Through a running server (in a cluster, to the house's
            // node), else the home: shown from its store, changed by a
            // node of its own.
            let source = Source::open(builder.home_dir(), read_only).await?;
            let rules = match source {
                Source::Server(ref remote) if changing => {
                    let rules = change(source.rules(&house).await?);
                    super::source::set_rules(remote, &house, &rules).await?
                }
                Source::Store(view) if changing => {
                    drop(view);
                    let runtime = builder.recover(false).build().await?;
                    let result = async {
                        let h = runtime.house(&house).await?;
                        let rules = change(h.rules().await?);
                        h.set_rules(rules).await?;
                        anyhow::Ok(rules)
                    }
                    .await;
                    runtime.shutdown().await;
                    result?
                }
                source => source.rules(&house).await?,
            };
            println!(
                "max_turns_per_round = {}\nmax_chain = {}\ncontext_messages = {}",
                rules.max_turns_per_round, rules.max_chain, rules.context_messages
            );
        }
        HouseCommand::Remove { house, handle } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let path = format!("/houses/{}/members/{}", encode(&house), encode(&handle));
                remote.delete(&path).await?;
                println!("`{handle}` left `{house}`");
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = builder.recover(false).build().await?;
            let result = async {
                Ok::<_, anyhow::Error>(runtime.house(&house).await?.remove_member(&handle).await?)
            }
            .await;
            runtime.shutdown().await;
            if !result? {
                anyhow::bail!("`{handle}` is not a member of `{house}`");
            }
            println!("`{handle}` left `{house}`");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `house list` through a running server (`GET /api/houses`): in a
/// cluster, with each house's node.
async fn list_remote(remote: &Remote, json: bool) -> anyhow::Result<()> {
    let answer = remote.get("/houses").await?;
    for h in answer["houses"].as_array().into_iter().flatten() {
        if json {
            println!("{}", serde_json::to_string(h)?);
            continue;
        }
        let (name, id) = (
            h["name"].as_str().unwrap_or_default(),
            h["id"].as_str().unwrap_or_default(),
        );
        match h["node"].as_str() {
            Some(node) => println!("{name:<24} {id:<42} {node}"),
            None => println!("{name:<24} {id}"),
        }
    }
    Ok(())
}

/// `house add` through a running server (`POST /api/houses/{house}/members`):
/// what to print.
async fn add_remote(
    remote: &Remote,
    house: &str,
    human: Option<String>,
    name: Option<String>,
    bot: Option<String>,
    listen: &str,
) -> anyhow::Result<String> {
    let body = match (&human, &bot) {
        (Some(handle), _) => json!({ "human": handle, "name": name }),
        (None, Some(bot)) => json!({ "bot": bot, "listen": listen }),
        (None, None) => anyhow::bail!("give --human HANDLE or --bot NAME"),
    };
    let path = format!("/houses/{}/members", encode(house));
    let answer = remote.post(&path, &body).await?;
    let handle = answer["member"]["handle"].as_str().unwrap_or_default();
    if bot.is_some() {
        return Ok(format!(
            "`{handle}` is a bot of `{house}`, listening to {}",
            answer["member"]["listen"].as_str().unwrap_or(listen)
        ));
    }
    Ok(match answer["token"]["secret"].as_str() {
        Some(secret) => format!(
            "`{handle}` is a person of `{house}`\ntheir token for the server (shown once; `troupe token revoke {}` revokes it):\n{secret}",
            answer["token"]["id"].as_str().unwrap_or_default()
        ),
        None => format!(
            "`{handle}` is a person of `{house}` (already; `troupe token issue {house} {handle}` gives a new token)"
        ),
    })
}

pub(crate) async fn find_house(
    view: &View,
    name: &str,
) -> anyhow::Result<troupe_runtime::protocol::house::House> {
    let owned = name.to_string();
    view.read(move |c| table::house_by_name(c, &owned))
        .await?
        .ok_or_else(|| anyhow::anyhow!("{}", no_house(name)))
}

/// What the CLI says of a house known nowhere.
pub(crate) fn no_house(name: &str) -> String {
    format!(
        "there is no house named `{name}`; `troupe house list` lists them, `troupe house create {name}` makes it"
    )
}

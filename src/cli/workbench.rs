//! `troupe workbench …`: the outside executors' instances — the ones bots
//! delegated to and the user's own.
//!
//! `list`, `show` and `log` read the delegation record (read-only, so they
//! work beside a running node). `start` runs an instance of the user's own
//! in this process, prints what it does as the record gets it, and waits
//! for its report; Ctrl-C stops it (its report says what it had so far).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;
use troupe_actors::delegation::executor::Place;
use troupe_actors::delegation::executors::{self, Start, USER};
use troupe_actors::delegation::record::{self, Instance};
use troupe_runtime::id::{ConversationId, SubagentId};

use super::view::View;
use super::Builder;

/// `troupe workbench`.
#[derive(Debug, Args)]
pub struct WorkbenchArgs {
    #[command(subcommand)]
    command: WorkbenchCommand,
}

#[derive(Debug, Subcommand)]
enum WorkbenchCommand {
    /// The instances: running ones first, then the latest ended ones.
    List {
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// One instance: its task, folder, state, and what it did.
    Show {
        /// The instance's id (`sub_…`).
        id: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Everything an instance printed, as the harness wrote it (JSON lines).
    Log {
        /// The instance's id.
        id: String,
    },
    /// Tell a running instance something before its next step (through `troupe serve`).
    Steer {
        /// The instance's id.
        id: String,
        /// The message.
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
    },
    /// Stop a running instance (through `troupe serve`).
    Stop {
        /// The instance's id.
        id: String,
    },
    /// Start an instance of your own and wait for its report.
    Start {
        /// The executor (`troupe executors list`).
        executor: String,
        /// The folder it works in.
        #[arg(long)]
        folder: String,
        /// The task.
        #[arg(required = true, num_args = 1..)]
        task: Vec<String>,
    },
}

/// Runs `troupe workbench`.
pub async fn workbench<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    args: WorkbenchArgs,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    match args.command {
        WorkbenchCommand::List { limit, json } => {
            let view = read_only().await?;
            let all = view
                .read(move |c| record::instances(c, false, limit))
                .await?;
            if json {
                let list: Vec<_> = all.iter().map(instance_json).collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if all.is_empty() {
                println!(
                    "No executor instance has run in this home. Bots start them with `delegate` \
                     and an `executor`; you, with `troupe workbench start pi --folder DIR \"task\"`."
                );
            } else {
                for i in &all {
                    println!("{}", line(i));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WorkbenchCommand::Show { id, json } => {
            let view = read_only().await?;
            let (instance, events) = find(&view, &id).await?;
            if json {
                let mut value = instance_json(&instance);
                value["events"] = events
                    .iter()
                    .map(|(seq, kind, text, at)| json!({"seq": seq, "kind": kind, "text": text, "at": at}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                println!("{}", line(&instance));
                println!("task: {}", instance.row.goal);
                if let Some(session) = &instance.row.session {
                    println!("session: {session}");
                }
                for (_, kind, text, at) in &events {
                    println!(
                        "{at}  {kind:<7} {}",
                        text.replace('\n', "\n                                  ")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WorkbenchCommand::Log { id } => {
            let view = read_only().await?;
            let (instance, _) = find(&view, &id).await?;
            let executor = instance.row.executor.as_deref().unwrap_or("pi");
            let path = troupe_actors::delegation::executor::output_file(
                &view.home,
                executor,
                instance.row.id,
            );
            match std::fs::read(&path) {
                Ok(bytes) => {
                    use std::io::Write;
                    std::io::stdout().write_all(&bytes)?;
                }
                Err(e) => anyhow::bail!(
                    "{} printed nothing that was kept ({}: {e})",
                    instance.row.id,
                    path.display()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        WorkbenchCommand::Steer { id, message } => {
            let remote = served(&builder, "steer")?;
            let answer = remote
                .post(
                    &format!("/workbench/{id}/steer"),
                    &json!({"message": message.join(" ")}),
                )
                .await?;
            println!("sent to {}", answer["steered"].as_str().unwrap_or(&id));
            Ok(ExitCode::SUCCESS)
        }
        WorkbenchCommand::Stop { id } => {
            let remote = served(&builder, "stop")?;
            remote
                .post(&format!("/workbench/{id}/stop"), &json!({}))
                .await?;
            println!("stopping {id}; `troupe workbench show {id}` shows its report");
            Ok(ExitCode::SUCCESS)
        }
        WorkbenchCommand::Start {
            executor,
            folder,
            task,
        } => start(builder, &executor, &folder, &task.join(" ")).await,
    }
}

/// The server running this home: a running instance lives in the process
/// that started it, and only the server's is reachable from here.
fn served(builder: &Builder, what: &str) -> anyhow::Result<super::remote::Remote> {
    super::remote::Remote::find(builder.home_dir()).ok_or_else(|| {
        anyhow::anyhow!(
            "no `troupe serve` runs this home: an instance runs inside the process that started it, \
             so {what} it there (Ctrl-C stops `troupe workbench start`), or start instances through \
             the server"
        )
    })
}

async fn find(
    view: &View,
    id: &str,
) -> anyhow::Result<(Instance, Vec<(i64, String, String, String)>)> {
    let key = id.trim().to_string();
    let found = view
        .read(move |c| {
            let all = record::instances(c, false, usize::MAX)?;
            let Some(instance) = all.into_iter().find(|i| i.row.id.to_string() == key) else {
                return Ok(None);
            };
            let events = record::events_of(c, instance.row.id, 0, usize::MAX)?;
            Ok(Some((instance, events)))
        })
        .await?;
    found.ok_or_else(|| {
        anyhow::anyhow!(
            "no executor instance {id} in this home; `troupe workbench list` shows them"
        )
    })
}

fn whose(i: &Instance) -> String {
    if i.bot == USER {
        "yours".into()
    } else {
        format!("bot {} (conversation {})", i.bot, i.parent)
    }
}

fn line(i: &Instance) -> String {
    format!(
        "{}  {:<9} {:<3} {:>7}  {:>6} tok  {}  {}: {}",
        i.row.id,
        i.row.status,
        i.row.executor.as_deref().unwrap_or("?"),
        executors::elapsed(&i.created_at, i.ended_at.as_deref()),
        i.tokens,
        i.row.folder,
        whose(i),
        i.row.goal.lines().next().unwrap_or_default()
    )
}

fn instance_json(i: &Instance) -> serde_json::Value {
    i.to_json()
}

/// `troupe workbench start`: one instance of the user's own.
async fn start(
    builder: Builder,
    executor: &str,
    folder: &str,
    task: &str,
) -> anyhow::Result<ExitCode> {
    let runtime = builder.recover(true).build().await?;
    let node = runtime.node().clone();
    let outcome = async {
        let home = node.home().clone();
        if troupe_runtime::executors::harness(executor).is_none() {
            anyhow::bail!("there is no executor `{executor}`; `troupe executors list` shows them");
        }
        if troupe_runtime::executors::installed(&home, executor).is_none() {
            anyhow::bail!(
                "{executor} is not installed; `troupe executors install {executor}` installs it"
            );
        }
        let cwd = std::env::current_dir()?;
        let folder = troupe_actors::delegation::executor::check_folder(&home, &cwd, folder)
            .map_err(|e| anyhow::anyhow!(e))?;
        let delegations = node
            .delegations()
            .ok_or_else(|| anyhow::anyhow!("the node's delegations are not running"))?;
        let start = Start {
            executor: executor.to_string(),
            owner: USER.to_string(),
            parent: ConversationId::new(),
            model: node.settings().default_model.clone(),
            waits: true,
            tasks: vec![(task.to_string(), String::new(), folder.clone(), Place::Host)],
            report_to: None,
            session: None,
        };
        let started = delegations
            .start_instances(&node, start)
            .await
            .map_err(|e| anyhow::anyhow!(e.text))?;
        let sub = started.instances[0];
        eprintln!("{sub}: {executor} started in {}", folder.display());
        let waiter = started
            .waiter
            .ok_or_else(|| anyhow::anyhow!("the instance's report has no waiter"))?;
        follow(&node, sub, waiter, &delegations).await
    }
    .await;
    runtime.shutdown().await;
    outcome
}

/// Prints the instance's record as each event commits, until its report.
async fn follow(
    node: &troupe_actors::node::Node,
    sub: SubagentId,
    waiter: tokio::sync::oneshot::Receiver<String>,
    delegations: &std::sync::Arc<troupe_actors::delegation::Delegations>,
) -> anyhow::Result<ExitCode> {
    tokio::pin!(waiter);
    let mut seen = 0_i64;
    let mut changes = delegations.record_changes();
    let mut stopping = false;
    loop {
        tokio::select! {
            report = &mut waiter => {
                print_new(node, sub, &mut seen).await;
                let report = report.map_err(|_| anyhow::anyhow!("the instance ended without a report"))?;
                println!("{report}");
                let status = node
                    .store()
                    .read(move |c| record::instance(c, &sub.to_string()))
                    .await?
                    .map(|r| r.status)
                    .unwrap_or_default();
                return Ok(if status == "done" { ExitCode::SUCCESS } else { ExitCode::FAILURE });
            }
            Ok(()) = changes.changed() => print_new(node, sub, &mut seen).await,
            _ = tokio::signal::ctrl_c(), if !stopping => {
                stopping = true;
                eprintln!("stopping {sub}…");
                delegations.stop_instance(node, sub).await;
            }
        }
    }
}

async fn print_new(node: &troupe_actors::node::Node, sub: SubagentId, seen: &mut i64) {
    let after = *seen;
    let Ok(events) = node
        .store()
        .read(move |c| record::events_of(c, sub, after, 1000))
        .await
    else {
        return;
    };
    for (seq, kind, text, _) in events {
        *seen = seq;
        match kind.as_str() {
            "final" => {}
            "tool" if !text.contains(" returned: ") && !text.contains(" failed: ") => {
                eprintln!("→ {text}")
            }
            "tool" => {}
            _ => eprintln!("{text}"),
        }
    }
}

//! `troupe env …`: a house's environments — list them, create one (bound to
//! a thread or not), run a command in one, stop one, and the house's policy
//! about running without a sandbox.
//!
//! Each subcommand starts a node of the home (the environments' actors live
//! in it), does its work and stops it; an environment's workdir stays on
//! disk between runs.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use troupe_runtime::environment::{Endpoint, EnvironmentInfo, HouseEnvironmentPolicy};

use super::Builder;

/// `troupe env`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe env create acme
  troupe env list acme
  troupe env exec acme ENV_ID -- ls -la
  troupe env stop acme ENV_ID")]
pub struct EnvArgs {
    #[command(subcommand)]
    command: EnvCommand,
}

#[derive(Debug, Subcommand)]
enum EnvCommand {
    /// List a house's environments: status, age, bound threads.
    List {
        /// The house.
        house: String,
        /// Stopped ones too.
        #[arg(long)]
        all: bool,
        /// One JSON object per environment.
        #[arg(long)]
        json: bool,
    },
    /// Provision an environment (or reuse an unbound one), bound to a thread when given.
    Create {
        /// The house.
        house: String,
        /// The thread to bind it to (an id, name or link).
        #[arg(long)]
        thread: Option<String>,
    },
    /// Run a command in an environment and print its output; exits with its code.
    Exec {
        /// The house.
        house: String,
        /// The environment: its id, or a thread bound to it.
        environment: String,
        /// Seconds before it is killed (default: [environments] command_timeout_secs).
        #[arg(long)]
        timeout: Option<u64>,
        /// Run even though the workdir is over its quota, to free space
        /// (`rm …`): the command is killed if it makes the workdir grow.
        #[arg(long)]
        free_space: bool,
        /// The command, run by `bash -c`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Stop an environment for good: its processes are killed, its threads unbound.
    Stop {
        /// The house.
        house: String,
        /// The environment: its id, or a thread bound to it.
        environment: String,
    },
    /// Show or set the house's environment policy: whether its
    /// environments may run unsandboxed where no sandbox works (every such
    /// result is marked unsandboxed), and the endpoints they may reach
    /// through their egress proxy. Changes apply to an environment when its
    /// actor next starts (`troupe env stop`, or after it idles).
    Policy {
        /// The house.
        house: String,
        /// Allow unsandboxed environments.
        #[arg(long, conflicts_with = "deny_unsandboxed")]
        allow_unsandboxed: bool,
        /// Refuse them (the default).
        #[arg(long)]
        deny_unsandboxed: bool,
        /// Let its environments reach HOST:PORT through their egress proxy
        /// (repeatable), e.g. registry.npmjs.org:443.
        #[arg(long, value_name = "HOST:PORT")]
        allow_egress: Vec<Endpoint>,
        /// Take HOST:PORT off the house's egress list (repeatable).
        #[arg(long, value_name = "HOST:PORT")]
        deny_egress: Vec<Endpoint>,
    },
}

fn line(info: &EnvironmentInfo) -> String {
    let threads = if info.threads.is_empty() {
        "-".to_string()
    } else {
        info.threads
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{}  {:<8} {:<11} created {}  last used {}  threads {}{}",
        info.id,
        info.status.as_str(),
        if info.sandboxed {
            "sandboxed"
        } else {
            "UNSANDBOXED"
        },
        info.created_at.format("%Y-%m-%d %H:%M:%S"),
        info.last_used.format("%Y-%m-%d %H:%M:%S"),
        threads,
        if info.lost_commands > 0 {
            format!("  lost commands {}", info.lost_commands)
        } else {
            String::new()
        }
    )
}

/// Runs `troupe env …`.
pub async fn env(builder: Builder, args: EnvArgs) -> anyhow::Result<ExitCode> {
    let runtime = builder.recover(false).build().await?;
    let result = run(&runtime, args.command).await;
    runtime.shutdown().await;
    result
}

async fn run(runtime: &crate::Runtime, command: EnvCommand) -> anyhow::Result<ExitCode> {
    match command {
        EnvCommand::List { house, all, json } => {
            let envs = runtime.house(&house).await?.environments();
            let list = envs.list(all, 1000).await?;
            if list.is_empty() && !json {
                println!("`{house}` has no environments; `troupe env create {house}` makes one");
            }
            for info in list {
                if json {
                    println!("{}", serde_json::to_string(&info)?);
                } else {
                    println!("{}", line(&info));
                }
            }
        }
        EnvCommand::Create { house, thread } => {
            let h = runtime.house(&house).await?;
            let thread = match thread {
                Some(t) => Some(h.thread(&t).await?.info.id),
                None => None,
            };
            let made = h.environments().create(thread).await?;
            println!(
                "{} environment {}{}; its workdir is {}",
                if made.reused { "reused" } else { "made" },
                made.info.id,
                if made.info.sandboxed {
                    ""
                } else {
                    " (UNSANDBOXED: the house allows it and no sandbox works here)"
                },
                made.info.workdir.display()
            );
        }
        EnvCommand::Exec {
            house,
            environment,
            timeout,
            free_space,
            command,
        } => {
            let envs = runtime.house(&house).await?.environments();
            let info = envs.find(&environment).await?;
            let (command, timeout) = (command.join(" "), timeout.map(Duration::from_secs));
            let outcome = if free_space {
                envs.free_space(info.id, &command, timeout).await?
            } else {
                envs.exec(info.id, &command, timeout).await?
            };
            print!("{}", outcome.output);
            if !outcome.output.is_empty() && !outcome.output.ends_with('\n') {
                println!();
            }
            eprintln!(
                "{} in {}{}",
                outcome.ending,
                super::run::duration(outcome.millis),
                if outcome.sandboxed {
                    ""
                } else {
                    " (UNSANDBOXED)"
                }
            );
            let code = outcome
                .exit_code
                .map_or(1, |c| u8::try_from(c).unwrap_or(1));
            return Ok(ExitCode::from(code));
        }
        EnvCommand::Stop { house, environment } => {
            let envs = runtime.house(&house).await?.environments();
            let info = envs.find(&environment).await?;
            let info = envs.stop(info.id).await?;
            println!(
                "stopped environment {}; its workdir stays at {}",
                info.id,
                info.workdir.display()
            );
        }
        EnvCommand::Policy {
            house,
            allow_unsandboxed,
            deny_unsandboxed,
            allow_egress,
            deny_egress,
        } => {
            let envs = runtime.house(&house).await?.environments();
            let mut policy: HouseEnvironmentPolicy = envs.policy().await?;
            let before = policy.clone();
            if allow_unsandboxed || deny_unsandboxed {
                policy.allow_unsandboxed = allow_unsandboxed;
            }
            for endpoint in allow_egress {
                if !policy.egress.contains(&endpoint) {
                    policy.egress.push(endpoint);
                }
            }
            policy.egress.retain(|e| !deny_egress.contains(e));
            if policy != before {
                envs.set_policy(policy.clone()).await?;
            }
            println!(
                "`{house}`: environments {}",
                if policy.allow_unsandboxed {
                    "may run unsandboxed where no sandbox works (their results say so)"
                } else {
                    "run only in a sandbox (creation fails where none works)"
                }
            );
            let configured = &runtime.node().settings().environments.egress;
            let list = |endpoints: &[Endpoint]| {
                endpoints
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match (policy.egress.is_empty(), configured.is_empty()) {
                (true, true) => println!("egress: none (no network at all)"),
                (false, true) => println!("egress: {}", list(&policy.egress)),
                (true, false) => println!("egress: {} ([environments] egress)", list(configured)),
                (false, false) => println!(
                    "egress: {}; and {} ([environments] egress)",
                    list(&policy.egress),
                    list(configured)
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

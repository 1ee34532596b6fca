//! `troupe chat`: an interactive conversation in the terminal.
//!
//! Text streams as the model writes it, each tool call shows as it starts
//! and ends, and Ctrl-C stops the running turn (not the program; Ctrl-D or
//! `/quit` leaves). The conversation is kept across runs; `--new` starts
//! another.

use std::io::Write;
use std::process::ExitCode;

use tokio::io::{AsyncBufReadExt, BufReader};
use troupe_actors::toolset::Narrowing;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::protocol::AgentEvent;

use super::run::{outcome_text, progress_line};
use super::Builder;

/// Arguments of `troupe chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// The bot (default: the main agent, `assistant`).
    #[arg(long)]
    pub bot: Option<String>,
    /// The model spec.
    #[arg(long)]
    pub model: Option<String>,
    /// Start a new conversation instead of going on with the last one.
    #[arg(long)]
    pub new: bool,
}

/// Runs `troupe chat`.
pub async fn chat(mut builder: Builder, args: ChatArgs) -> anyhow::Result<ExitCode> {
    if let Some(model) = &args.model {
        builder = builder.model(model.clone());
    }
    let runtime = builder.build().await?;
    let node = runtime.node();
    let bot = args.bot.as_deref().unwrap_or(MAIN_AGENT);
    let conversation = if args.new {
        node.new_conversation(bot, Narrowing::default()).await?
    } else {
        node.latest_conversation(bot).await?
    };
    eprintln!(
        "troupe chat with `{bot}` ({conversation}). Ctrl-C stops a turn; Ctrl-D or /quit leaves."
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = std::io::stdout();
    loop {
        write!(stdout, "\n> ")?;
        stdout.flush()?;
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/quit" || line == "/exit" {
            break;
        }
        let (mut events, done) = node.send(conversation, line).await?;
        let mut streamed = false;
        loop {
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    match &event {
                        AgentEvent::TextDelta { text } => {
                            write!(stdout, "{text}")?;
                            stdout.flush()?;
                            streamed = true;
                        }
                        other => {
                            if let Some(line) = progress_line(other) {
                                if streamed {
                                    writeln!(stdout)?;
                                    streamed = false;
                                }
                                writeln!(stdout, "  {line}")?;
                            }
                        }
                    }
                }
                _ = tokio::signal::ctrl_c() => {
                    writeln!(stdout, "\n  (stopping the turn)")?;
                    node.stop(conversation).await?;
                }
            }
        }
        if streamed {
            writeln!(stdout)?;
        }
        if let Ok(report) = done.await {
            if let Some(reason) = outcome_text(&report.outcome) {
                writeln!(stdout, "  troupe: {reason}")?;
            }
        }
    }
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

//! `troupe chat`: an interactive conversation in the terminal.
//!
//! Text streams as the model writes it, each tool call shows as it starts
//! and ends, and Ctrl-C stops the running turn (not the program; Ctrl-D or
//! `/quit` leaves). The conversation is kept across runs; `--new` starts
//! another.

use std::io::Write;
use std::process::ExitCode;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{signal, SignalKind};
use troupe_actors::node::NodeError;
use troupe_actors::toolset::Narrowing;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::protocol::AgentEvent;
use troupe_runtime::store::conversations;

use super::questions;
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
    /// Go on with this conversation (`conv_…`), whichever bot it is with.
    #[arg(long, conflicts_with_all = ["bot", "new"])]
    pub conversation: Option<String>,
}

/// Runs `troupe chat`.
pub async fn chat(mut builder: Builder, args: ChatArgs) -> anyhow::Result<ExitCode> {
    if let Some(remote) = super::remote::Remote::find(builder.home_dir()) {
        if args.model.is_some() {
            anyhow::bail!(
                "the home is served at {}: --model applies to a node of this chat's own; leave it out to chat through the server, or stop `troupe serve` first",
                remote.url()
            );
        }
        let bot = args
            .bot
            .as_deref()
            .unwrap_or(troupe_runtime::home::MAIN_AGENT);
        remote
            .chat(bot, args.conversation.clone(), args.new)
            .await?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(model) = &args.model {
        builder = builder.model(model.clone());
    }
    let runtime = builder.build().await?;
    let node = runtime.node();
    let (bot, conversation) = match &args.conversation {
        Some(id) => {
            let id = super::conversation_id(id)?;
            // Activates it from the store: a clear error if there is none.
            node.status(id).await?;
            let row = node
                .store()
                .read(move |c| conversations::get_conversation(c, id))
                .await?
                .ok_or(NodeError::NoSuchConversation(id))?;
            let bot = node
                .bots()
                .into_iter()
                .find(|b| b.id == row.bot)
                .map_or_else(|| row.bot.to_string(), |b| b.spec.name);
            (bot, id)
        }
        None => {
            let bot = args.bot.clone().unwrap_or_else(|| MAIN_AGENT.to_string());
            let conversation = if args.new {
                node.new_conversation(&bot, Narrowing::default()).await?
            } else {
                node.latest_conversation(&bot).await?
            };
            (bot, conversation)
        }
    };
    // A model that cannot be used is said at once, not at the first turn.
    if let Err(e) = super::preflight::bots(node, [bot.as_str()]) {
        runtime.shutdown().await;
        return Err(e);
    }
    eprintln!(
        "troupe chat with `{bot}` ({conversation}). Ctrl-C stops a turn; Ctrl-D or /quit leaves."
    );
    // One interrupt stream for the whole session, installed before the
    // first prompt: a Ctrl-C never falls through to the default action
    // (ending the program), at the prompt or mid-turn.
    let mut interrupts = signal(SignalKind::interrupt())?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = std::io::stdout();
    loop {
        write!(stdout, "\n> ")?;
        stdout.flush()?;
        // `next_line` is cancel safe: a Ctrl-C at the prompt loses nothing typed.
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = interrupts.recv() => {
                write!(stdout, "\n  (no turn is running; Ctrl-D or /quit leaves)")?;
                continue;
            }
        };
        let Some(line) = line else {
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/quit" || line == "/exit" {
            break;
        }
        let (mut events, done) = match node.send(conversation, line).await {
            Ok(turn) => turn,
            // Refused before anything was stored: the session goes on.
            Err(NodeError::TooLarge(e)) => {
                writeln!(stdout, "  troupe: {e}")?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut streamed = false;
        loop {
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    match &event {
                        AgentEvent::QuestionAsked { request_id, questions: asked } => {
                            if streamed {
                                writeln!(stdout)?;
                                streamed = false;
                            }
                            let answers = questions::questions(&mut lines, &mut stdout, "  ", asked).await?;
                            node.answer(request_id, answers);
                        }
                        AgentEvent::ApprovalRequested { request_id, call, reason } => {
                            if streamed {
                                writeln!(stdout)?;
                                streamed = false;
                            }
                            let answer = questions::approval(&mut lines, &mut stdout, "  ", call, reason).await?;
                            node.answer(request_id, Some(answer));
                        }
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
                _ = interrupts.recv() => {
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
    if runtime.node().reviews_running() > 0 {
        eprintln!("troupe: finishing a background review of this conversation");
    }
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

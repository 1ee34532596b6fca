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

/// Asks `ask_user`'s questions at the prompt; `None` when the user leaves (cancel).
async fn ask_questions(
    lines: &mut tokio::io::Lines<BufReader<tokio::io::Stdin>>,
    stdout: &mut std::io::Stdout,
    questions: &serde_json::Value,
) -> anyhow::Result<Option<serde_json::Value>> {
    let mut answers = Vec::new();
    for q in questions.as_array().into_iter().flatten() {
        writeln!(stdout, "  ? {}", q["question"].as_str().unwrap_or_default())?;
        let choices: Vec<&str> = q["choices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str())
            .collect();
        for (i, choice) in choices.iter().enumerate() {
            writeln!(stdout, "    {}. {choice}", i + 1)?;
        }
        write!(stdout, "  answer: ")?;
        stdout.flush()?;
        let Some(line) = lines.next_line().await? else {
            return Ok(None);
        };
        let line = line.trim().to_string();
        // A number picks a choice; anything else is the answer itself.
        let picked = line
            .parse::<usize>()
            .ok()
            .and_then(|n| choices.get(n.wrapping_sub(1)))
            .map(|c| c.to_string())
            .unwrap_or(line);
        answers.push(serde_json::json!({"question": q["question"], "answer": picked}));
    }
    Ok(Some(serde_json::json!({ "answers": answers })))
}

/// Runs `troupe chat`.
pub async fn chat(mut builder: Builder, args: ChatArgs) -> anyhow::Result<ExitCode> {
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
                        AgentEvent::QuestionAsked { request_id, questions } => {
                            if streamed {
                                writeln!(stdout)?;
                                streamed = false;
                            }
                            let answers = ask_questions(&mut lines, &mut stdout, questions).await?;
                            node.answer(request_id, answers);
                        }
                        AgentEvent::ApprovalRequested { request_id, call, reason } => {
                            if streamed {
                                writeln!(stdout)?;
                                streamed = false;
                            }
                            writeln!(stdout, "  approval needed: {} {}\n  why: {reason}", call.name, call.arguments)?;
                            write!(stdout, "  [o]nce, [s]ession, [a]lways, [d]eny? ")?;
                            stdout.flush()?;
                            let answer = lines.next_line().await?.unwrap_or_else(|| "deny".into());
                            node.answer(request_id, Some(serde_json::json!(answer.trim())));
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

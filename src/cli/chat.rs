//! `troupe chat`: an interactive conversation in the terminal.
//!
//! Text streams as the model writes it, each tool call shows as it starts
//! and ends, a spinner says how long the model or a tool has been working,
//! and a line of tokens and cost follows each turn. Ctrl-C stops the
//! running turn (not the program; Ctrl-D or `/quit` leaves). Lines starting
//! with `/` are the prompt's own commands ([`slash`]), never sent to the
//! model. On a terminal the prompt is a line editor with history
//! ([`input`]); from a pipe it reads plain lines, so a script can drive it.
//! The conversation is kept across runs; `--new` starts another.

mod input;
mod inspect;
mod slash;
mod status;

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use futures::FutureExt;
use tokio::signal::unix::{signal, Signal, SignalKind};
use troupe_actors::node::{Node, NodeError};
use troupe_actors::toolset::Narrowing;
use troupe_runtime::home::{Home, MAIN_AGENT};
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::AgentEvent;

use super::questions;
use super::run::{outcome_text, progress_line};
use super::Builder;
use crate::api::Runtime;
use input::{Read, Terminal};
use slash::{Line, Slash};
use status::Activity;

/// Arguments of `troupe chat`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  troupe chat                            go on with the main agent's last conversation
  troupe chat --new --bot researcher     a new conversation with the bot `researcher`
  troupe chat --model script:turns.json  offline, with a scripted model
  printf 'hello\\n/cost\\n' | troupe chat  from a script: plain lines, answers on stdout

At the prompt, /help lists the commands (/new, /model, /tools, /cost, /plan, /quit).")]
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

/// The chat history's file in the home.
const HISTORY: &str = "chat_history";

/// Runs `troupe chat`; `make` gives a builder for the chat's node (again
/// when `/model` switches the model).
pub async fn chat(make: impl Fn() -> Builder, args: ChatArgs) -> anyhow::Result<ExitCode> {
    let first = make();
    let home = first.home_dir().map_or_else(Home::from_env, Home::new);
    if let Some(remote) = super::remote::Remote::find(first.home_dir()) {
        if args.model.is_some() {
            anyhow::bail!(
                "the home is served at {}: --model applies to a node of this chat's own; leave it out to chat through the server, or stop `troupe serve` first",
                remote.url()
            );
        }
        let bot = args.bot.as_deref().unwrap_or(MAIN_AGENT);
        let mut terminal = Terminal::open(home.root().join(HISTORY));
        remote_chat(
            &remote,
            bot,
            args.conversation.clone(),
            args.new,
            &mut terminal,
        )
        .await?;
        return Ok(ExitCode::SUCCESS);
    }
    let builder = match &args.model {
        Some(model) => first.model(model.clone()),
        None => first,
    };
    let runtime = builder.build().await?;
    let (bot, conversation) = match open(runtime.node(), &args).await {
        Ok(opened) => opened,
        Err(e) => {
            runtime.shutdown().await;
            return Err(e);
        }
    };
    // A model that cannot be used is said at once, not at the first turn.
    if let Err(e) = super::preflight::bots(runtime.node(), [bot.as_str()]) {
        runtime.shutdown().await;
        return Err(e);
    }
    eprintln!(
        "troupe chat with `{bot}` ({conversation}). /help lists the commands; Ctrl-C stops a turn; Ctrl-D or /quit leaves."
    );
    let mut session = Session {
        runtime,
        bot,
        conversation,
        terminal: Terminal::open(home.root().join(HISTORY)),
        // One interrupt stream for the whole session, installed before the
        // first prompt: a Ctrl-C never falls through to the default action
        // (ending the program), at the prompt or mid-turn.
        interrupts: signal(SignalKind::interrupt())?,
        out: std::io::stdout(),
    };
    let result = session.run(&make).await;
    if session.runtime.node().reviews_running() > 0 {
        eprintln!("troupe: finishing a background review of this conversation");
    }
    session.runtime.shutdown().await;
    result.map(|()| ExitCode::SUCCESS)
}

/// The bot and the conversation the arguments name.
async fn open(node: &Node, args: &ChatArgs) -> anyhow::Result<(String, ConversationId)> {
    if let Some(id) = &args.conversation {
        let id = super::conversation_id(id)?;
        // Activates it from the store: a clear error if there is none.
        node.status(id).await?;
        return Ok((super::preflight::bot_of(node, id).await?, id));
    }
    let bot = args.bot.clone().unwrap_or_else(|| MAIN_AGENT.to_string());
    let conversation = if args.new {
        node.new_conversation(&bot, Narrowing::default()).await?
    } else {
        node.latest_conversation(&bot).await?
    };
    Ok((bot, conversation))
}

/// A chat on a node of its own.
struct Session {
    runtime: Runtime,
    bot: String,
    conversation: ConversationId,
    terminal: Terminal,
    interrupts: Signal,
    out: std::io::Stdout,
}

impl Session {
    async fn run(&mut self, make: &impl Fn() -> Builder) -> anyhow::Result<()> {
        loop {
            let read = if self.terminal.is_terminal() {
                // The editor reads in raw mode: Ctrl-C comes back as
                // `Interrupted`, not as a signal.
                self.terminal.prompt(&mut self.out).await?
            } else {
                tokio::select! {
                    read = self.terminal.prompt(&mut self.out) => read?,
                    _ = self.interrupts.recv() => Read::Interrupted,
                }
            };
            let line = match read {
                Read::End => return Ok(()),
                Read::Interrupted => {
                    writeln!(self.out, "  (no turn is running; Ctrl-D or /quit leaves)")?;
                    continue;
                }
                Read::Line(line) => line,
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match slash::parse(line) {
                Line::Message(text) => self.turn(text).await?,
                Line::Refused(why) => writeln!(self.out, "  {why}")?,
                Line::Command(Slash::Quit) => return Ok(()),
                Line::Command(command) => {
                    let text = self.command(command, make).await?;
                    writeln!(self.out, "{}", indent(&text))?;
                }
            }
        }
    }

    /// Answers a command; errors the user can fix are said, not returned.
    async fn command(
        &mut self,
        command: Slash,
        make: &impl Fn() -> Builder,
    ) -> anyhow::Result<String> {
        let node = self.runtime.node();
        Ok(match command {
            Slash::Help => slash::help(),
            Slash::Quit => String::new(),
            Slash::New => {
                self.conversation = node
                    .new_conversation(&self.bot, Narrowing::default())
                    .await?;
                format!(
                    "a new conversation with `{}`: {}",
                    self.bot, self.conversation
                )
            }
            Slash::Cost => inspect::cost(node, self.conversation).await?,
            Slash::Tools => inspect::tools(node, &self.bot)?,
            Slash::Plan => inspect::plan(node, self.conversation).await?,
            Slash::Model(None) => inspect::model(node, &self.bot)?,
            Slash::Model(Some(spec)) => self.switch_model(spec, make).await?,
        })
    }

    /// `/model SPEC`: a node of the chat's own, again, with `spec` as its
    /// default model; the conversation goes on there.
    async fn switch_model(
        &mut self,
        spec: String,
        make: &impl Fn() -> Builder,
    ) -> anyhow::Result<String> {
        let node = self.runtime.node();
        let own = node.bot(&self.bot)?.spec.model.clone();
        if !own.is_empty() {
            return Ok(format!(
                "`{}` has its own model ({own}), which /model does not change; `troupe chat --bot` another bot, or change this one's spec",
                self.bot
            ));
        }
        if let Err(e) = inspect::check_spec(node, &spec) {
            return Ok(format!(
                "troupe: {}; the model is unchanged",
                super::describe(&e)
            ));
        }
        self.runtime.shutdown().await;
        self.runtime = make().model(spec.clone()).build().await?;
        self.runtime.node().status(self.conversation).await?;
        super::preflight::bots(self.runtime.node(), [self.bot.as_str()])?;
        Ok(format!("the next turns use {spec}"))
    }

    /// One turn: the text streamed, tool calls and questions shown as they
    /// come, the spinner while something works, the tokens and cost at the end.
    async fn turn(&mut self, text: String) -> anyhow::Result<()> {
        // A Ctrl-C pressed as the last turn ended must not stop this one.
        while let Some(Some(())) = self.interrupts.recv().now_or_never() {}
        let node = self.runtime.node().clone();
        let started = Instant::now();
        let (mut events, done) = match node.send(self.conversation, text).await {
            Ok(turn) => turn,
            // Refused before anything was stored: the session goes on.
            Err(NodeError::TooLarge(e)) => {
                writeln!(self.out, "  troupe: {e}")?;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let mut activity = Activity::new(self.terminal.is_terminal());
        activity.thinking();
        let mut streamed = false;
        loop {
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    if !matches!(event, AgentEvent::TextDelta { .. } | AgentEvent::ToolCallStarted { .. }
                        | AgentEvent::ToolCallFinished { .. } | AgentEvent::QuestionAsked { .. }
                        | AgentEvent::ApprovalRequested { .. }) && progress_line(&event).is_none() {
                        continue;
                    }
                    activity.clear();
                    if streamed && !matches!(event, AgentEvent::TextDelta { .. }) {
                        writeln!(self.out)?;
                        streamed = false;
                    }
                    match &event {
                        AgentEvent::QuestionAsked { request_id, questions: asked } => {
                            let answers = questions::questions(&mut self.terminal, &mut self.out, "  ", asked).await?;
                            node.answer(request_id, answers);
                        }
                        AgentEvent::ApprovalRequested { request_id, call, reason } => {
                            let answer = questions::approval(&mut self.terminal, &mut self.out, "  ", call, reason).await?;
                            node.answer(request_id, Some(answer));
                        }
                        AgentEvent::TextDelta { text } => {
                            write!(self.out, "{text}")?;
                            self.out.flush()?;
                            streamed = true;
                        }
                        other => {
                            if let Some(line) = progress_line(other) {
                                writeln!(self.out, "  {line}")?;
                            }
                        }
                    }
                    match &event {
                        AgentEvent::ToolCallStarted { call } => activity.tool_started(&call.id, &call.name),
                        AgentEvent::ToolCallFinished { call_id, .. } => activity.tool_finished(call_id),
                        AgentEvent::QuestionAsked { .. } | AgentEvent::ApprovalRequested { .. } => activity.thinking(),
                        _ => {}
                    }
                }
                _ = self.interrupts.recv() => {
                    activity.clear();
                    writeln!(self.out, "\n  (stopping the turn)")?;
                    node.stop(self.conversation).await?;
                }
            }
        }
        activity.done();
        if streamed {
            writeln!(self.out)?;
        }
        self.out.flush()?;
        if let Ok(report) = done.await {
            if let Some(reason) = outcome_text(&report.outcome) {
                writeln!(self.out, "  troupe: {reason}")?;
                self.out.flush()?;
            }
            eprintln!(
                "{}",
                status::turn_line(
                    &report.usage,
                    report.cost_usd,
                    report.steps,
                    started.elapsed()
                )
            );
        }
        Ok(())
    }
}

/// `troupe chat` through the server: each message is a turn of `bot` in
/// one conversation, run on the server's node; the prompt's own commands
/// that need no node are answered here.
async fn remote_chat(
    remote: &super::remote::Remote,
    bot: &str,
    conversation: Option<String>,
    new: bool,
    terminal: &mut Terminal,
) -> anyhow::Result<()> {
    eprintln!(
        "troupe: the home is served at {}; this chat's turns run there (/help lists the commands; Ctrl-D ends it)",
        remote.url()
    );
    let mut out = std::io::stdout();
    let (mut conversation, mut new) = (conversation, new);
    loop {
        let line = match terminal.prompt(&mut out).await? {
            Read::End => return Ok(()),
            Read::Interrupted => continue,
            Read::Line(line) => line,
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let text = match slash::parse(line) {
            Line::Message(text) => text,
            Line::Refused(why) => {
                writeln!(out, "  {why}")?;
                continue;
            }
            Line::Command(Slash::Quit) => return Ok(()),
            Line::Command(Slash::Help) => {
                writeln!(out, "{}", indent(&slash::help()))?;
                continue;
            }
            Line::Command(Slash::New) => {
                (conversation, new) = (None, true);
                writeln!(out, "  the next message starts a new conversation")?;
                continue;
            }
            Line::Command(other) => {
                writeln!(
                    out,
                    "  {} needs a node of this chat's own, and the home is served at {}: `troupe usage`, `troupe show` and `troupe tools` read it beside the server",
                    other.name(),
                    remote.url()
                )?;
                continue;
            }
        };
        let (_, id) = remote
            .run_turn(bot, conversation.as_deref(), new, &text, false)
            .await?;
        if !id.is_empty() {
            conversation = Some(id);
        }
        new = false;
    }
}

/// `text` with every line indented by two spaces.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

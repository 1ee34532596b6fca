//! `troupe run`: one turn, non-interactive, and by default the turns its
//! subagents' reports start.
//!
//! A turn that delegates leaves subagents working in the background; their
//! report arrives later as a notice that starts another turn. Returning after
//! the first turn would cut them off (they would resume only when a node next
//! starts), so the run waits for them (`follow`) and prints the answer given
//! after the report; `--no-wait` leaves them to the next node instead.
//!
//! A question the turn asks (the gate's approval, `ask_user`) is put on the
//! terminal when stdin is one. Otherwise nobody can answer it, so the run
//! ends at once with [`NEEDS_ANSWER`], the question and how to allow it,
//! rather than waiting out the gate's timeout in silence.

mod follow;
mod watch;

use std::process::ExitCode;

use troupe_actors::toolset::Narrowing;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::protocol::{AgentEvent, TurnOutcome};

use super::Builder;
use watch::Watch;

/// Arguments of `troupe run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  troupe run \"What is in this folder?\"               one turn with the main agent
  troupe run --bot researcher \"Summarize docs/\"      with another bot
  troupe run --model script:turns.json --json hi     offline, the events as JSON lines
  troupe run --tools read_file,find_files \"Find TODOs\"  only these tools
Exit status: 0 finished, 1 failed, 2 configuration, 3 guard, 4 budget, 5 refused,
6 crashed, 7 a question nobody could answer, 130 stopped.")]
pub struct RunArgs {
    /// The bot (default: the main agent, `assistant`).
    #[arg(long)]
    pub bot: Option<String>,
    /// Go on with this conversation (`conv_…`) instead of starting one.
    #[arg(long, conflicts_with_all = ["bot", "tools"])]
    pub conversation: Option<String>,
    /// The model spec for this run (`openai:gpt-4o-mini`, `script:turns.json`, …).
    #[arg(long)]
    pub model: Option<String>,
    /// Only these tools (comma-separated), or `none`.
    #[arg(long)]
    pub tools: Option<String>,
    /// Auto mode: the guardian is skipped (hardline rules and outside-the-machine asks still apply).
    #[arg(long)]
    pub auto: bool,
    /// Print the event stream as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// The most model calls in this turn.
    #[arg(long)]
    pub max_steps: Option<u32>,
    /// Return after this turn even if it started subagents: they are left
    /// to the next node on this home (`troupe serve` or `troupe chat`).
    #[arg(long)]
    pub no_wait: bool,
    /// The prompt.
    #[arg(required = true, num_args = 1..)]
    pub prompt: Vec<String>,
}

/// The exit status of a run whose turn asked a question (an approval, or
/// `ask_user`) that nobody could answer because stdin is not a terminal.
pub const NEEDS_ANSWER: u8 = 7;

/// The exit status of a turn's outcome: 0 finished, 1 failed, 3 stopped by
/// a guard, 4 by a budget, 5 refused by the model, 6 crashed past its
/// restart limit, 130 stopped; and [`NEEDS_ANSWER`] (7) when the run could
/// not ask its question, 2 when nothing ran because the configuration
/// cannot be used ([`super::exit`]). `docs/getting-started.md` lists the same.
pub fn exit_code(outcome: &TurnOutcome) -> u8 {
    match outcome {
        TurnOutcome::Finished => 0,
        TurnOutcome::Failed { .. } => 1,
        TurnOutcome::Guard { .. } => 3,
        TurnOutcome::Budget { .. } => 4,
        TurnOutcome::Refused { .. } => 5,
        TurnOutcome::Crashed { .. } => 6,
        TurnOutcome::Stopped => 130,
    }
}

/// Why a turn did not finish, in one line.
pub fn outcome_text(outcome: &TurnOutcome) -> Option<String> {
    match outcome {
        TurnOutcome::Finished => None,
        TurnOutcome::Stopped => Some("the turn was stopped".into()),
        TurnOutcome::Guard { reason } => Some(format!("stopped by a guard: {reason}")),
        TurnOutcome::Budget { budget, detail } => {
            Some(format!("stopped by the `{budget}` budget: {detail}"))
        }
        TurnOutcome::Refused { detail } => Some(format!("the model refused: {detail}")),
        TurnOutcome::Crashed { error, .. } => Some(format!("the conversation crashed: {error}")),
        TurnOutcome::Failed { error } => Some(format!("the turn failed: {error}")),
    }
}

/// One line of progress for an event, if it is worth one.
pub fn progress_line(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::ToolCallStarted { call } => {
            let args = call.arguments.to_string();
            let short: String = args.chars().take(100).collect();
            Some(format!("→ {} {short}", call.name))
        }
        AgentEvent::ToolCallFinished {
            name,
            result,
            elapsed_ms,
            ..
        } => {
            let mark = if result.is_error() { "✗" } else { "✓" };
            let first = result.text.lines().next().unwrap_or_default();
            let first: String = first.chars().take(100).collect();
            let mut line = format!("{mark} {name} ({}) {first}", duration(*elapsed_ms));
            // An image the tool posted (`send_gif`): the user gets its link.
            let post = &result.data["post"];
            if let (Some(url), false) = (post["url"].as_str(), result.is_error()) {
                line.push_str(&format!(
                    "\n    🖼 {} <{url}> · {}",
                    post["title"].as_str().unwrap_or_default(),
                    post["attribution"].as_str().unwrap_or_default()
                ));
            }
            Some(line)
        }
        AgentEvent::Compacted { before, after } => {
            Some(format!("… history compacted: {before} → {after} messages"))
        }
        AgentEvent::Notice { topic, text } => Some(format!("[{topic}] {text}")),
        AgentEvent::Warning { message } => Some(format!("warning: {message}")),
        AgentEvent::ActorRestarted {
            kind, id, restarts, ..
        } => Some(format!(
            "↻ {kind} {id} crashed and was restarted (restart {restarts}); its turn resumes"
        )),
        _ => None,
    }
}

/// Whether an event is about the actor tree (printed from the node's bus).
fn is_lifecycle(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::ActorStarted { .. }
            | AgentEvent::ActorStopped { .. }
            | AgentEvent::ActorRestarted { .. }
    )
}

/// Runs `troupe run`.
pub async fn run(mut builder: Builder, args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(remote) = super::remote::Remote::find(builder.home_dir()) {
        // The server's node runs the turn, on its own settings: what this
        // run would set on a node of its own cannot apply there.
        if args.model.is_some() || args.tools.is_some() || args.auto || args.max_steps.is_some() {
            anyhow::bail!(
                "the home is served at {}: --model, --tools, --auto and --max-steps apply to a node of this run's own; leave them out to run the turn on the server, or stop `troupe serve` first",
                remote.url()
            );
        }
        let bot = args.bot.as_deref().unwrap_or(MAIN_AGENT);
        let (code, _) = remote
            .run_turn(
                bot,
                args.conversation.as_deref(),
                true,
                &args.prompt.join(" "),
                args.json,
            )
            .await?;
        return Ok(ExitCode::from(code));
    }
    if let Some(model) = &args.model {
        builder = builder.model(model.clone());
    }
    if args.auto {
        builder = builder.set("trust.mode", "auto");
    }
    if let Some(n) = args.max_steps {
        builder = builder.set("agent.max_steps_per_turn", n.to_string());
    }
    // The actor tree's events (starts, stops, restarts of this run's
    // conversation and its subagents) come from the node's bus.
    let bus = tokio::sync::broadcast::channel(4096).0;
    let mut tree = bus.subscribe();
    // One turn: what a crash left in other conversations is for `serve`
    // or `chat` to resume, on their own bots' models.
    let runtime = builder.recover(false).event_bus(bus).build().await?;
    let node = runtime.node();
    let prompt = args.prompt.join(" ");
    // Before a conversation is opened for it: a refused message leaves nothing.
    if let Err(e) = node.settings().check_user_message(&prompt) {
        runtime.shutdown().await;
        return Err(e.into());
    }
    let bot = match &args.conversation {
        Some(id) => super::preflight::bot_of(node, super::conversation_id(id)?).await,
        None => Ok(args.bot.as_deref().unwrap_or(MAIN_AGENT).to_owned()),
    };
    // A model that cannot be used is said at once, before anything is stored.
    if let Err(e) = bot.and_then(|bot| super::preflight::bots(node, [bot.as_str()]).map(|()| bot)) {
        runtime.shutdown().await;
        return Err(e);
    }
    let bot = args.bot.as_deref().unwrap_or(MAIN_AGENT);
    let narrowing = Narrowing {
        only: args.tools.as_deref().map(|t| {
            if t.trim() == "none" {
                Vec::new()
            } else {
                t.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            }
        }),
        parent: None,
    };
    let conversation = match &args.conversation {
        Some(id) => super::conversation_id(id)?,
        None => node.new_conversation(bot, narrowing).await?,
    };
    let before = follow::Before::look(node, conversation).await?;
    let (mut events, done) = node.send(conversation, prompt).await?;
    let mut watch = Watch::new(node.clone(), conversation, args.json);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                if is_lifecycle(&event) {
                    // Printed from the bus, with every other actor's.
                    continue;
                }
                watch.show(&event).await?;
            }
            Ok(node_event) = tree.recv() => watch.during_first(node_event)?,
        }
    }
    while let Ok(node_event) = tree.try_recv() {
        watch.during_first(node_event)?;
    }
    let report = done
        .await
        .map_err(|_| anyhow::anyhow!("the conversation stopped before the turn ended"))?;
    watch.answer(&report.outcome, &report.text)?;
    if watch.unanswered.is_none() {
        if args.no_wait {
            follow::leave(&watch, &before).await?;
        } else {
            follow::wait(&mut watch, &mut tree, &before).await?;
        }
    }
    if let Some(question) = watch.unanswered.take() {
        eprintln!("troupe: {question}");
        runtime.shutdown().await;
        return Ok(ExitCode::from(NEEDS_ANSWER));
    }
    if runtime.node().reviews_running() > 0 {
        eprintln!("troupe: finishing a background review of this conversation");
    }
    runtime.shutdown().await;
    Ok(ExitCode::from(exit_code(&watch.outcome)))
}

/// A duration in milliseconds as a person reads it: `840 ms`, `2.4 s`,
/// `3 min 05 s`, `1 h 02 min`.
pub(super) fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, ms / 60_000 % 60),
    }
}

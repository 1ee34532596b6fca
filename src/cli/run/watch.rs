//! What `troupe run` shows of its conversation, and who answers the
//! questions its turns ask: the terminal when stdin is one, otherwise nobody
//! (the turn is stopped and the question kept for the run's exit).

use std::io::{IsTerminal, Write};

use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use troupe_actors::events::NodeEvent;
use troupe_actors::node::Node;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::{AgentEvent, TurnOutcome};

use super::{is_lifecycle, outcome_text, progress_line};
use crate::cli::questions;

/// What a run shows of its conversation, and who answers its questions.
pub(super) struct Watch {
    pub(super) node: Node,
    pub(super) conversation: ConversationId,
    json: bool,
    stdout: std::io::Stdout,
    /// The terminal's lines when stdin is one: questions are asked there.
    terminal: Option<Lines<BufReader<Stdin>>>,
    /// What was asked that nobody could answer, once that happened.
    pub(super) unanswered: Option<String>,
    /// How the latest turn of the conversation ended.
    pub(super) outcome: TurnOutcome,
    /// Whether the bus has shown the end of the run's own turn: the
    /// conversation's events after it belong to the turns that follow.
    first_done: bool,
    /// Those events, seen on the bus before the run started following them.
    pub(super) backlog: Vec<AgentEvent>,
}

impl Watch {
    pub(super) fn new(node: Node, conversation: ConversationId, json: bool) -> Self {
        let terminal = std::io::stdin()
            .is_terminal()
            .then(|| BufReader::new(tokio::io::stdin()).lines());
        Self {
            node,
            conversation,
            json,
            stdout: std::io::stdout(),
            terminal,
            unanswered: None,
            outcome: TurnOutcome::Finished,
            first_done: false,
            backlog: Vec::new(),
        }
    }

    /// Shows one event of the conversation and answers it if it is a question.
    pub(super) async fn show(&mut self, event: &AgentEvent) -> anyhow::Result<()> {
        if self.json {
            writeln!(self.stdout, "{}", serde_json::to_string(event)?)?;
        } else if let Some(line) = progress_line(event) {
            eprintln!("{line}");
        }
        self.ask(event).await
    }

    /// Shows a lifecycle event of the actor tree.
    fn lifecycle(&mut self, event: &AgentEvent) -> anyhow::Result<()> {
        if self.json {
            writeln!(self.stdout, "{}", serde_json::to_string(event)?)?;
        } else if let Some(line) = progress_line(event) {
            eprintln!("{line}");
        }
        Ok(())
    }

    /// Puts a question on the terminal and answers it; without a terminal,
    /// stops the turn, cancels the question and keeps it for the exit.
    async fn ask(&mut self, event: &AgentEvent) -> anyhow::Result<()> {
        let mut screen = std::io::stderr();
        let (request_id, answer) = match (&mut self.terminal, event) {
            (
                Some(lines),
                AgentEvent::ApprovalRequested {
                    request_id,
                    call,
                    reason,
                },
            ) => {
                let answer = questions::approval(lines, &mut screen, "", call, reason).await?;
                (request_id, Some(answer))
            }
            (
                Some(lines),
                AgentEvent::QuestionAsked {
                    request_id,
                    questions: asked,
                },
            ) => (
                request_id,
                questions::questions(lines, &mut screen, "", asked).await?,
            ),
            (
                None,
                AgentEvent::ApprovalRequested { request_id, .. }
                | AgentEvent::QuestionAsked { request_id, .. },
            ) => {
                // Stopped before the cancel reaches the gate, so the turn
                // ends instead of going on without the call.
                self.node.stop(self.conversation).await?;
                self.unanswered = questions::unanswerable(event);
                (request_id, None)
            }
            _ => return Ok(()),
        };
        self.node.answer(request_id, answer);
        Ok(())
    }

    /// An event of the node's bus while the run's own turn runs: the actor
    /// tree's are shown, and the conversation's after its turn ended are
    /// kept for `follow`.
    pub(super) fn during_first(&mut self, node_event: NodeEvent) -> anyhow::Result<()> {
        if is_lifecycle(&node_event.event) {
            return self.lifecycle(&node_event.event);
        }
        if node_event.conversation != self.conversation {
            return Ok(());
        }
        if self.first_done {
            self.backlog.push(node_event.event);
        } else if matches!(node_event.event, AgentEvent::TurnFinished { .. }) {
            self.first_done = true;
        }
        Ok(())
    }

    /// Shows an event of a turn that followed the run's own; `true` when it
    /// is the end of that turn, whose answer is then printed.
    pub(super) async fn follow(&mut self, event: &AgentEvent) -> anyhow::Result<bool> {
        self.show(event).await?;
        match event {
            AgentEvent::TurnFinished { outcome, text, .. } => {
                self.answer(outcome, text)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// An event of the node's bus after the run's own turn: the actor
    /// tree's and the conversation's are shown; `true` when it ends a turn
    /// of the conversation.
    pub(super) async fn on_bus(&mut self, node_event: &NodeEvent) -> anyhow::Result<bool> {
        if is_lifecycle(&node_event.event) {
            self.lifecycle(&node_event.event)?;
            return Ok(false);
        }
        if node_event.conversation != self.conversation {
            return Ok(false);
        }
        self.follow(&node_event.event).await
    }

    /// Prints a turn's answer on stdout and why it did not finish on stderr.
    pub(super) fn answer(&mut self, outcome: &TurnOutcome, text: &str) -> anyhow::Result<()> {
        if !self.json && !text.is_empty() {
            writeln!(self.stdout, "{text}")?;
        }
        // An unanswered question says itself why the turn stopped.
        if let Some(reason) = outcome_text(outcome).filter(|_| self.unanswered.is_none()) {
            eprintln!("troupe: {reason}");
        }
        self.outcome = outcome.clone();
        Ok(())
    }
}

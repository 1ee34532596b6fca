//! Following a run's conversation past its own turn: until the subagents
//! that turn started have reported and the turns their reports start have
//! finished.
//!
//! No single event says "all done". A subagent's end is recorded; the last
//! one of a delegation commits the report to the parent's mailbox, marking
//! the delegation `reported` in the same transaction; the report is routed
//! to the parent, whose next turn takes it from the mailbox. So the run
//! looks at each stage in that order — delegations still running, reports
//! not yet taken, a turn running or queued — after every event that can move
//! one of them along, and stops when all are empty. Looking in pipeline
//! order means a report moving on while it looks is seen at its next stage.

use std::collections::HashSet;
use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};
use troupe_actors::events::NodeEvent;
use troupe_actors::node::Node;
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{Address, AgentEvent};
use troupe_runtime::store::mailbox;

use super::Watch;

/// How often the run looks again with no event: a safety net for a report
/// whose routing failed or events the bus dropped under load.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Who sends delegation reports (`troupe_actors::delegation`).
const REPORTS_FROM: &str = "delegation";

/// What was waiting on the conversation before the run's turn: delegations
/// and reports a node left earlier (`--no-wait`, a crash) that this run does
/// not resume, so it must not wait for them either.
#[derive(Debug, Default)]
pub(in crate::cli) struct Before {
    delegations: HashSet<String>,
    mail: HashSet<MsgId>,
}

impl Before {
    /// What waits on `conversation` now.
    pub(in crate::cli) async fn look(
        node: &Node,
        conversation: ConversationId,
    ) -> anyhow::Result<Self> {
        let delegations = running_delegations(node, conversation).await?;
        let mail = reports(node, conversation).await?.into_iter().collect();
        Ok(Self { delegations, mail })
    }
}

/// What the run's conversation still has going on.
#[derive(Debug, Default, PartialEq)]
struct Pending {
    /// Subagents of its delegations still working.
    subagents: usize,
    /// Its delegations that have not reported.
    delegations: usize,
    /// Reports in its mailbox no turn has taken yet.
    reports: usize,
    /// Whether it has a turn running or queued.
    busy: bool,
}

impl Pending {
    fn settled(&self) -> bool {
        *self == Self::default()
    }
}

async fn running_delegations(
    node: &Node,
    conversation: ConversationId,
) -> anyhow::Result<HashSet<String>> {
    let parent = conversation.to_string();
    let ids = node
        .store()
        .read(move |c| {
            let mut statement = c.prepare(
                "SELECT id FROM delegations WHERE parent_conversation = ?1 AND status = 'running'",
            )?;
            let ids = statement
                .query_map([&parent], |row| row.get::<_, String>(0))?
                .collect::<Result<HashSet<_>, _>>()?;
            Ok(ids)
        })
        .await?;
    Ok(ids)
}

async fn running_subagents(node: &Node, delegations: Vec<String>) -> anyhow::Result<usize> {
    let count = node
        .store()
        .read(move |c| {
            let mut statement = c.prepare(
                "SELECT COUNT(*) FROM subagents WHERE delegation_id = ?1 AND status = 'running'",
            )?;
            let mut total = 0;
            for id in &delegations {
                total += statement.query_row([id], |row| row.get::<_, i64>(0))?;
            }
            Ok(total)
        })
        .await?;
    Ok(usize::try_from(count).unwrap_or_default())
}

/// The delegation reports waiting in the conversation's mailbox.
async fn reports(node: &Node, conversation: ConversationId) -> anyhow::Result<Vec<MsgId>> {
    let to = Address::Conversation(conversation);
    let pending = node
        .store()
        .read(move |c| mailbox::pending(c, &to, 1000))
        .await?;
    Ok(pending
        .into_iter()
        .filter(|e| matches!(&e.from, Address::Service(s) if s == REPORTS_FROM))
        .map(|e| e.id)
        .collect())
}

/// Looks at each stage in pipeline order (see the module docs).
async fn pending(
    node: &Node,
    conversation: ConversationId,
    before: &Before,
) -> anyhow::Result<Pending> {
    let delegations: Vec<String> = running_delegations(node, conversation)
        .await?
        .into_iter()
        .filter(|d| !before.delegations.contains(d))
        .collect();
    let n = delegations.len();
    let subagents = running_subagents(node, delegations).await?;
    let reports = reports(node, conversation)
        .await?
        .into_iter()
        .filter(|id| !before.mail.contains(id))
        .count();
    let status = node.status(conversation).await?;
    Ok(Pending {
        subagents,
        delegations: n,
        reports,
        busy: status.busy || status.queued > 0,
    })
}

/// Whether an event can move a delegation or its report along.
fn moves(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::TurnStarted { .. }
            | AgentEvent::TurnFinished { .. }
            | AgentEvent::Notice { .. }
            | AgentEvent::ActorStopped { .. }
    )
}

/// `--no-wait`: says what is left running, and for whom.
pub(super) async fn leave(watch: &Watch, before: &Before) -> anyhow::Result<()> {
    let now = pending(&watch.node, watch.conversation, before).await?;
    if now.subagents > 0 {
        eprintln!(
            "troupe: {} subagent(s) of this turn are still working; with --no-wait they are left \
             to the next `troupe serve` or `troupe chat` on this home, which resumes them and \
             delivers their report to {}.",
            now.subagents, watch.conversation
        );
    }
    Ok(())
}

/// Follows the conversation until its turn's delegations have reported and
/// the turns their reports started have finished, printing each answer.
/// Ctrl-C stops waiting (what is still working is left, as with `--no-wait`).
pub(super) async fn wait(
    watch: &mut Watch,
    tree: &mut broadcast::Receiver<NodeEvent>,
    before: &Before,
) -> anyhow::Result<()> {
    for event in std::mem::take(&mut watch.backlog) {
        if watch.follow(&event).await? && watch.unanswered.is_some() {
            return Ok(());
        }
    }
    let mut told = false;
    let mut look_again = tokio::time::interval(LOOK_AGAIN);
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    loop {
        let now = pending(&watch.node, watch.conversation, before).await?;
        if now.settled() {
            // A turn that ended before the look has its end on the bus
            // still: show it. Anything that moved since means another look.
            let mut moved = false;
            while let Ok(node_event) = tree.try_recv() {
                watch.on_bus(&node_event).await?;
                moved |= moves(&node_event.event);
            }
            if !moved || watch.unanswered.is_some() {
                return Ok(());
            }
            continue;
        }
        if !told && now.subagents > 0 {
            eprintln!(
                "troupe: waiting for {} subagent(s) of this turn and their report (Ctrl-C stops \
                 waiting; --no-wait does not wait)",
                now.subagents
            );
            told = true;
        }
        // Until something moves.
        loop {
            tokio::select! {
                received = tree.recv() => match received {
                    Ok(node_event) => {
                        if watch.on_bus(&node_event).await? && watch.unanswered.is_some() {
                            // Its turn was stopped for a question nobody can answer.
                            return Ok(());
                        }
                        if moves(&node_event.event) {
                            break;
                        }
                    }
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return Ok(()),
                },
                _ = look_again.tick() => break,
                _ = &mut interrupt => {
                    eprintln!(
                        "troupe: stopped waiting; what is still working is left to the next \
                         `troupe serve` or `troupe chat` on this home."
                    );
                    return Ok(());
                }
            }
        }
    }
}

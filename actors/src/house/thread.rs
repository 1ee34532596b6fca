//! A thread's actor: it takes every post into its thread, one at a time,
//! and runs the thread's director.
//!
//! A post arrives as a durable envelope. In ONE store transaction the
//! actor consumes it, appends the message, asks the [director](super::director)
//! who is offered a turn, and enqueues an [`Offer`] for each of those bots
//! into its conversation in the thread (made, with its stored opening, the
//! first time). Only after the commit are the offers handed over and the
//! thread's events published. A post handed over twice (after a crash, by
//! the post office) is applied once; an offer left unanswered by a crash
//! is delivered again at the next start, and the bot's answer — enqueued
//! in the transaction that closes its turn — comes back here as a post.
//!
//! The actor queues each post's transaction and goes on to the next post
//! without waiting for the commit: the store's writer runs its jobs in the
//! order they were queued, so posts are still applied one at a time and in
//! order, each seeing what the one before wrote, but the answers of three
//! bots arriving together land in one group commit instead of three in a
//! row. What follows a commit (the events, the offers handed over) is done
//! by the thread's [landing](landings) task, in the same order.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use troupe_runtime::house::Seat;
use troupe_runtime::id::{BotId, ConversationId, HouseId, MsgId, ThreadId};
use troupe_runtime::protocol::house::{MemberKind, Offer, Post, ThreadMessage};
use troupe_runtime::protocol::{ActorKind, Address, Envelope, Payload};
use troupe_runtime::rusqlite::Transaction;
use troupe_runtime::store::house::{self as table, SeatRow};
use troupe_runtime::store::{conversations, mailbox, Pending, StoreError};

use super::director;
use super::{ThreadEvent, ThreadMessageEvent};
use crate::messaging::LoopGuard;
use crate::node::{Node, WeakNode};

/// A thread actor's messages.
#[derive(Debug)]
pub enum ThreadMsg {
    /// A durable envelope for the thread (a [`Post`]).
    Deliver(Box<Envelope>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for ThreadMsg {}

/// The thread actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadActor;

/// What it keeps between posts.
pub struct ThreadState {
    node: WeakNode,
    id: ThreadId,
    house: HouseId,
    house_name: String,
    guard: Arc<LoopGuard>,
    /// The posts queued for the writer, to the landing task (which ends
    /// once this is dropped and what was queued has landed).
    landings: mpsc::UnboundedSender<Landing>,
}

impl Actor for ThreadActor {
    type Msg = ThreadMsg;
    type State = ThreadState;
    type Arguments = (WeakNode, Weak<super::Threads>, ThreadId);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (node, threads, id): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let now = node.upgrade().ok_or("the node is stopping")?;
        let (house, house_name) = now
            .store()
            .read(move |c| {
                let Some(thread) = table::thread(c, id)? else {
                    return Ok(None);
                };
                let house = table::house(c, thread.house)?;
                Ok(house.map(|h| (h.id, h.name)))
            })
            .await?
            .ok_or_else(|| format!("there is no thread {id}"))?;
        let s = now.settings();
        let (landings, queued) = mpsc::unbounded_channel();
        tokio::spawn(self::landings(node.clone(), threads, id, house, queued));
        Ok(ThreadState {
            node,
            id,
            house,
            house_name,
            guard: Arc::new(LoopGuard::new(
                s.loop_max_exchanges,
                s.loop_window,
                s.loop_cooldown,
            )),
            landings,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let ThreadMsg::Deliver(envelope) = msg;
        let Some(node) = state.node.upgrade() else {
            return Ok(());
        };
        take(&node, state, *envelope).await;
        Ok(())
    }
}

/// What applying one post did.
struct Applied {
    message: Option<ThreadMessage>,
    offers: Vec<Envelope>,
    round: MsgId,
    settled: bool,
    declined: Vec<(String, String)>,
    /// Who posted, and why their turn failed when it did.
    author: String,
    failed: Option<String>,
}

/// Queues the transaction that applies `envelope`, and hands its landing
/// to the landing task (see the module's doc).
async fn take(node: &Node, state: &mut ThreadState, envelope: Envelope) {
    let Payload::Post(post) = envelope.body.clone() else {
        tracing::warn!(thread = %state.id, id = %envelope.id, "a thread takes only posts; the message is dropped");
        let id = envelope.id;
        let _ = node.store().write(move |tx| mailbox::consume(tx, id)).await;
        return;
    };
    // The bots that may be offered a turn, as their conversations open.
    let bots = node.bot_kinds();
    let (thread, house) = (state.id, state.house);
    let house_name = state.house_name.clone();
    let guard = Arc::clone(&state.guard);
    let queued = node
        .store()
        .submit(move |tx| {
            apply(
                tx,
                &Target {
                    thread,
                    house,
                    house_name: &house_name,
                    bots: &bots,
                    guard: &guard,
                },
                &envelope,
                &post,
            )
        })
        .await;
    match queued {
        // The landing task outlives the actor until what was queued landed.
        Ok(pending) => {
            let _ = state.landings.send(Landing { pending });
        }
        Err(e) => {
            // Still in the mailbox: the post office hands it over again.
            tracing::error!(thread = %thread, error = %e, "a post could not be applied; it waits in the mailbox");
        }
    }
}

/// A post's transaction, queued for the writer.
struct Landing {
    pending: Pending<Option<Applied>>,
}

/// Waits for each queued post's commit, in the order they were queued,
/// then publishes what it did and hands its offers over. Ends when the
/// thread's actor is gone and every queued post has landed.
async fn landings(
    node: WeakNode,
    threads: Weak<super::Threads>,
    thread: ThreadId,
    house: HouseId,
    mut queued: mpsc::UnboundedReceiver<Landing>,
) {
    while let Some(landing) = queued.recv().await {
        let applied = match landing.pending.wait().await {
            Ok(Some(applied)) => applied,
            Ok(None) => continue,
            Err(e) => {
                // Still in the mailbox: the post office hands it over again.
                tracing::error!(thread = %thread, error = %e, "a post could not be applied; it waits in the mailbox");
                continue;
            }
        };
        // Committed: with the node or its threads gone, nobody watches any more.
        let (Some(node), Some(threads)) = (node.upgrade(), threads.upgrade()) else {
            continue;
        };
        land(&node, &threads, thread, house, applied).await;
    }
}

/// What follows a post's commit: the thread's events, and its offers
/// handed over (committed, so handing one over is only a wake-up).
async fn land(
    node: &Node,
    threads: &super::Threads,
    thread: ThreadId,
    house: HouseId,
    applied: Applied,
) {
    for (bot, reason) in applied.declined {
        tracing::debug!(thread = %thread, %bot, %reason, "not offered a turn");
        threads.publish(ThreadEvent::Held {
            thread,
            round: applied.round,
            bot,
            reason,
        });
    }
    if let Some(reason) = applied.failed {
        tracing::info!(thread = %thread, bot = %applied.author, %reason, "a bot's turn in a thread did not finish");
        threads.publish(ThreadEvent::TurnFailed {
            thread,
            round: applied.round,
            bot: applied.author,
            reason,
        });
    }
    if let Some(message) = applied.message {
        threads.publish(ThreadEvent::Posted(ThreadMessageEvent {
            house,
            thread,
            round: applied.round,
            message,
        }));
    }
    for offer in applied.offers {
        if let Payload::Offer(o) = &offer.body {
            threads.publish(ThreadEvent::Offered {
                thread,
                round: applied.round,
                bot: o.bot.clone(),
            });
        }
        if let Err(e) = node.route(offer).await {
            tracing::warn!(thread = %thread, error = %e, "an offer waits in the mailbox");
        }
    }
    if applied.settled {
        threads.publish(ThreadEvent::RoundSettled {
            thread,
            round: applied.round,
        });
    }
}

struct Target<'a> {
    thread: ThreadId,
    house: HouseId,
    house_name: &'a str,
    bots: &'a HashMap<String, (BotId, ActorKind)>,
    guard: &'a LoopGuard,
}

fn apply(
    tx: &Transaction<'_>,
    t: &Target<'_>,
    envelope: &Envelope,
    post: &Post,
) -> Result<Option<Applied>, StoreError> {
    if !mailbox::consume(tx, envelope.id)? {
        return Ok(None);
    }
    let Some(info) = table::thread(tx, t.thread)? else {
        return Ok(None);
    };
    let round = post.round.unwrap_or(envelope.id);
    // The round's (offered, answered), once read: kept up below rather
    // than read again.
    let mut state = None;
    if post.answers_offer {
        state = Some(table::round_answered(tx, round)?);
    }
    let text = post.text.trim();
    // An archived thread's round is over: a bot's answer still on its way
    // stays in the bot's conversation, not in the thread.
    let ended = info.archived && post.answers_offer;
    let message = if ended || (text.is_empty() && post.attachments.is_empty()) {
        None
    } else {
        table::append_message_with(
            tx,
            t.thread,
            envelope.id,
            (&post.author, post.author_kind),
            post.via,
            text,
            &post.attachments,
        )?
    };
    let mut offers = Vec::new();
    let mut declined = Vec::new();
    if let (Some(m), false) = (&message, info.archived) {
        // Read with each post: a change applies to the next message.
        let rules = super::rules_of(tx, t.house)?;
        let mut info = info;
        if post.author_kind == MemberKind::Human
            && !info
                .participants
                .iter()
                .any(|p| p.eq_ignore_ascii_case(&post.author))
            && table::add_participant(tx, t.thread, &post.author)?
        {
            // A person who speaks in a thread takes part in it.
            info.participants.push(post.author.clone());
        }
        // The director looks only at the thread's participants and the
        // handles the post mentions.
        let concerned: Vec<String> = info
            .participants
            .iter()
            .cloned()
            .chain(troupe_runtime::house::mentions(&post.text))
            .collect();
        let members = table::members_among(tx, t.house, &concerned)?;
        let (offered_before, answered) = match state {
            Some(state) => state,
            None => table::round_state(tx, round)?,
        };
        let decision = director::decide(
            post,
            &info.participants,
            &members,
            &rules,
            offered_before,
            t.guard,
        );
        for handle in &decision.joining {
            table::add_participant(tx, t.thread, handle)?;
        }
        declined = decision.declined;
        // Seats that saw the same message are shown the same messages since.
        let mut shown: Option<(i64, Vec<ThreadMessage>)> = None;
        for handle in decision.offered {
            let Some(&(bot, kind)) = t.bots.get(&handle.to_lowercase()) else {
                declined.push((handle, "no bot of this node has that name".into()));
                continue;
            };
            let seat = match table::seat(tx, t.thread, &handle)? {
                Some(seat) => seat,
                None => SeatRow {
                    conversation: open_seat(tx, t, &info, &handle, bot, kind)?,
                    seen_seq: 0,
                },
            };
            let since = match &shown {
                Some((seen, since)) if *seen == seat.seen_seq => since,
                _ => {
                    let since = table::messages_after(
                        tx,
                        t.thread,
                        seat.seen_seq,
                        rules.context_messages as usize,
                    )?;
                    &shown.insert((seat.seen_seq, since)).1
                }
            };
            let unseen: Vec<_> = since
                .iter()
                .filter(|x| !x.author.eq_ignore_ascii_case(&handle))
                .cloned()
                .collect();
            table::put_seat(
                tx,
                t.thread,
                &handle,
                SeatRow {
                    conversation: seat.conversation,
                    seen_seq: m.seq,
                },
            )?;
            let offer = Envelope {
                id: MsgId::new(),
                from: Address::Thread(t.thread),
                to: Address::Conversation(seat.conversation),
                body: Payload::Offer(Offer {
                    house: t.house,
                    thread: t.thread,
                    thread_name: info.name.clone(),
                    round,
                    depth: post.depth,
                    bot: handle,
                    messages: unseen,
                }),
                sent_at: chrono::Utc::now(),
            };
            mailbox::enqueue(tx, &offer)?;
            offers.push(offer);
        }
        table::round_offered(tx, round, t.thread, offers.len() as u32)?;
        state = Some((offered_before + offers.len() as u32, answered));
    } else if !post.answers_offer {
        table::round_offered(tx, round, t.thread, 0)?;
    }
    let (offered, answered) = match state {
        Some(state) => state,
        None => table::round_state(tx, round)?,
    };
    Ok(Some(Applied {
        message,
        offers,
        round,
        settled: answered >= offered,
        declined,
        author: post.author.clone(),
        failed: post.failed.clone(),
    }))
}

/// How a bot's conversation in a thread is listed (`troupe conversations`, `troupe ps`).
pub const SEAT_KIND: &str = "thread";

/// Makes `handle`'s conversation in the thread, with the opening that
/// seats it there, in the director's transaction.
fn open_seat(
    tx: &Transaction<'_>,
    t: &Target<'_>,
    info: &troupe_runtime::protocol::house::ThreadInfo,
    handle: &str,
    bot: BotId,
    kind: ActorKind,
) -> Result<ConversationId, StoreError> {
    let id = ConversationId::new();
    // Stored as `thread`: never taken for the bot's own conversation.
    let mut row = conversations::NewConversation::new(id, bot, SEAT_KIND);
    row.title = format!("{} · {}", t.house_name, info.label())
        .chars()
        .take(80)
        .collect();
    conversations::create_conversation(tx, &row)?;
    let stored = crate::node::opening::StoredOpening {
        kind,
        parent: None,
        only: None,
        ceiling: None,
        budget: None,
        briefing: super::briefing(t.house_name, &info.label(), handle),
        label: None,
        transient: false,
        in_memory_only: false,
        seat: Some(Seat {
            house: t.house,
            thread: t.thread,
        }),
        house: None,
    };
    crate::node::opening::save(tx, id, &stored)?;
    Ok(id)
}

/// Starts the thread actor for `id` under `supervisor`.
pub(super) async fn spawn(
    node: WeakNode,
    threads: Weak<super::Threads>,
    id: ThreadId,
    supervisor: ractor::ActorCell,
) -> Result<ActorRef<ThreadMsg>, ActorProcessingErr> {
    let (actor, _) =
        Actor::spawn_linked(None, ThreadActor, (node, threads, id), supervisor).await?;
    Ok(actor)
}

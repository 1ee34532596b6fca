//! The answer a turn sends back for what it answered: a `message_agent`
//! reply, or a bot's post on a thread's offer. Built from the envelope and
//! the turn's end alone (no node), so the turn loop enqueues it in the
//! commit that closes the turn.

use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload, TurnOutcome};

/// The reply to `answered` — a delivered message that expects one — from
/// `bot`'s conversation `from`, whose turn on it ended with `outcome` and
/// `text`; `None` when the message expects no reply. The turn that answers
/// enqueues it in the same commit that closes it, so the sender hears
/// exactly once, even when the turn was resumed after a crash.
pub fn reply(
    answered: &Envelope,
    from: troupe_runtime::id::ConversationId,
    bot: &str,
    outcome: &TurnOutcome,
    text: &str,
) -> Option<Envelope> {
    if let Payload::Offer(offer) = &answered.body {
        return Some(thread_answer(offer, from, outcome, text));
    }
    let Payload::Text {
        expects_reply: true,
        ..
    } = &answered.body
    else {
        return None;
    };
    // A registered actor that messaged a bot hears back like a conversation.
    let sender = match &answered.from {
        Address::Conversation(_) | Address::Actor { .. } => answered.from.clone(),
        Address::Bot(_) | Address::Service(_) | Address::Thread(_) => return None,
    };
    let text = match outcome {
        TurnOutcome::Finished => format!("`{bot}` replied:\n{text}"),
        other => format!(
            "`{bot}` could not answer your message ({}).{}",
            describe(other),
            if text.is_empty() {
                String::new()
            } else {
                format!(" What it said:\n{text}")
            }
        ),
    };
    Some(Envelope {
        id: MsgId::new(),
        from: Address::Conversation(from),
        to: sender,
        body: Payload::Notice {
            topic: "reply".into(),
            text,
            data: serde_json::json!({"from": bot, "in_reply_to": answered.id.to_string()}),
        },
        sent_at: chrono::Utc::now(),
    })
}

/// The post a bot's turn on a thread's offer sends back to the thread:
/// its answer, or nothing and why its turn did not finish (the offer is
/// settled either way; the thread tells who waits on the round).
fn thread_answer(
    offer: &troupe_runtime::protocol::house::Offer,
    from: troupe_runtime::id::ConversationId,
    outcome: &TurnOutcome,
    text: &str,
) -> Envelope {
    let (text, failed) = match outcome {
        TurnOutcome::Finished => (text.trim().to_string(), None),
        other => (String::new(), Some(describe(other))),
    };
    Envelope {
        id: MsgId::new(),
        from: Address::Conversation(from),
        to: Address::Thread(offer.thread),
        body: Payload::Post(troupe_runtime::protocol::house::Post {
            author: offer.bot.clone(),
            author_kind: troupe_runtime::protocol::house::MemberKind::Bot,
            text,
            round: Some(offer.round),
            depth: offer.depth + 1,
            via: None,
            answers_offer: true,
            failed,
            attachments: Vec::new(),
        }),
        sent_at: chrono::Utc::now(),
    }
}

/// A turn's end, in words.
pub fn describe(outcome: &TurnOutcome) -> String {
    match outcome {
        TurnOutcome::Finished => "finished".into(),
        TurnOutcome::Stopped => "it was stopped".into(),
        TurnOutcome::Guard { reason } => format!("halted by a guard: {reason}"),
        TurnOutcome::Budget { budget, detail } => {
            format!("the `{budget}` budget ran out: {detail}")
        }
        TurnOutcome::Refused { detail } => format!("the model refused: {detail}"),
        TurnOutcome::Crashed { error, .. } => format!("it crashed: {error}"),
        TurnOutcome::Failed { error } => format!("it failed: {error}"),
    }
}

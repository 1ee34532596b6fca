//! A caller waiting on a conversation is answered however the node's event
//! bus fares: the answer to a conversation its router gave up on travels
//! on the router's lossless watch, never on the bus that onlookers read
//! (and may fall behind on).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::TryRecvError;
use troupe::runtime::home::MAIN_AGENT;
use troupe::runtime::id::ConversationId;
use troupe::runtime::model::{Fault, Turn};
use troupe::{AgentEvent, NodeEvent, TurnOutcome};

use super::support::*;

/// The conversation crashes past its restart limit while a flood of
/// events overflows a one-event bus that an onlooker never reads: the
/// caller still gets `Crashed`, and the next message starts afresh.
#[tokio::test]
async fn a_waiter_on_a_conversation_given_up_is_answered_while_the_event_bus_floods() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::fault(Fault::Panic),
        Turn::fault(Fault::Panic),
        Turn::fault(Fault::Panic),
        Turn::fault(Fault::Panic),
        Turn::text("a fresh start"),
    ]);
    let (bus, mut onlooker) = tokio::sync::broadcast::channel(1);
    let runtime = home
        .builder(model.clone())
        .event_bus(bus.clone())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot(MAIN_AGENT).await.unwrap();

    let flooding = Arc::new(AtomicBool::new(true));
    let flood = tokio::spawn({
        let (bus, flooding) = (bus.clone(), Arc::clone(&flooding));
        async move {
            let noise = ConversationId::new();
            let mut sent = 0_u64;
            while flooding.load(Ordering::Relaxed) {
                let event = AgentEvent::TextDelta {
                    text: format!("noise {sent}"),
                };
                let _ = bus.send(NodeEvent::of_conversation(noise, event));
                sent += 1;
                tokio::task::yield_now().await;
            }
            sent
        }
    });

    let report = tokio::time::timeout(Duration::from_secs(60), ask(&bot, "hello"))
        .await
        .expect("the caller of a conversation given up on was answered");
    flooding.store(false, Ordering::Relaxed);
    let sent = flood.await.unwrap();
    match &report.outcome {
        TurnOutcome::Crashed { error, restarts } => {
            assert_eq!(*restarts, 3);
            assert!(error.contains("restart limit of 3"), "{error}");
        }
        other => panic!("expected Crashed, got {other:?}"),
    }
    assert_eq!(model.calls(), 4);
    // The bus did overflow meanwhile: its onlooker lagged.
    assert!(sent > 1, "the flood sent {sent} events");
    assert!(matches!(onlooker.try_recv(), Err(TryRecvError::Lagged(_))));

    let report = tokio::time::timeout(Duration::from_secs(60), ask(&bot, "again"))
        .await
        .expect("the next message was answered");
    assert_eq!(report.outcome, TurnOutcome::Finished);
    assert_eq!(report.text, "a fresh start");
    runtime.shutdown().await;
}

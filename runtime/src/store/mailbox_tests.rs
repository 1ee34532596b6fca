use pretty_assertions::assert_eq;

use super::*;
use crate::id::{BotId, ConversationId};
use crate::protocol::{Message, Payload};
use crate::store::conversations::{self, NewConversation};

fn temp_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    (dir, path)
}

fn text_to(to: &Address, text: &str) -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Service("test".into()),
        to: to.clone(),
        body: Payload::Text {
            sender: "bot:scout".into(),
            text: text.into(),
            expects_reply: false,
        },
        sent_at: chrono::Utc::now(),
    }
}

fn body_text(envelope: &Envelope) -> String {
    match &envelope.body {
        Payload::Text { text, .. } | Payload::Notice { text, .. } => text.clone(),
        Payload::Post(post) => post.text.clone(),
        Payload::Offer(offer) => offer.render(),
        Payload::Custom { name, .. } => name.clone(),
    }
}

/// What a receiver does with a delivered message: consume it and append it
/// to its conversation in one transaction. False for a redelivery.
fn apply(
    tx: &Transaction<'_>,
    envelope: &Envelope,
    conv: ConversationId,
) -> Result<bool, StoreError> {
    if !consume(tx, envelope.id)? {
        return Ok(false);
    }
    let message = Message::user(body_text(envelope));
    conversations::append_message_with_id(tx, envelope.id, conv, &message)?;
    Ok(true)
}

async fn apply_in_job(store: &Store, envelope: Envelope, conv: ConversationId) -> bool {
    store
        .write(move |tx| apply(tx, &envelope, conv))
        .await
        .unwrap()
}

async fn history(store: &Store, conv: ConversationId) -> Vec<(MsgId, String)> {
    store
        .read(move |conn| conversations::load_messages(conn, conv))
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m.message.text().to_string()))
        .collect()
}

async fn open_with_conversation(path: &std::path::Path) -> (Store, ConversationId) {
    let store = Store::open(path).unwrap();
    let conv = ConversationId::new();
    store
        .write(move |tx| {
            let new = NewConversation::new(conv, BotId::new(), "main");
            conversations::create_conversation(tx, &new)
        })
        .await
        .unwrap();
    (store, conv)
}

#[tokio::test]
async fn sending_the_same_id_twice_stores_it_once() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let to = Address::Bot(BotId::new());
    let envelope = text_to(&to, "once");
    let id = store.send(envelope.clone()).await.unwrap();
    assert_eq!(store.send(envelope.clone()).await.unwrap(), id);
    let pending = store
        .read(move |conn| pending(conn, &to, 10))
        .await
        .unwrap();
    assert_eq!(pending, [envelope]);
}

#[tokio::test]
async fn pending_is_per_recipient_in_send_order() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let a = Address::Conversation(ConversationId::new());
    let b = Address::Service("scheduler".into());
    let mut sent_a = Vec::new();
    for i in 0..5 {
        let to_a = text_to(&a, &format!("a{i}"));
        sent_a.push(to_a.clone());
        store.send(to_a).await.unwrap();
        store.send(text_to(&b, &format!("b{i}"))).await.unwrap();
    }
    let (first_three, all_a, all) = {
        let a = a.clone();
        store
            .read(move |conn| {
                Ok((
                    pending(conn, &a, 3)?,
                    pending(conn, &a, 100)?,
                    pending_all(conn)?,
                ))
            })
            .await
            .unwrap()
    };
    assert_eq!(first_three, sent_a[..3]);
    assert_eq!(all_a, sent_a);
    let order: Vec<String> = all.iter().map(body_text).collect();
    assert_eq!(
        order,
        ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"]
    );
}

#[tokio::test]
async fn consuming_twice_is_refused_the_second_time() {
    let (_dir, path) = temp_db();
    let (store, conv) = open_with_conversation(&path).await;
    let to = Address::Conversation(conv);
    let envelope = text_to(&to, "hello");
    store.send(envelope.clone()).await.unwrap();
    assert!(apply_in_job(&store, envelope.clone(), conv).await);
    assert!(!apply_in_job(&store, envelope.clone(), conv).await);
    assert_eq!(
        history(&store, conv).await,
        [(envelope.id, "hello".to_string())]
    );
    let unknown = MsgId::new();
    assert!(!store.write(move |tx| consume(tx, unknown)).await.unwrap());
    assert_eq!(store.read(pending_all).await.unwrap(), []);
}

#[tokio::test]
async fn a_failed_apply_leaves_the_message_pending() {
    let (_dir, path) = temp_db();
    let (store, conv) = open_with_conversation(&path).await;
    let envelope = text_to(&Address::Conversation(conv), "retry me");
    store.send(envelope.clone()).await.unwrap();
    let err = {
        let envelope = envelope.clone();
        store
            .write(move |tx| -> Result<(), StoreError> {
                apply(tx, &envelope, conv)?;
                Err(StoreError::Invalid("the turn failed after applying".into()))
            })
            .await
            .unwrap_err()
    };
    assert_eq!(err.to_string(), "the turn failed after applying");
    assert_eq!(
        store.read(pending_all).await.unwrap(),
        std::slice::from_ref(&envelope)
    );
    assert_eq!(history(&store, conv).await, []);
    assert!(apply_in_job(&store, envelope, conv).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_every_acknowledged_message_is_applied_exactly_once() {
    let (_dir, path) = temp_db();
    let (store, conv) = open_with_conversation(&path).await;
    let to = Address::Conversation(conv);

    // Sent concurrently: every acknowledged send must survive.
    let sends: Vec<_> = (0..40)
        .map(|i| {
            let (store, envelope) = (store.clone(), text_to(&to, &format!("m{i}")));
            tokio::spawn(async move { store.send(envelope).await.unwrap() })
        })
        .collect();
    let mut acknowledged = Vec::new();
    for send in sends {
        acknowledged.push(send.await.unwrap());
    }
    let sent = store.read(pending_all).await.unwrap();
    assert_eq!(sent.len(), 40);

    // The receiver applies the first 15, then the process "crashes": the
    // handle is leaked, nothing is shut down.
    for envelope in &sent[..15] {
        assert!(apply_in_job(&store, envelope.clone(), conv).await);
    }
    std::mem::forget(store);

    let store = Store::open(&path).unwrap();
    let redelivered = store.read(pending_all).await.unwrap();
    assert_eq!(
        redelivered,
        sent[15..],
        "exactly the unapplied ones are pending"
    );
    // Start-up redelivers everything pending; an old duplicate delivery of
    // an applied message comes in too and must be a no-op.
    for envelope in redelivered {
        assert!(apply_in_job(&store, envelope, conv).await);
    }
    assert!(!apply_in_job(&store, sent[3].clone(), conv).await);

    assert_eq!(store.read(pending_all).await.unwrap(), []);
    let expected: Vec<(MsgId, String)> = sent.iter().map(|e| (e.id, body_text(e))).collect();
    assert_eq!(history(&store, conv).await, expected);
    let mut applied: Vec<MsgId> = expected.iter().map(|(id, _)| *id).collect();
    applied.sort();
    acknowledged.sort();
    assert_eq!(applied, acknowledged);
}

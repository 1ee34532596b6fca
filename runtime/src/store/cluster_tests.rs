use pretty_assertions::assert_eq;

use super::*;
use crate::id::ConversationId;
use crate::protocol::{Address, Payload};
use crate::store::Store;

fn envelope() -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Conversation(ConversationId::new()),
        to: Address::Bot(BotId::new()),
        body: Payload::Text {
            sender: "alice".into(),
            text: "hello".into(),
            expects_reply: true,
        },
        sent_at: chrono::Utc::now(),
    }
}

#[tokio::test]
async fn a_forwarded_message_leaves_the_mailbox_for_the_outbox_until_acked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let sent = envelope();
    store.send(sent.clone()).await.unwrap();
    let e = sent.clone();
    let moved = store.write(move |tx| forward(tx, &e, "b")).await.unwrap();
    assert!(moved);
    let e = sent.clone();
    let again = store.write(move |tx| forward(tx, &e, "b")).await.unwrap();
    assert!(!again, "moved once");
    assert_eq!(store.read(mailbox::pending_all).await.unwrap(), vec![]);
    let waiting = store.read(|c| outbox(c, "b", 10)).await.unwrap();
    assert_eq!(waiting, vec![sent.clone()]);
    assert_eq!(
        store.read(outbox_peers).await.unwrap(),
        vec![("b".to_string(), 1)]
    );
    let (id, other) = (sent.id, envelope().id);
    assert_eq!(
        store.read(move |c| unacked(c, &[id, other])).await.unwrap(),
        vec![id]
    );
    store.write(move |tx| acked(tx, &[id])).await.unwrap();
    assert_eq!(store.read(|c| outbox(c, "b", 10)).await.unwrap(), vec![]);
    assert_eq!(
        store.read(move |c| unacked(c, &[id])).await.unwrap(),
        vec![]
    );
}

#[tokio::test]
async fn a_message_received_twice_is_committed_once_and_its_sender_routed_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let got = envelope();
    let e = got.clone();
    assert!(store.write(move |tx| receive(tx, &e, "a")).await.unwrap());
    // Consumed (applied), then purged: a retry is still recognised.
    let id = got.id;
    store
        .write(move |tx| mailbox::consume(tx, id))
        .await
        .unwrap();
    store
        .write(|tx| mailbox::purge_consumed(tx, "9999"))
        .await
        .unwrap();
    let e = got.clone();
    assert!(!store.write(move |tx| receive(tx, &e, "a")).await.unwrap());
    assert_eq!(store.read(mailbox::pending_all).await.unwrap(), vec![]);
    assert!(store.read(move |c| was_received(c, id)).await.unwrap());
    assert_eq!(
        store.read(routes).await.unwrap(),
        vec![(got.from.to_string(), "a".to_string())]
    );
}

#[tokio::test]
async fn a_peers_houses_are_replaced_by_its_latest_word_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let house = |name: &str, node: &str| RemoteHouse {
        name: name.into(),
        id: HouseId::new(),
        node: node.into(),
    };
    let (acme, globex, initech) = (
        house("acme", "b"),
        house("globex", "b"),
        house("initech", "c"),
    );
    let both = vec![acme.clone(), globex.clone()];
    store
        .write(move |tx| {
            set_peer(tx, "b", "127.0.0.1:1", Some("http://127.0.0.1:2"))?;
            set_houses(tx, "b", &both)
        })
        .await
        .unwrap();
    let one = initech.clone();
    store.write(move |tx| add_house(tx, &one)).await.unwrap();
    assert_eq!(
        store.read(houses).await.unwrap(),
        vec![acme.clone(), globex.clone(), initech.clone()]
    );
    // `globex` deleted on b: its next word has only `acme`.
    let left = vec![acme.clone()];
    store
        .write(move |tx| set_houses(tx, "b", &left))
        .await
        .unwrap();
    assert_eq!(store.read(houses).await.unwrap(), vec![acme, initech]);
    assert_eq!(
        store.read(peers).await.unwrap(),
        vec![(
            "b".to_string(),
            "127.0.0.1:1".to_string(),
            Some("http://127.0.0.1:2".to_string())
        )]
    );
}

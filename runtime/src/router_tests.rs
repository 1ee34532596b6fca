//! The router with real ractor actors that keep their state in SQLite.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{broadcast, Semaphore};

use super::*;

const WAIT: Duration = Duration::from_secs(10);

fn open(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("open the test database")
}

fn create_accounts(path: &Path, ids: impl IntoIterator<Item = i64>) {
    let mut db = open(path);
    db.execute_batch("CREATE TABLE accounts(id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
        .expect("schema");
    let tx = db.transaction().expect("transaction");
    for id in ids {
        tx.execute("INSERT INTO accounts(id, value) VALUES (?1, 0)", [id])
            .expect("insert");
    }
    tx.commit().expect("commit");
}

enum AccountMsg {
    Add(i64, RpcReplyPort<i64>),
    Get(RpcReplyPort<i64>),
    Panic,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for AccountMsg {}

/// An account whose value lives in the store: loaded in `pre_start`,
/// written on every change.
struct Account;

/// One connection shared by the test's accounts (SQLite allows one writer).
type Db = Arc<parking_lot::Mutex<rusqlite::Connection>>;

struct AccountState {
    id: i64,
    db: Db,
    value: i64,
    stop_gate: Option<Arc<Semaphore>>,
}

impl Actor for Account {
    type Msg = AccountMsg;
    type State = AccountState;
    type Arguments = (i64, Db, Option<Arc<Semaphore>>);

    async fn pre_start(
        &self,
        _myself: ActorRef<AccountMsg>,
        (id, db, stop_gate): Self::Arguments,
    ) -> Result<AccountState, ActorProcessingErr> {
        let conn = db.clone();
        let value = tokio::task::spawn_blocking(move || {
            conn.lock()
                .query_row("SELECT value FROM accounts WHERE id = ?1", [id], |row| {
                    row.get::<_, i64>(0)
                })
        })
        .await??;
        Ok(AccountState {
            id,
            db,
            value,
            stop_gate,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AccountMsg>,
        state: &mut AccountState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(gate) = &state.stop_gate {
            gate.acquire().await?.forget();
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<AccountMsg>,
        message: AccountMsg,
        state: &mut AccountState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AccountMsg::Add(n, reply) => {
                state.value += n;
                let (db, id, value) = (state.db.clone(), state.id, state.value);
                tokio::task::spawn_blocking(move || {
                    db.lock()
                        .execute("UPDATE accounts SET value = ?2 WHERE id = ?1", [id, value])
                })
                .await??;
                let _ = reply.send(state.value);
            }
            AccountMsg::Get(reply) => {
                let _ = reply.send(state.value);
            }
            AccountMsg::Panic => panic!("account {} crashed", state.id),
        }
        Ok(())
    }
}

/// Activates accounts; each activation first takes a permit from `gate`, so
/// a test can hold a restart in flight.
struct Accounts {
    db: Db,
    gate: Arc<Semaphore>,
    /// Taken by each incarnation as it stops, so a test can hold a passivation.
    stop_gate: Option<Arc<Semaphore>>,
}

impl Accounts {
    fn new(path: &Path, gate: Arc<Semaphore>) -> Self {
        Self {
            db: Arc::new(parking_lot::Mutex::new(open(path))),
            gate,
            stop_gate: None,
        }
    }
}

#[async_trait::async_trait]
impl Activator<i64, AccountMsg> for Accounts {
    async fn activate(
        &self,
        key: i64,
        supervisor: ActorCell,
    ) -> Result<ActorRef<AccountMsg>, ActorProcessingErr> {
        self.gate.acquire().await?.forget();
        let (actor, _) = Actor::spawn_linked(
            None,
            Account,
            (key, self.db.clone(), self.stop_gate.clone()),
            supervisor,
        )
        .await?;
        Ok(actor)
    }
}

async fn next_event(events: &mut broadcast::Receiver<RouterEvent<i64>>) -> RouterEvent<i64> {
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Ok(event)) => event,
        Ok(Err(e)) => panic!("event channel: {e}"),
        Err(_) => panic!("no router event within {WAIT:?}"),
    }
}

async fn add(router: &Router<i64, AccountMsg>, key: i64, n: i64) -> i64 {
    router
        .call(key, |reply| AccountMsg::Add(n, reply), WAIT)
        .await
        .expect("the account answers")
}

#[tokio::test]
async fn panicking_actor_restarts_from_the_store_and_gets_messages_sent_during_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("accounts.db");
    create_accounts(&path, [7]);
    let gate = Arc::new(Semaphore::new(1));
    let config = RouterConfig {
        idle_after: None,
        ..RouterConfig::default()
    };
    let router = Router::start(Accounts::new(&path, gate.clone()), config)
        .await
        .expect("router starts");
    let mut events = router.subscribe();

    assert_eq!(add(&router, 7, 5).await, 5);
    assert_eq!(
        next_event(&mut events).await,
        RouterEvent::Activated {
            key: 7,
            restarted: false
        }
    );

    router.send(7, AccountMsg::Panic).expect("sent");
    assert_eq!(
        next_event(&mut events).await,
        RouterEvent::Exited {
            key: 7,
            reason: ExitReason::Failed("account 7 crashed".into())
        }
    );
    // The restart waits on the gate: this message must be buffered, not lost.
    assert!(!router.is_live(&7));
    let during = {
        let router = router.clone();
        tokio::spawn(async move { add(&router, 7, 10).await })
    };
    gate.add_permits(1);
    assert_eq!(
        during.await.expect("joins"),
        15,
        "state rebuilt from the store, then +10"
    );
    assert_eq!(
        next_event(&mut events).await,
        RouterEvent::Activated {
            key: 7,
            restarted: true
        }
    );
    router.stop().await;
}

#[tokio::test]
async fn only_messaged_ids_go_live_idle_ones_passivate_and_come_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("accounts.db");
    create_accounts(&path, 0..10_000);
    let config = RouterConfig {
        idle_after: Some(Duration::from_secs(1)),
        ..RouterConfig::default()
    };
    let router = Router::start(
        Accounts::new(&path, Arc::new(Semaphore::new(Semaphore::MAX_PERMITS))),
        config,
    )
    .await
    .expect("router starts");
    let mut events = router.subscribe();

    let messaged: BTreeSet<i64> = (0..10_000).step_by(200).collect();
    let replies = futures::future::join_all(messaged.iter().map(|&id| add(&router, id, 1))).await;
    assert_eq!(replies, vec![1; messaged.len()]);
    // Only messaged ids have a slot at all (some may already be passivating
    // on a slow machine, so this is a subset, not an equality).
    let live: BTreeSet<i64> = router.shared.slots.iter().map(|e| *e.key()).collect();
    assert!(
        live.is_subset(&messaged),
        "unmessaged ids went live: {live:?}"
    );

    let mut activated = BTreeSet::new();
    let mut passivated = BTreeSet::new();
    while passivated.len() < messaged.len() {
        match next_event(&mut events).await {
            RouterEvent::Activated {
                key,
                restarted: false,
            } => {
                activated.insert(key);
            }
            RouterEvent::Exited {
                reason: ExitReason::Shutdown,
                ..
            } => {}
            RouterEvent::Passivated { key } => {
                passivated.insert(key);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(activated, messaged);
    assert_eq!(passivated, messaged);
    assert_eq!(router.live_count(), 0);

    // A passivated id comes back with its state from the store.
    let value = router
        .call(200, AccountMsg::Get, WAIT)
        .await
        .expect("answers");
    assert_eq!(value, 1);
    assert_eq!(
        next_event(&mut events).await,
        RouterEvent::Activated {
            key: 200,
            restarted: false
        }
    );
    assert_eq!(router.live_count(), 1);
    router.stop().await;
}

#[tokio::test]
async fn restarts_past_the_intensity_give_up_on_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("accounts.db");
    create_accounts(&path, [1]);
    let config = RouterConfig {
        idle_after: None,
        intensity: crate::supervise::Intensity::new(1, Duration::from_secs(60)),
        ..RouterConfig::default()
    };
    let router = Router::start(
        Accounts::new(&path, Arc::new(Semaphore::new(Semaphore::MAX_PERMITS))),
        config,
    )
    .await
    .expect("router starts");
    let mut events = router.subscribe();
    let crashed = ExitReason::Failed("account 1 crashed".into());
    router.send(1, AccountMsg::Panic).expect("sent");
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next_event(&mut events).await);
    }
    assert_eq!(
        seen,
        vec![
            RouterEvent::Activated {
                key: 1,
                restarted: false
            },
            RouterEvent::Exited {
                key: 1,
                reason: crashed.clone()
            },
            RouterEvent::Activated {
                key: 1,
                restarted: true
            },
        ]
    );
    router.send(1, AccountMsg::Panic).expect("sent");
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(next_event(&mut events).await);
    }
    assert_eq!(
        seen,
        vec![
            RouterEvent::Exited {
                key: 1,
                reason: crashed.clone()
            },
            RouterEvent::GaveUp {
                key: 1,
                reason: crashed,
                dropped: 0
            },
        ]
    );
    assert_eq!(router.live_count(), 0);
    // The next message starts afresh.
    assert_eq!(router.call(1, AccountMsg::Get, WAIT).await, Ok(0));
    router.stop().await;
}

/// The watch a node acts on (a waiter to answer, a control group to
/// empty) misses nothing, however far behind it is: here a flood of
/// activations overflows a one-event broadcast, and the watch still gets
/// every event, the give-up last.
#[tokio::test]
async fn a_lagging_watch_still_sees_the_give_up_after_a_flood() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("accounts.db");
    create_accounts(&path, 0..200);
    let config = RouterConfig {
        idle_after: None,
        intensity: crate::supervise::Intensity::new(0, Duration::from_secs(60)),
        events: 1,
        ..RouterConfig::default()
    };
    let router = Router::start(
        Accounts::new(&path, Arc::new(Semaphore::new(Semaphore::MAX_PERMITS))),
        config,
    )
    .await
    .expect("router starts");
    let mut onlooker = router.subscribe();
    let mut watch = router.watch();
    for key in 1..200 {
        add(&router, key, 1).await;
    }
    router.send(0, AccountMsg::Panic).expect("sent");
    let crashed = ExitReason::Failed("account 0 crashed".into());
    let mut seen = Vec::new();
    while !matches!(seen.last(), Some(RouterEvent::GaveUp { .. })) {
        match tokio::time::timeout(WAIT, watch.recv()).await {
            Ok(Some(event)) => seen.push(event),
            other => panic!("the watch ended or stalled: {other:?}"),
        }
    }
    // 199 activations, then account 0's activation, exit and give-up.
    assert_eq!(seen.len(), 202);
    assert_eq!(
        seen[199..],
        [
            RouterEvent::Activated {
                key: 0,
                restarted: false
            },
            RouterEvent::Exited {
                key: 0,
                reason: crashed.clone()
            },
            RouterEvent::GaveUp {
                key: 0,
                reason: crashed,
                dropped: 0
            },
        ]
    );
    // The broadcast onlooker lagged meanwhile.
    assert!(matches!(
        onlooker.try_recv(),
        Err(broadcast::error::TryRecvError::Lagged(_))
    ));
    router.stop().await;
}

#[tokio::test]
async fn message_sent_while_passivating_reaches_the_next_incarnation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("accounts.db");
    create_accounts(&path, [3]);
    let stop_gate = Arc::new(Semaphore::new(0));
    let accounts = Accounts {
        stop_gate: Some(stop_gate.clone()),
        ..Accounts::new(&path, Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)))
    };
    let config = RouterConfig {
        idle_after: Some(Duration::from_millis(100)),
        ..RouterConfig::default()
    };
    let router = Router::start(accounts, config)
        .await
        .expect("router starts");
    let mut events = router.subscribe();
    assert_eq!(add(&router, 3, 1).await, 1);
    // Wait (bounded) for the idle sweep to take the key off the live path;
    // its actor is now stuck in post_stop until the gate opens.
    tokio::time::timeout(WAIT, async {
        while router.is_live(&3) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the key is passivated");
    let during = {
        let router = router.clone();
        tokio::spawn(async move { add(&router, 3, 10).await })
    };
    stop_gate.add_permits(1);
    assert_eq!(during.await.expect("joins"), 11);
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(next_event(&mut events).await);
    }
    assert_eq!(
        seen,
        vec![
            RouterEvent::Activated {
                key: 3,
                restarted: false
            },
            RouterEvent::Exited {
                key: 3,
                reason: ExitReason::Shutdown
            },
            RouterEvent::Passivated { key: 3 },
            RouterEvent::Activated {
                key: 3,
                restarted: false
            },
        ]
    );
    stop_gate.add_permits(1);
    router.stop().await;
}

#[tokio::test]
async fn a_first_message_activates_in_the_senders_task_and_an_idle_actor_passivates_on_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("accounts.db");
    create_accounts(&path, [3]);
    let gate = Arc::new(Semaphore::new(usize::MAX >> 4));
    let config = RouterConfig {
        idle_after: None,
        ..RouterConfig::default()
    };
    let router = Router::start(Accounts::new(&path, gate), config)
        .await
        .expect("router starts");
    let mut events = router.subscribe();

    // Live as soon as the send returns: no wait on the router's mailbox.
    let (tx, rx) = ractor::concurrency::oneshot();
    router
        .send_activating(3, AccountMsg::Add(4, tx.into()))
        .await
        .expect("sent");
    assert!(router.is_live(&3));
    assert_eq!(rx.await.expect("answered"), 4);
    assert_eq!(
        next_event(&mut events).await,
        RouterEvent::Activated {
            key: 3,
            restarted: false
        }
    );

    // Only the live incarnation may ask to be passivated.
    let not_it = router.cell().get_id();
    assert!(!router.passivate(3, not_it).await.expect("answers"));
    let id = live_id(&router, 3).await;
    assert!(router.passivate(3, id).await.expect("answers"));
    loop {
        if let RouterEvent::Passivated { key: 3 } = next_event(&mut events).await {
            break;
        }
    }
    assert!(!router.is_live(&3));
    // Its state is in the store: the next message activates it from there.
    assert_eq!(add(&router, 3, 1).await, 5);
    router.stop().await;
}

/// The id of `key`'s live incarnation, as its supervisor (the router) sees it.
async fn live_id(router: &Router<i64, AccountMsg>, key: i64) -> ractor::ActorId {
    let children = router.cell().get_children();
    assert_eq!(children.len(), 1, "one live incarnation of {key}");
    children[0].get_id()
}

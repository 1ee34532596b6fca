//! Moving a house to another node (`troupe house move HOUSE NODE`;
//! docs/cluster.md, "Moving a house").
//!
//! The house's node drives the move, in steps each committed before the
//! next (the stores' side, and why no two nodes ever serve one house, is
//! `troupe_runtime::store::house_move`):
//!
//! 1. **Fence**: the house's fence becomes `moving` at a new epoch. From
//!    here this node does not serve it: requests for it wait ([`Moves`]'s
//!    hold; the server's middleware) and go on when the move ends — to the
//!    new node, or here again.
//! 2. **Drain**: the move waits until every round of the house's threads is
//!    answered and no message for them (or their bots' seats) waits.
//! 3. **Copy**: one snapshot of the house's rows and files, sent as
//!    `house_move_part` frames the target stages in its store.
//! 4. **Switch**: a `house_move_commit` frame; the target imports the house
//!    and fences it `owned` at the epoch in one transaction, then answers.
//! 5. **Finish**: this node deletes the house and fences it `moved` in one
//!    transaction, tells the peers its houses, and lets the waiting requests
//!    go — to the new node.
//!
//! A failure before the commit frame was sent rolls back here at once. A
//! failure after it, or a restart in the middle of a move, leaves the
//! house unserved until the target can be asked (`house_move_refuse`):
//! it answers whether it committed; if not, it refuses the epoch for
//! good, and this node serves the house again. Membership's tick asks, as
//! soon as the target is connected.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::watch;
use troupe_runtime::fault;
use troupe_runtime::house::DEFAULT_HOUSE;
use troupe_runtime::protocol::wire::{
    self, kind, Ack, Bytes, HostedHouse, HouseMoveCommit, HouseMoveDone, HouseMovePart,
    HouseMoveRefuse,
};
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_runtime::store::house_move::{self as table, Counts, Fence};
use troupe_runtime::store::mailbox;

mod target;

pub(crate) use target::{commit, part, refuse};

use super::houses::{announce, exchange, CALL_TIMEOUT};
use super::{Cluster, PlaceError, Shared};
use crate::node::NodeError;

/// How long a move waits for the house's rounds to end before it gives up.
const DRAIN: Duration = Duration::from_secs(30);
/// How often the drain looks again.
const DRAIN_LOOK: Duration = Duration::from_millis(10);

/// A move that ended.
#[derive(Debug, Clone)]
pub struct MoveReport {
    /// The house.
    pub house: HostedHouse,
    /// The node it left.
    pub from: String,
    /// The node it is on now.
    pub to: String,
    /// The move's epoch (its fencing token).
    pub epoch: i64,
    /// What moved.
    pub counts: Counts,
    /// How long the house was not served.
    pub took: Duration,
}

/// The moves this node takes part in, as its server asks of them.
#[derive(Default)]
pub(crate) struct Moves {
    /// Houses being moved from here, by lowercase name and by id: the
    /// target's name, and a flag set when the move ends.
    holding: DashMap<String, (String, watch::Receiver<bool>)>,
    /// The flags' senders, by house id.
    ends: DashMap<String, watch::Sender<bool>>,
    /// Moves whose outcome the target must tell, by house id.
    unresolved: DashMap<String, Fence>,
    /// Where houses moved from here went, by lowercase name and by id.
    moved: DashMap<String, String>,
    /// The threads of the houses being moved from here: each thread's id,
    /// its house's id. A post to one is committed and held ([`Moves::holds`]).
    threads: DashMap<String, String>,
    /// The posts held, by message id: their house's id.
    held: DashMap<String, String>,
    /// A resolution is running.
    resolving: std::sync::atomic::AtomicBool,
    /// Bumped each time a house leaves this node.
    departures: watch::Sender<u64>,
    /// Requests running here, counted by a stripe of the house their path
    /// names: bounded whatever names clients send (a move may wait for
    /// another house's request that shares a stripe: a moment).
    serving: Stripes,
}

/// Counters of requests running, by a hash of their house's name.
struct Stripes([AtomicUsize; STRIPES]);

const STRIPES: usize = 64;

impl Default for Stripes {
    fn default() -> Self {
        Stripes(std::array::from_fn(|_| AtomicUsize::new(0)))
    }
}

impl Stripes {
    fn of(key: &str) -> usize {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.to_lowercase().hash(&mut h);
        (h.finish() as usize) % STRIPES
    }
}

/// A request for a house, counted while it runs here ([`Cluster::serving`]):
/// a move waits for those that began before its fence.
pub struct Serving {
    shared: Arc<Shared>,
    stripe: usize,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("stripe", &self.stripe)
            .finish()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.shared.moves.serving.0[self.stripe].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Moves {
    /// Whether no request for the house of `fence` runs here.
    fn quiet(&self, fence: &Fence) -> bool {
        [fence.name.as_str(), fence.house_id.as_str()]
            .iter()
            .all(|k| self.serving.0[Stripes::of(k)].load(Ordering::SeqCst) == 0)
    }

    fn hold(&self, fence: &Fence, threads: Vec<String>) {
        for thread in threads {
            self.threads.insert(thread, fence.house_id.clone());
        }
        let (tx, rx) = watch::channel(false);
        for key in [fence.name.to_lowercase(), fence.house_id.clone()] {
            self.holding.insert(key, (fence.peer.clone(), rx.clone()));
        }
        self.ends.insert(fence.house_id.clone(), tx);
    }

    /// The move of `fence`'s house ended: to `to`, or not (`None`).
    fn release(&self, fence: &Fence, to: Option<&str>) {
        let keys = [fence.name.to_lowercase(), fence.house_id.clone()];
        for key in &keys {
            self.holding.remove(key);
            match to {
                Some(to) => self.moved.insert(key.clone(), to.to_string()),
                None => self.moved.remove(key).map(|(_, v)| v),
            };
        }
        self.unresolved.remove(&fence.house_id);
        self.threads.retain(|_, house| *house != fence.house_id);
        self.held.retain(|_, house| *house != fence.house_id);
        if let Some((_, end)) = self.ends.remove(&fence.house_id) {
            end.send_replace(true);
        }
        if to.is_some() {
            self.departures.send_modify(|n| *n += 1);
        }
    }

    /// Whether `envelope` is a post to a thread of a house being moved from
    /// here that starts something new (an answer to a round is not: the
    /// drain waits for those): it stays committed in the mailbox, and goes
    /// to the house's new node when the move ends, or to its thread here
    /// if the move is undone.
    pub(crate) fn holds(&self, envelope: &Envelope) -> bool {
        let Address::Thread(thread) = &envelope.to else {
            return false;
        };
        if matches!(&envelope.body, Payload::Post(p) if p.answers_offer) {
            return false;
        }
        let Some(house) = self.threads.get(&thread.to_string()).map(|h| h.clone()) else {
            return false;
        };
        self.held.insert(envelope.id.to_string(), house);
        true
    }

    /// The house came (back) to this node.
    fn arrived(&self, name: &str, id: &str) {
        for key in [name.to_lowercase(), id.to_string()] {
            self.moved.remove(&key);
        }
    }
}

/// What this node's store says of moves, at its start: the moves it was in
/// the middle of are held until their target tells how they ended.
pub(crate) async fn load(
    shared: &Shared,
    store: &troupe_runtime::store::Store,
) -> Result<(), troupe_runtime::store::StoreError> {
    for fence in store.read(table::moves).await? {
        if fence.state == "moving" {
            let id = fence.house_id.clone();
            let threads = store.read(move |c| table::thread_ids(c, &id)).await?;
            shared.moves.hold(&fence, threads);
            shared
                .moves
                .unresolved
                .insert(fence.house_id.clone(), fence);
        } else {
            for key in [fence.name.to_lowercase(), fence.house_id.clone()] {
                shared.moves.moved.insert(key, fence.peer.clone());
            }
        }
    }
    Ok(())
}

fn failed(node: &str, why: impl Into<String>) -> PlaceError {
    PlaceError::Failed {
        node: node.to_string(),
        why: why.into(),
    }
}

impl Cluster {
    /// When the house `name` (a name or an id) is being moved from this
    /// node: the node it goes to, and a flag that turns true when the move
    /// ends (either way).
    pub fn moving(&self, name: &str) -> Option<(String, watch::Receiver<bool>)> {
        let key = name.to_lowercase();
        let held = self.shared.moves.holding.get(&key)?;
        Some(held.value().clone())
    }

    /// Counts a request for the house `name` (a name or an id) as running
    /// here until the guard drops; refused, with the move to wait for,
    /// while the house is being moved from this node. Counted before the
    /// move is looked at, so a move either sees the request or the request
    /// sees the move.
    pub fn serving(&self, name: &str) -> Result<Serving, (String, watch::Receiver<bool>)> {
        let stripe = Stripes::of(name);
        self.shared.moves.serving.0[stripe].fetch_add(1, Ordering::SeqCst);
        let guard = Serving {
            shared: Arc::clone(&self.shared),
            stripe,
        };
        match self.moving(name) {
            Some(held) => Err(held),
            None => Ok(guard),
        }
    }

    /// Where the house `name` went, when it was moved from this node.
    pub fn moved_to(&self, name: &str) -> Option<String> {
        self.shared
            .moves
            .moved
            .get(&name.to_lowercase())
            .map(|n| n.clone())
    }

    /// Changes each time a house leaves this node (for streams of its
    /// threads here, which then close: [`Cluster::moved_to`] says where).
    pub fn departures(&self) -> watch::Receiver<u64> {
        self.shared.moves.departures.subscribe()
    }

    /// Moves the house `name`, which this node hosts, to the node `to`.
    pub async fn move_house(&self, name: &str, to: &str) -> Result<MoveReport, PlaceError> {
        let shared = &self.shared;
        let me = shared.options.node.clone();
        if name.eq_ignore_ascii_case(DEFAULT_HOUSE) {
            return Err(PlaceError::Refused(format!(
                "the house `{DEFAULT_HOUSE}` is every node's own; it does not move"
            )));
        }
        if to == me {
            return Err(PlaceError::Refused(format!(
                "house `{name}` is on node `{me}` already"
            )));
        }
        let node = shared
            .node()
            .ok_or_else(|| NodeError::Actor("the node is stopping".into()))?;
        let house = node.house(name).await?.house;
        self.peer_up(to)?;
        let (id, house_name, target) = (house.id.to_string(), house.name.clone(), to.to_string());
        let epoch = node
            .store()
            .write(move |tx| table::begin(tx, &id, &house_name, &target))
            .await
            .map_err(|e| PlaceError::Conflict(e.to_string()))?;
        let fence = Fence {
            house_id: house.id.to_string(),
            name: house.name.clone(),
            epoch,
            state: "moving".into(),
            peer: to.to_string(),
        };
        let id = fence.house_id.clone();
        let threads = node
            .store()
            .read(move |c| table::thread_ids(c, &id))
            .await
            .map_err(NodeError::from)?;
        shared.moves.hold(&fence, threads);
        let started = Instant::now();
        let hosted = HostedHouse {
            name: house.name.clone(),
            id: house.id,
        };
        let mut asked_to_commit = false;
        match copy(shared, &fence, &mut asked_to_commit).await {
            Ok(done) => {
                finish(shared, &fence).await.map_err(PlaceError::Node)?;
                Ok(MoveReport {
                    house: hosted,
                    from: me,
                    to: to.to_string(),
                    epoch,
                    counts: Counts {
                        threads: done.threads,
                        messages: done.messages,
                        files: done.files,
                        bytes: done.bytes,
                    },
                    took: started.elapsed(),
                })
            }
            Err(why) if !asked_to_commit => {
                roll_back(shared, &fence).await.map_err(PlaceError::Node)?;
                forget_parts(shared, &fence);
                Err(failed(to, format!("{why}; the house stays on node `{me}`")))
            }
            Err(why) => {
                // The target may have committed: it must say.
                shared
                    .moves
                    .unresolved
                    .insert(fence.house_id.clone(), fence.clone());
                match resolve(shared, &fence).await {
                    Ok(true) => Ok(MoveReport {
                        house: hosted,
                        from: me,
                        to: to.to_string(),
                        epoch,
                        counts: Counts::default(),
                        took: started.elapsed(),
                    }),
                    Ok(false) => Err(failed(
                        to,
                        format!("{why}; the move was undone, the house stays on node `{me}`"),
                    )),
                    Err(e) => Err(failed(
                        to,
                        format!(
                            "{why}; whether node `{to}` took the house is not known yet ({e}): \
                             it is not served until node `{to}` answers, which this node asks \
                             as soon as it is connected"
                        ),
                    )),
                }
            }
        }
    }
}

/// What [`copy`] learned from the target.
struct Copied {
    threads: u64,
    messages: u64,
    files: u64,
    bytes: u64,
}

/// Steps 2 to 4: drain, copy, ask the target to commit.
async fn copy(
    shared: &Arc<Shared>,
    fence: &Fence,
    asked_to_commit: &mut bool,
) -> Result<Copied, String> {
    let node = shared.node().ok_or("the node is stopping")?;
    let store = node.store().clone();
    let deadline = Instant::now() + DRAIN;
    loop {
        let id = fence.house_id.clone();
        let moves = Arc::clone(shared);
        // The requests that began before the fence end first (a post
        // answers once committed), then the rounds they started; posts
        // held since the fence wait for the end of the move.
        if shared.moves.quiet(fence)
            && !store
                .read(move |c| table::busy(c, &id, &|m| moves.moves.held.contains_key(m)))
                .await
                .map_err(|e| e.to_string())?
        {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the house's rounds did not end within {}s; try again when its bots are done",
                DRAIN.as_secs()
            ));
        }
        tokio::time::sleep(DRAIN_LOOK).await;
    }
    stop_environments(&node, fence).await?;
    let inbox = shared
        .inboxes
        .get(&fence.peer)
        .map(|r| r.clone())
        .ok_or_else(|| format!("node `{}` is not connected", fence.peer))?;
    // One snapshot, read on a reader thread part by part while the parts
    // go out: at most two wait between the two.
    let (parts_tx, mut parts_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(2);
    let id = fence.house_id.clone();
    let read = store.read(move |c| {
        table::export(c, &id, |part| {
            parts_tx.blocking_send(part).map_err(|_| {
                troupe_runtime::store::StoreError::Invalid("the move stopped sending".into())
            })
        })
    });
    let send = async {
        let mut seq = 0i64;
        while let Some(data) = parts_rx.recv().await {
            let part = HouseMovePart {
                house_id: fence.house_id.clone(),
                name: fence.name.clone(),
                epoch: fence.epoch,
                seq,
                data: Bytes(data),
            };
            let frame = wire::encode(kind::HOUSE_MOVE_PART, &fence.house_id, &part)
                .map_err(|e| e.to_string())?;
            let answer = exchange(&inbox, frame, CALL_TIMEOUT).await?;
            wire::decode::<Ack>(&answer, kind::ACK).map_err(|e| e.to_string())?;
            seq += 1;
        }
        Ok::<i64, String>(seq)
    };
    let (read, sent) = tokio::join!(read, send);
    // A failed send stops the read (its parts have nowhere to go): the
    // send's error is the one that says why.
    let parts = sent?;
    let counts = read.map_err(|e| e.to_string())?;
    fault::kill_point("house_move:copied");
    let ask = HouseMoveCommit {
        house_id: fence.house_id.clone(),
        name: fence.name.clone(),
        epoch: fence.epoch,
        from_node: shared.options.node.clone(),
        parts,
    };
    let frame =
        wire::encode(kind::HOUSE_MOVE_COMMIT, &fence.house_id, &ask).map_err(|e| e.to_string())?;
    *asked_to_commit = true;
    let answer = exchange(&inbox, frame, CALL_TIMEOUT).await?;
    let done = wire::decode::<HouseMoveDone>(&answer, kind::HOUSE_MOVE_DONE)
        .map_err(|e| e.to_string())?
        .body;
    if !done.committed {
        // It answered: it did not, and will not at this epoch (a refusal
        // fences what it staged, below).
        return Err(format!(
            "node `{}` did not take it: {}",
            fence.peer, done.message
        ));
    }
    fault::kill_point("house_move:committed_there");
    Ok(Copied {
        threads: done.threads,
        messages: done.messages,
        files: done.files,
        bytes: counts.bytes,
    })
}

/// The house's environments whose actors run here are stopped, their
/// processes killed, as when they idle: their records move (stopped), and
/// if the move is undone they start again on demand.
async fn stop_environments(node: &crate::node::Node, fence: &Fence) -> Result<(), String> {
    let environments = node.environments();
    let live = environments.live();
    if live.is_empty() {
        return Ok(());
    }
    let house: troupe_runtime::id::HouseId = fence.house_id.parse().map_err(|e| format!("{e}"))?;
    let ids = node
        .store()
        .read(move |c| troupe_runtime::store::environments::list(c, house, false, usize::MAX))
        .await
        .map_err(|e| e.to_string())?;
    let router = environments.router()?;
    for env in ids.into_iter().filter(|e| live.contains(&e.id)) {
        router
            .call(
                env.id,
                crate::environment::EnvironmentMsg::Stop,
                Duration::from_secs(30),
            )
            .await
            .map_err(|e| format!("environment {} did not stop: {e}", env.id))?;
    }
    Ok(())
}

/// Step 5: the house deleted here, the peers told, the waiting requests let go.
///
/// It runs to its end on a task of its own: the house is deleted here at
/// its first step, so a caller that gives up (a request timed out, a
/// client gone) must not leave the waiting requests held.
async fn finish(shared: &Arc<Shared>, fence: &Fence) -> Result<(), NodeError> {
    let (shared, fence) = (Arc::clone(shared), fence.clone());
    tokio::spawn(async move { finish_here(&shared, &fence).await })
        .await
        .map_err(|e| NodeError::Actor(format!("the move's finish failed: {e}")))?
}

async fn finish_here(shared: &Arc<Shared>, fence: &Fence) -> Result<(), NodeError> {
    let node = shared
        .node()
        .ok_or_else(|| NodeError::Actor("the node is stopping".into()))?;
    let (id, epoch) = (fence.house_id.clone(), fence.epoch);
    let finished = node
        .store()
        .write(move |tx| table::finish(tx, &id, epoch))
        .await?;
    let (threads, forwarded) = finished
        .map(|f| (f.threads, f.forwarded))
        .unwrap_or_default();
    for thread in &threads {
        shared.directory.route(thread.clone(), fence.peer.clone());
    }
    let mut acks = shared.acked.subscribe();
    if let Some(g) = shared.gateway(&fence.peer).await {
        let _ = g.cast(super::gateway::GatewayMsg::Flush);
    }
    // The posts held here land on the new node before the requests held
    // here are let go, so a later post cannot overtake them.
    if let Err(why) = super::gateway::acknowledged(shared, &node, &mut acks, forwarded).await {
        tracing::warn!(house = %fence.name, peer = %fence.peer, %why,
            "the posts held during a move were not acknowledged in time; later posts may land before them");
    }
    if let Ok(house_id) = fence.house_id.parse() {
        let hosted = HostedHouse {
            name: fence.name.clone(),
            id: house_id,
        };
        shared
            .directory
            .add_house(node.store(), &fence.peer, &hosted)
            .await?;
    }
    shared.moves.release(fence, Some(&fence.peer));
    // A post committed after the finish read the mailbox, and held before
    // the release, goes to the new node now (a send after the release
    // goes there by the threads' route).
    hand_over_held(&node, threads).await?;
    announce(shared);
    eprintln!(
        "troupe: cluster: house `{}` moved to node `{}` (epoch {})",
        fence.name, fence.peer, fence.epoch
    );
    Ok(())
}

/// The move did not happen: this node serves the house again.
async fn roll_back(shared: &Arc<Shared>, fence: &Fence) -> Result<(), NodeError> {
    let node = shared
        .node()
        .ok_or_else(|| NodeError::Actor("the node is stopping".into()))?;
    let (id, epoch) = (fence.house_id.clone(), fence.epoch);
    node.store()
        .write(move |tx| table::roll_back(tx, &id, epoch))
        .await?;
    let id = fence.house_id.clone();
    let threads = node
        .store()
        .read(move |c| table::thread_ids(c, &id))
        .await?;
    shared.moves.release(fence, None);
    eprintln!(
        "troupe: cluster: house `{}` was not moved to node `{}`; it is served here again",
        fence.name, fence.peer
    );
    // The posts held during the move go to their threads here.
    hand_over_held(&node, threads).await
}

/// Hands over what waits in the mailbox for `threads` (the posts held
/// while their house was being moved): to the threads here, or to the
/// house's new node, as the routing says now.
async fn hand_over_held(node: &crate::node::Node, threads: Vec<String>) -> Result<(), NodeError> {
    for thread in threads {
        let Ok(thread) = thread.parse() else { continue };
        let to = Address::Thread(thread);
        for envelope in node
            .store()
            .read(move |c| mailbox::pending(c, &to, usize::MAX))
            .await?
        {
            node.route(envelope).await?;
        }
    }
    Ok(())
}

/// Tells the target of a move undone before its switch to drop what it
/// staged (and never to take that epoch): best effort, off the caller's
/// task. A target that does not hear it keeps the parts until the house's
/// next move to it.
fn forget_parts(shared: &Arc<Shared>, fence: &Fence) {
    let (shared, fence) = (Arc::clone(shared), fence.clone());
    tokio::spawn(async move {
        let _ = ask_to_refuse(&shared, &fence).await;
    });
}

/// `house_move_refuse` to the target: whether it committed the move (if
/// not, it never will).
async fn ask_to_refuse(shared: &Shared, fence: &Fence) -> Result<HouseMoveDone, String> {
    let inbox = shared
        .inboxes
        .get(&fence.peer)
        .map(|r| r.clone())
        .ok_or_else(|| format!("node `{}` is not connected", fence.peer))?;
    let ask = HouseMoveRefuse {
        house_id: fence.house_id.clone(),
        name: fence.name.clone(),
        epoch: fence.epoch,
    };
    let frame =
        wire::encode(kind::HOUSE_MOVE_REFUSE, &fence.house_id, &ask).map_err(|e| e.to_string())?;
    let answer = exchange(&inbox, frame, CALL_TIMEOUT).await?;
    Ok(
        wire::decode::<HouseMoveDone>(&answer, kind::HOUSE_MOVE_DONE)
            .map_err(|e| e.to_string())?
            .body,
    )
}

/// Asks the target of an unresolved move how it ended, and ends it here
/// the same way: true if the house is the target's now.
async fn resolve(shared: &Arc<Shared>, fence: &Fence) -> Result<bool, String> {
    let done = ask_to_refuse(shared, fence).await?;
    if done.committed {
        finish(shared, fence).await.map_err(|e| e.to_string())?;
    } else {
        roll_back(shared, fence).await.map_err(|e| e.to_string())?;
    }
    Ok(done.committed)
}

/// Membership's tick: the unresolved moves whose target is connected are
/// asked how they ended (one resolution at a time, off the tick's task).
pub(crate) fn tick(shared: &Arc<Shared>) {
    use std::sync::atomic::Ordering;
    if shared.moves.unresolved.is_empty() || shared.moves.resolving.swap(true, Ordering::AcqRel) {
        return;
    }
    let ready: Vec<Fence> = shared
        .moves
        .unresolved
        .iter()
        .filter(|f| shared.inboxes.contains_key(&f.peer))
        .map(|f| f.value().clone())
        .collect();
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        for fence in ready {
            if let Err(e) = resolve(&shared, &fence).await {
                tracing::warn!(house = %fence.name, peer = %fence.peer, error = %e,
                    "a house move's end could not be learned yet");
            }
        }
        shared.moves.resolving.store(false, Ordering::Release);
    });
}

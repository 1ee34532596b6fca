//! Where a registered kind's actors keep their state: one row of the
//! store's `kv` table per actor (`actor:KIND/KEY`, its state's JSON), read
//! at activation with the durable messages that wait for it, written in
//! the commit that ends a message.

use troupe_runtime::protocol::{Address, Envelope};
use troupe_runtime::rusqlite::{Connection, Transaction};
use troupe_runtime::store::{kv, mailbox, StoreError};

/// The most waiting durable messages an activation hands its actor at
/// once; the post office hands over the rest.
const PENDING_AT_ACTIVATION: usize = 256;

/// The `kv` key of an actor's state.
pub(crate) fn state_key(address: &Address) -> String {
    address.to_string()
}

/// What an actor is activated with: its stored state (JSON) and the
/// durable messages that wait for it.
pub(crate) struct Stored {
    pub(crate) state: Option<String>,
    pub(crate) pending: Vec<Envelope>,
}

/// Reads `address`'s state and waiting messages, in one trip to a reader.
pub(crate) fn load(conn: &Connection, address: &Address) -> Result<Stored, StoreError> {
    let state = kv::get(conn, &state_key(address))?;
    let pending = mailbox::pending(conn, address, PENDING_AT_ACTIVATION)?;
    Ok(Stored { state, pending })
}

/// What one message's end commits, all or nothing.
#[derive(Default)]
pub(crate) struct Commit {
    /// The durable message consumed by it, if it was one.
    pub(crate) consumes: Option<troupe_runtime::id::MsgId>,
    /// The state to save (JSON), if it is saved.
    pub(crate) state: Option<String>,
    /// Durable messages the actor sent, its reply included.
    pub(crate) outbox: Vec<Envelope>,
}

impl Commit {
    /// Whether there is nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.consumes.is_none() && self.state.is_none() && self.outbox.is_empty()
    }
}

/// Applies `commit` for `address` in `tx`; `false` (and nothing written)
/// when the message it consumes was consumed already.
pub(crate) fn apply(
    tx: &Transaction<'_>,
    address: &Address,
    commit: &Commit,
) -> Result<bool, StoreError> {
    if let Some(id) = commit.consumes {
        if !mailbox::consume(tx, id)? {
            return Ok(false);
        }
    }
    if let Some(state) = &commit.state {
        kv::set(tx, &state_key(address), state)?;
    }
    for envelope in &commit.outbox {
        mailbox::enqueue(tx, envelope)?;
    }
    Ok(true)
}

//! The target's side of a move: the parts staged, the house taken at the
//! source's commit (its threads' routes away from here forgotten), a
//! refusal answered.

use std::sync::Arc;

use troupe_runtime::fault;
use troupe_runtime::protocol::wire::{
    Ack, HouseMoveCommit, HouseMoveDone, HouseMovePart, HouseMoveRefuse,
};
use troupe_runtime::store::house_move::{self as table, Committed, Counts};

use super::super::houses::announce;
use super::super::Shared;

/// The target's side of `house_move_part`: the piece staged.
pub(crate) async fn part(shared: &Shared, part: HouseMovePart) -> Result<Ack, String> {
    let node = shared.node().ok_or("the node is stopping; try again")?;
    let HouseMovePart {
        house_id,
        epoch,
        seq,
        data,
        ..
    } = part;
    let data = Arc::new(data.0);
    node.store()
        .write(move |tx| table::stage(tx, &house_id, epoch, seq, &data))
        .await
        .map_err(|e| e.to_string())?;
    Ok(Ack { first: true })
}

/// The target's side of `house_move_commit`: the house taken, committed
/// before the answer.
pub(crate) async fn commit(shared: &Arc<Shared>, ask: HouseMoveCommit) -> HouseMoveDone {
    let Some(node) = shared.node() else {
        return not_done("the node is stopping; try again".into());
    };
    let (id, name, from) = (
        ask.house_id.clone(),
        ask.name.clone(),
        ask.from_node.clone(),
    );
    let (epoch, parts) = (ask.epoch, ask.parts);
    let taken = node
        .store()
        .write(move |tx| table::commit(tx, &id, &name, epoch, &from, parts))
        .await;
    match taken {
        Ok(committed) => {
            fault::kill_point("house_move:committed");
            shared.moves.arrived(&ask.name, &ask.house_id);
            if let Err(e) = shared
                .directory
                .drop_house(node.store(), &ask.house_id)
                .await
            {
                tracing::warn!(error = %e, "a house moved here is still listed on its old node");
            }
            let id = ask.house_id.clone();
            // Its threads are this node's again, should they have left it.
            if let Ok(threads) = node.store().read(move |c| table::thread_ids(c, &id)).await {
                for thread in threads {
                    shared.directory.unroute(&thread);
                }
            }
            announce(shared);
            let counts = match committed {
                Committed::Now(c) => c,
                Committed::Already => Counts::default(),
            };
            eprintln!(
                "troupe: cluster: house `{}` moved here from node `{}` (epoch {})",
                ask.name, ask.from_node, ask.epoch
            );
            HouseMoveDone {
                committed: true,
                message: String::new(),
                threads: counts.threads,
                messages: counts.messages,
                files: counts.files,
            }
        }
        Err(e) => not_done(e.to_string()),
    }
}

/// The target's side of `house_move_refuse`; an error is not an answer
/// (the asking node asks again), as only a committed refusal fences.
pub(crate) async fn refuse(shared: &Shared, ask: HouseMoveRefuse) -> Result<HouseMoveDone, String> {
    let node = shared.node().ok_or("the node is stopping; try again")?;
    let HouseMoveRefuse {
        house_id,
        name,
        epoch,
    } = ask;
    match node
        .store()
        .write(move |tx| table::refuse(tx, &house_id, &name, epoch))
        .await
    {
        Ok(committed) => Ok(HouseMoveDone {
            committed,
            message: String::new(),
            threads: 0,
            messages: 0,
            files: 0,
        }),
        Err(e) => Err(e.to_string()),
    }
}

fn not_done(message: String) -> HouseMoveDone {
    HouseMoveDone {
        committed: false,
        message,
        threads: 0,
        messages: 0,
        files: 0,
    }
}

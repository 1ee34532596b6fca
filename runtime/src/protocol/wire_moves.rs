//! The frames that move a house from one node to another (since 1.3; see
//! `store::house_move` for what the two stores do with them).

use serde::{Deserialize, Serialize};

use super::Bytes;

/// A piece of a house's bundle, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseMovePart {
    /// The house's id.
    pub house_id: String,
    /// Its name.
    pub name: String,
    /// The move's epoch (its fencing token).
    pub epoch: i64,
    /// The piece's place, from 0.
    pub seq: i64,
    /// The piece.
    pub data: Bytes,
}

/// Every piece was sent: take the house.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseMoveCommit {
    /// The house's id.
    pub house_id: String,
    /// Its name.
    pub name: String,
    /// The move's epoch.
    pub epoch: i64,
    /// The node it comes from.
    pub from_node: String,
    /// How many pieces were sent.
    pub parts: i64,
}

/// Did you take the house at this epoch? If not, never take it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseMoveRefuse {
    /// The house's id.
    pub house_id: String,
    /// Its name.
    pub name: String,
    /// The move's epoch.
    pub epoch: i64,
}

/// The answer to a commit or a refusal: whether the receiving node holds
/// the house at that epoch, committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseMoveDone {
    /// Committed (now or before).
    pub committed: bool,
    /// Why not, when not.
    #[serde(default)]
    pub message: String,
    /// Its threads, messages and files, as the receiver counted them.
    #[serde(default)]
    pub threads: u64,
    /// Messages.
    #[serde(default)]
    pub messages: u64,
    /// Files.
    #[serde(default)]
    pub files: u64,
}

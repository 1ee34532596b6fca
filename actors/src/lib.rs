//! troupe-actors: the node, bots, conversations and their turn loop,
//! delegations and routines.

pub mod budget;
pub mod guard;
pub mod routine;

//! troupe-actors: the node, bots, conversations and their turn loop,
//! delegations and routines.
//!
//! The node ([`node::Node`]) is the root: it owns the store, the tools and
//! the gate, and addresses every conversation by id. A conversation
//! ([`conversation::Conversation`]) is an actor running one turn loop; its
//! steps run in tasks so it can be stopped, steered and asked for its status
//! mid-turn.

pub mod added_tools;
pub mod agents;
mod boot;
pub mod bot;
pub mod bot_edit;
pub mod budget;
pub mod channel;
pub mod cluster;
pub mod commands;

pub mod delegation;
pub mod environment;
pub mod events;
pub mod feed;
pub mod gate;
pub mod guard;
pub mod house;
pub mod intern;
pub mod kinds;
pub mod mcp;
pub mod messaging;
pub mod node;
pub use node::conversation;
pub mod post;
pub mod review;
pub mod routine;

#[cfg(test)]
mod fuzz;
pub mod settings;
pub mod toolset;

//! troupe-runtime: the foundation every other troupe crate builds on.
//!
//! It holds what every actor and tool shares and nothing that names a
//! particular tool or actor: typed ids, the wire protocol, supervision, the
//! router, the store, model providers, the tool trait and its dispatch, the
//! trust gate, the sandbox commands run in, configuration and the home on
//! disk. Dependencies point one way:
//! `troupe-runtime` ← `troupe-tools` ← `troupe-actors` ← `troupe`.

pub mod agents;
pub mod budget;
pub mod bus;
pub mod config;
pub(crate) mod diagnostic;
pub mod doorbell;
pub mod environment;
pub mod error;
pub mod executors;
pub mod fault;
pub mod hash;
pub mod home;
pub mod house;
pub mod id;
pub mod mcp;
pub mod model;
pub mod net;
pub mod protocol;
pub mod router;
pub mod sandbox;
pub mod store;
pub mod supervise;
pub mod telemetry;
pub mod tether;
pub mod timers;
pub mod tool;
pub mod trust;

#[cfg(test)]
mod fuzz;

pub use error::{Error, Result};
pub use home::Home;
pub use rusqlite;

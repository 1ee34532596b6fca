//! troupe: an actor-model runtime for LLM agents that work together.
//!
//! This crate is the front: the Rust API ([`Runtime`], [`Bot`], [`Turn`]),
//! the `troupe` command's CLI, and re-exports of the crates underneath:
//! [`runtime`] (ids, protocol, store, models, tools, trust, config),
//! [`tools`] (one file per tool) and [`actors`] (node, conversations, turn
//! loop).

mod api;
pub mod bench;
pub mod cli;
pub mod demo;
pub mod gate;
pub mod server;

pub use api::{settings_from, Bot, Runtime, RuntimeBuilder, RuntimeError, Turn};
pub use troupe_actors as actors;
pub use troupe_actors::bot::BotSpec;
pub use troupe_actors::conversation::TurnReport;
pub use troupe_actors::environment::EnvironmentsRef;
pub use troupe_actors::house::{HouseRef, Rules as HouseRules, ThreadEvent, ThreadRef};
pub use troupe_runtime as runtime;
pub use troupe_runtime::protocol::{AgentEvent, TurnOutcome};
pub use troupe_runtime::tool::{Tool, ToolContext, ToolSpec};
pub use troupe_tools as tools;

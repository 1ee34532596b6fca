//! troupe: an actor-model runtime for LLM agents that work together.
//!
//! This crate re-exports the runtime, the tools and the actors, and holds the
//! `troupe` binary.

pub use troupe_actors as actors;
pub use troupe_runtime as runtime;
pub use troupe_tools as tools;

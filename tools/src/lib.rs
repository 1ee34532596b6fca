//! troupe-tools: the agents' tools, one file per tool.
//!
//! Each file holds a tool's params type (its JSON schema is derived from it),
//! its description, its flags and its handler, with its tests.

pub mod documents;

//! troupe-tools: the agents' tools, one file per tool.
//!
//! Each file holds a tool's params type (its JSON schema is derived from it),
//! its description, its flags and its handler, with its tests.

pub mod file_lock;
pub mod memory;
pub mod plan;
pub mod scan;
pub mod skill_manage;
pub mod skills;
pub mod use_skill;

//! troupe-tools: the agents' tools, one file per tool.
//!
//! Each file holds a tool's params type (its JSON schema is derived from it),
//! its description, its flags and its handler, with its tests.

pub mod edit_file;
pub mod find_files;
pub mod ledger;
pub mod paths;
pub mod read_file;
pub mod run_command;
pub mod write_file;

//! Which files a conversation has read, and what they held then: the
//! runtime's [`troupe_runtime::tool::ledger`], a typed service of the node
//! that `read_file`, `write_file` and `edit_file` share; named here too,
//! where the tools have always found it.

pub use troupe_runtime::tool::ledger::*;

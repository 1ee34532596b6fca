//! Budgets: tokens, money, tool calls and wall time, per turn, per bot and
//! per delegation subtree — defined in the runtime ([`troupe_runtime::budget`])
//! so that a turn's scope is a typed service of its tools; named here too,
//! where the actors have always found them.

pub use troupe_runtime::budget::*;

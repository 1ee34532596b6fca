//! The integration suite's modules.

mod agents;
mod smoke;
mod support;
mod turn_loop;

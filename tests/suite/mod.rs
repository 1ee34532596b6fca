//! The integration suite's modules.

mod agents;
mod cli;
mod smoke;
mod support;
mod turn_loop;

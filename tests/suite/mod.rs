//! The integration suite's modules.

mod agents;
mod docs;
mod smoke;
mod support;
mod turn_loop;

//! The integration suite's modules.

mod smoke;
mod support;
mod turn_loop;

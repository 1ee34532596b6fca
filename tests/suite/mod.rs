//! The integration suite's modules.

mod routines;
mod smoke;
mod support;
mod turn_loop;

//! The integration suite's modules.

mod smoke;

//! supervise (being built).

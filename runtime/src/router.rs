//! router (being built).

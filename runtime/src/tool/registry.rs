//! The tool registry (being built).

//! trust (being built).

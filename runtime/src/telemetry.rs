//! telemetry (being built).

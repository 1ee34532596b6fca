//! The one dispatch point (being built).

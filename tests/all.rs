//! troupe's integration tests: one binary, one module per area in `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;

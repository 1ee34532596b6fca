//! troupe's integration tests: one binary, one module per area in `suite/`.

mod suite;

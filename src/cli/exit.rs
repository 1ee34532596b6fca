//! Exit statuses: how a command that waits for a turn (`run`, `chat`,
//! `thread post`) or starts a node (`serve`) says how it ended.
//!
//! `docs/getting-started.md` ("Exit status") lists the same table; a
//! script tells a setup to fix (2) from a turn that failed (1).

use troupe_actors::node::NodeError;
use troupe_runtime::model::ModelError;

use crate::api::RuntimeError;

/// The turn finished.
pub const FINISHED: u8 = 0;
/// The turn failed (a model error, a script's unmet `expect`), a bot's turn
/// in the thread failed, or the command failed for another reason.
pub const FAILED: u8 = 1;
/// Nothing ran: the configuration cannot be used — a model spec that is
/// unknown, a key not set, a script that cannot be read or parsed, a bad
/// `models.toml` or `config.toml` entry, a bad `--set`. Also clap's status
/// for a command line it refuses.
pub const CONFIGURATION: u8 = 2;

/// The configuration failure a command reports: no turn ran, and the
/// message says what to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Misconfigured(pub String);

/// The exit status of a command that ended with `error`.
pub fn for_error(error: &anyhow::Error) -> u8 {
    if error.chain().any(is_configuration) {
        CONFIGURATION
    } else {
        FAILED
    }
}

fn is_configuration(error: &(dyn std::error::Error + 'static)) -> bool {
    if error.is::<Misconfigured>()
        || error.is::<ModelError>()
        || error.is::<troupe_runtime::config::ConfigError>()
        || error.is::<troupe_runtime::telemetry::TelemetryError>()
    {
        return true;
    }
    if let Some(e) = error.downcast_ref::<NodeError>() {
        return matches!(e, NodeError::Model(_));
    }
    if let Some(e) = error.downcast_ref::<RuntimeError>() {
        return matches!(
            e,
            RuntimeError::Config(_)
                | RuntimeError::Model(_)
                | RuntimeError::Node(NodeError::Model(_))
        );
    }
    false
}

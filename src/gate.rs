//! The gate a runtime's calls pass, built from `config.toml`'s `[trust]`.

use std::sync::Arc;

use troupe_actors::channel::Questions;
use troupe_actors::gate::TrustGate;
use troupe_runtime::config::{Config, TrustMode};
use troupe_runtime::home::Home;
use troupe_runtime::model::ResolvedModel;
use troupe_runtime::trust::{FileApprovals, Gate, GateMode, GatePolicy, ModelGuardian, TrustError};

/// The gate for `config`: its rules, the user's lists, the guardian (a call
/// to `guardian_model` when there is one), approvals kept in the home, and
/// whether `[sandbox]` puts commands in a sandbox on this machine.
pub fn for_config(
    config: &Config,
    home: &Home,
    questions: Arc<Questions>,
    guardian_model: Option<&ResolvedModel>,
    ask_timeout: std::time::Duration,
) -> Result<TrustGate, TrustError> {
    let policy = GatePolicy {
        mode: match config.trust.mode {
            TrustMode::Ask => GateMode::Ask,
            TrustMode::Auto => GateMode::Auto,
        },
        deny: config.trust.deny.clone(),
        allow: config.trust.allow.clone(),
        limits: Default::default(),
    };
    let mut gate = Gate::new(&policy)?
        .with_approvals(Arc::new(FileApprovals::open(home)?))
        .with_sandbox_check({
            let sandbox = config.sandbox.clone();
            move || sandbox.holds()
        });
    if let Some(model) = guardian_model {
        gate = gate.with_guardian(Arc::new(ModelGuardian::new(
            Arc::clone(&model.provider),
            model.model.clone(),
        )));
    }
    Ok(TrustGate::new(gate, questions, ask_timeout))
}

/// Where commands run on this machine under `settings`, and what the gate
/// does about it: one line for `troupe doctor`.
pub fn where_commands_run(settings: &troupe_runtime::sandbox::SandboxSettings) -> String {
    use troupe_runtime::sandbox::{Placement, INSTALL_HINT};
    match settings.place() {
        Ok(Placement::Sandboxed(_)) => {
            "sandboxed by bubblewrap (troupe's home is out of their reach)".into()
        }
        Ok(Placement::Unsandboxed(why)) => format!(
            "UNSANDBOXED ({why}): {}. To sandbox them, {INSTALL_HINT}",
            troupe_runtime::trust::UNSANDBOXED_GATE
        ),
        Err(e) => format!("refused: {e}"),
    }
}

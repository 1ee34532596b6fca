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
            let sandbox = config.sandbox;
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

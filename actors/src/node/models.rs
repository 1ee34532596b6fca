//! The node's models: a bot's model spec resolved to a provider (once per
//! spec, cached), what a relay forwards calls to, and the override a
//! program or a test gives every bot.

use std::sync::Arc;

use troupe_runtime::model::{ModelEndpoint, ModelError, ResolveOptions, ResolvedModel};

use super::NodeContext;

impl NodeContext {
    /// Resolves a model spec (cached).
    pub fn resolve_model(&self, spec: &str) -> Result<ResolvedModel, ModelError> {
        if let Some(m) = &self.model_override {
            return Ok(m.clone());
        }
        let spec = if spec.is_empty() {
            self.settings.default_model.as_str()
        } else {
            spec
        };
        if let Some(m) = self.resolved.lock().get(spec) {
            return Ok(m.clone());
        }
        let env = |k: &str| (self.env)(k);
        let resolved = troupe_runtime::model::resolve_with(
            spec,
            &self.models,
            &env,
            &self.settings.cwd,
            &ResolveOptions {
                script_progress: Some(self.home.root().join("script-progress")),
                ..ResolveOptions::default()
            },
        )?;
        self.resolved
            .lock()
            .insert(spec.to_string(), resolved.clone());
        Ok(resolved)
    }

    /// Resolves the model of bot `bot` (`spec` its model spec): like
    /// [`NodeContext::resolve_model`], answered by the bot's own script
    /// when the provider scripts each bot on its own.
    pub fn resolve_model_for(&self, bot: &str, spec: &str) -> Result<ResolvedModel, ModelError> {
        let mut resolved = self.resolve_model(spec)?;
        if let Some(own) = resolved.provider.for_agent(bot) {
            resolved.provider = own;
        }
        Ok(resolved)
    }

    /// The names `models.toml` defines, in its order.
    pub fn model_names(&self) -> Vec<String> {
        self.models.models.keys().cloned().collect()
    }

    /// Where calls to `spec` go and the key they carry (read now), for a
    /// relay that forwards calls made elsewhere. Not the test override:
    /// that provider has no address.
    pub fn model_endpoint(&self, spec: &str) -> Result<ModelEndpoint, ModelError> {
        let env = |k: &str| (self.env)(k);
        troupe_runtime::model::endpoint(spec, &self.models, &env)
    }

    /// The provider troupe answers `spec`'s calls with in-process, for a
    /// relay: a model with no address (a `script:` spec); `None` for a
    /// model with one (a relay forwards those).
    pub fn served_model(&self, spec: &str) -> Option<Arc<dyn troupe_runtime::model::Provider>> {
        if !spec.trim_start().starts_with("script:") {
            return None;
        }
        // Resolved once per node (and keeping its progress like the
        // bots' scripts), so every relay serves the same script in order.
        self.resolve_model(spec.trim()).ok().map(|m| m.provider)
    }

    /// The model every bot uses whatever its spec, when the program gave
    /// one (tests, an embedding program's provider).
    pub fn model_override(&self) -> Option<Arc<dyn troupe_runtime::model::Provider>> {
        self.model_override
            .as_ref()
            .map(|m| Arc::clone(&m.provider))
    }
}

//! A model that cannot be used: its spec did not resolve (an unknown name,
//! a key not set, a script that cannot be read or parsed, a bad
//! `models.toml` entry).
//!
//! A conversation whose bot's model does not resolve still starts, with
//! this provider in its model's place: each of its turns fails at its first
//! model call with the resolution's own error, once, instead of the
//! conversation failing to start and being restarted by its supervisor
//! until it gives up. A message delivered to it (a thread's offer, a
//! `message_agent`) is answered as any failed turn is, with the reason.
//!
//! # Examples
//!
//! ```
//! use troupe_runtime::model::{ModelError, ResolvedModel};
//!
//! let error = ModelError::Config("unknown model spec \"nosuch:x\"".into());
//! let model = ResolvedModel::unavailable("nosuch:x", error);
//! assert_eq!(model.provider.name(), "unavailable");
//! ```

use std::sync::Arc;

use super::spec::{Pricing, ResolvedModel};
use super::{ModelError, ModelRequest, ModelStream, Provider};

/// A provider whose every call fails with the error its spec resolved to.
#[derive(Debug)]
struct Unavailable {
    error: ModelError,
}

#[async_trait::async_trait]
impl Provider for Unavailable {
    fn name(&self) -> &str {
        "unavailable"
    }

    async fn stream(&self, _request: ModelRequest) -> Result<ModelStream, ModelError> {
        Err(self.error.clone())
    }
}

impl ResolvedModel {
    /// The model of a spec that did not resolve: every call fails with
    /// `error` (see the module docs).
    pub fn unavailable(spec: &str, error: ModelError) -> ResolvedModel {
        ResolvedModel {
            spec: spec.to_owned(),
            provider: Arc::new(Unavailable { error }),
            model: String::new(),
            context_window: 128_000,
            max_output_tokens: None,
            sees_images: false,
            pricing: Pricing::default(),
        }
    }
}

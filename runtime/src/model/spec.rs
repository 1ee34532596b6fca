//! Model specs, `models.toml`, prices and what calls cost.
//!
//! A bot names its model with a short spec: `openai:MODEL`,
//! `anthropic:MODEL`, `ollama:MODEL`, `script:PATH`, or a name defined in the
//! home's `models.toml`. [`resolve`] turns a spec into a ready provider with
//! the model's context window and prices. It reads the environment only
//! through the closure it is given, so tests never touch the process's.
//!
//! ```toml
//! [models.fast]
//! api = "openai"
//! base_url = "http://127.0.0.1:8000/v1"
//! model = "qwen3-8b"
//! context_window = 32768
//! sees_images = false   # unset: known model names decide (gpt-4o, claude-*, llava, *-vl …)
//! prices = { input = 0.1, output = 0.4 }   # US dollars per million tokens
//!
//! # A built-in spec can be given prices or settings by quoting it as a name.
//! [models."anthropic:claude-sonnet-4-5"]
//! api = "anthropic"
//! model = "claude-sonnet-4-5"
//! prices = { input = 3, output = 15, cache_read = 0.3, cache_write = 3.75 }
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

use super::anthropic::{AnthropicClient, AnthropicConfig, DEFAULT_MAX_TOKENS};
use super::http::{build_client, HttpOptions};
use super::limit::{ConcurrencyLimits, DEFAULT_CONCURRENCY};
use super::openai::{OpenAiClient, OpenAiConfig};
use super::retry::{RetryPolicy, Timeouts};
use super::scripted::ScriptedProvider;
use super::{ModelError, Provider};
use crate::protocol::Usage;

/// OpenAI's endpoint, unless `OPENAI_BASE_URL` says otherwise.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's endpoint, unless `ANTHROPIC_BASE_URL` says otherwise.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// A local Ollama's OpenAI-compatible endpoint.
pub const OLLAMA_BASE_URL: &str = "http://127.0.0.1:11434/v1";

/// The models defined in `models.toml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsConfig {
    /// By name.
    #[serde(default)]
    pub models: BTreeMap<String, ModelDef>,
}

impl ModelsConfig {
    /// Parses `text`, the contents of `path` (named in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ModelError> {
        // One line, `path:line:column: what is wrong`, as config.toml's errors.
        toml::from_str(text).map_err(|err| {
            let found = crate::diagnostic::describe(&err, Some(text), crate::diagnostic::nowhere);
            let at = found
                .position
                .map(|(line, column)| format!(":{line}:{column}"))
                .unwrap_or_default();
            ModelError::Config(format!("{}{at}: {}", path.display(), found.message))
        })
    }

    /// Reads `path`; a missing file defines no models.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        match std::fs::read_to_string(path) {
            // The commented example as written defines nothing (a test
            // keeps it so): not parsed.
            Ok(text) if text == crate::config::MODELS_EXAMPLE => Ok(Self::default()),
            Ok(text) => Self::parse(&text, path),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(err) => Err(ModelError::Config(format!(
                "cannot read {}: {err}",
                path.display()
            ))),
        }
    }
}

/// Which wire protocol a defined model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI-compatible chat completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// One `[models.NAME]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDef {
    /// The protocol.
    pub api: Api,
    /// The endpoint (default: the protocol's, or its `*_BASE_URL` variable).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The variable holding the key (default `ANTHROPIC_API_KEY` for
    /// anthropic; none for openai, which suits local servers).
    #[serde(default)]
    pub key_env: Option<String>,
    /// The provider's model id.
    pub model: String,
    /// The context window in tokens.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// The most output tokens per call.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// Whether the model accepts images; unset, the model's name decides
    /// ([`super::vision::known_to_see_images`]).
    #[serde(default)]
    pub sees_images: Option<bool>,
    /// Prices in US dollars per million tokens.
    #[serde(default)]
    pub prices: Pricing,
    /// Concurrent calls allowed to this endpoint.
    #[serde(default)]
    pub max_concurrency: Option<usize>,
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Uncached input.
    #[serde(default)]
    pub input: f64,
    /// Output.
    #[serde(default)]
    pub output: f64,
    /// Input read from the prompt cache.
    #[serde(default)]
    pub cache_read: f64,
    /// Input written to the prompt cache.
    #[serde(default)]
    pub cache_write: f64,
}

impl Pricing {
    /// What `usage` costs, in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per_token(usage.input_tokens, self.input)
            + per_token(usage.output_tokens, self.output)
            + per_token(usage.cache_read_tokens, self.cache_read)
            + per_token(usage.cache_write_tokens, self.cache_write)
    }
}

/// Tokens used and what they cost, added up call by call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// The tokens.
    pub usage: Usage,
    /// Their cost in US dollars.
    pub cost_usd: f64,
}

impl Spend {
    /// Adds one call's usage at `pricing`.
    pub fn add(&mut self, usage: &Usage, pricing: &Pricing) {
        self.usage.add(usage);
        self.cost_usd += pricing.cost(usage);
    }

    /// Adds another spend (a child's, a turn's).
    pub fn merge(&mut self, other: &Spend) {
        self.usage.add(&other.usage);
        self.cost_usd += other.cost_usd;
    }
}

/// A spec resolved into a provider and the model's facts.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The spec as given.
    pub spec: String,
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The provider's model id, for [`super::ModelRequest::model`].
    pub model: String,
    /// The context window in tokens.
    pub context_window: u64,
    /// The most output tokens per call, if set.
    pub max_output_tokens: Option<u32>,
    /// Whether the model accepts images.
    pub sees_images: bool,
    /// Its prices.
    pub pricing: Pricing,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("spec", &self.spec)
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("sees_images", &self.sees_images)
            .field("pricing", &self.pricing)
            .finish()
    }
}

/// How resolved HTTP clients retry, time out and share endpoint caps.
#[derive(Debug, Clone)]
pub struct ResolveOptions {
    /// Retries.
    pub retry: RetryPolicy,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Concurrent calls per endpoint unless `models.toml` says otherwise.
    pub concurrency: usize,
    /// Where endpoint caps are kept (shared by every model resolved with it).
    pub limits: Arc<ConcurrencyLimits>,
    /// The connection pool; `None` builds one for `timeouts`.
    pub client: Option<reqwest::Client>,
    /// Where a per-bot `script:PATH` keeps how far each bot got, so a
    /// house is scripted across several commands (`None`: not kept).
    pub script_progress: Option<std::path::PathBuf>,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        static CLIENT: LazyLock<reqwest::Client> =
            LazyLock::new(|| build_client(&Timeouts::default()));
        Self {
            retry: RetryPolicy::default(),
            timeouts: Timeouts::default(),
            concurrency: DEFAULT_CONCURRENCY,
            limits: ConcurrencyLimits::global(),
            client: Some(CLIENT.clone()),
            script_progress: None,
        }
    }
}

/// Resolves `spec` with default retries and timeouts and the process-wide
/// endpoint caps. `env` looks variables up; `home_root` anchors a relative
/// `script:PATH`.
///
/// # Examples
///
/// Resolves a defined model and streams one call (needs the server running):
///
/// ```no_run
/// # async fn demo() -> Result<(), troupe_runtime::model::ModelError> {
/// use std::path::Path;
/// use futures::StreamExt;
/// use troupe_runtime::model::{resolve, ModelRequest, ModelsConfig};
/// use troupe_runtime::protocol::Message;
///
/// let models = ModelsConfig::load(Path::new("/home/me/.troupe/models.toml"))?;
/// let env = |name: &str| std::env::var(name).ok();
/// let model = resolve("ollama:qwen3", &models, &env, Path::new("/home/me/.troupe"))?;
/// let request = ModelRequest {
///     model: model.model.clone(),
///     system: "Be brief.".into(),
///     messages: vec![Message::user("Hello")].into(),
///     tools: Vec::new().into(),
///     max_tokens: model.max_output_tokens,
///     temperature: None,
/// };
/// let mut events = model.provider.stream(request).await?;
/// while let Some(event) = events.next().await {
///     println!("{:?}", event?);
/// }
/// # Ok(())
/// # }
/// ```
pub fn resolve(
    spec: &str,
    models: &ModelsConfig,
    env: &dyn Fn(&str) -> Option<String>,
    home_root: &Path,
) -> Result<ResolvedModel, ModelError> {
    resolve_with(spec, models, env, home_root, &ResolveOptions::default())
}

/// [`resolve`] with explicit options.
pub fn resolve_with(
    spec: &str,
    models: &ModelsConfig,
    env: &dyn Fn(&str) -> Option<String>,
    home_root: &Path,
    options: &ResolveOptions,
) -> Result<ResolvedModel, ModelError> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let script = spec
        .strip_prefix("script:")
        .filter(|rest| !rest.trim().is_empty() && !models.models.contains_key(spec));
    if let Some(rest) = script {
        let path = home_root.join(rest);
        // Nobody reads a settings-named script's requests: keep none.
        let mut provider = ScriptedProvider::load(&path)?.recording(false);
        if let Some(dir) = &options.script_progress {
            provider = provider.keeping_progress(dir, &path);
        }
        return Ok(ResolvedModel {
            spec: spec.to_string(),
            provider: Arc::new(provider),
            model: "script".to_string(),
            context_window: 128_000,
            max_output_tokens: None,
            sees_images: false,
            pricing: Pricing::default(),
        });
    }
    let def = definition(spec, models)?;
    from_def(spec, &def, &var, options)
}

/// Where a model's calls go and the key they carry: what a relay needs to
/// forward a call someone else made (an environment's model relay).
#[derive(Clone, PartialEq)]
pub struct ModelEndpoint {
    /// The protocol.
    pub api: Api,
    /// The endpoint: `…/v1` for OpenAI-compatible APIs, the host for
    /// Anthropic's (its paths start with `/v1`).
    pub base_url: String,
    /// The key, when the model has one.
    pub api_key: Option<String>,
    /// The variable the key came from (or should have).
    pub key_var: Option<String>,
    /// The provider's model id.
    pub model: String,
    /// Its prices.
    pub pricing: Pricing,
    /// Concurrent calls allowed to this endpoint, if `models.toml` says.
    pub max_concurrency: Option<usize>,
}

impl std::fmt::Debug for ModelEndpoint {
    /// Never shows the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEndpoint")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .field("key_var", &self.key_var)
            .field("model", &self.model)
            .field("pricing", &self.pricing)
            .field("max_concurrency", &self.max_concurrency)
            .finish()
    }
}

/// The endpoint of `spec` (a name from `models.toml`, or `openai:MODEL`,
/// `anthropic:MODEL`, `ollama:MODEL`), its key read through `env`: the
/// same address and key [`resolve`] would give its provider. A
/// `script:PATH` has no endpoint; a key that is needed and not set is
/// [`ModelError::Auth`], naming the variable.
pub fn endpoint(
    spec: &str,
    models: &ModelsConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelEndpoint, ModelError> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let def = definition(spec, models)?;
    let address = address(spec, &def, &var)?;
    Ok(ModelEndpoint {
        api: def.api,
        base_url: address.base_url,
        api_key: address.api_key,
        key_var: address.key_var,
        model: def.model.clone(),
        pricing: def.prices,
        max_concurrency: def.max_concurrency,
    })
}

/// The definition `spec` names: a `models.toml` entry, or a built-in
/// spec's (not `script:`, which has none).
fn definition(spec: &str, models: &ModelsConfig) -> Result<ModelDef, ModelError> {
    if let Some(def) = models.models.get(spec) {
        return Ok(def.clone());
    }
    let Some((kind, rest)) = spec.split_once(':') else {
        return Err(unknown(spec, models));
    };
    if rest.trim().is_empty() {
        return Err(ModelError::Config(format!(
            "model spec {spec:?} names no model after the colon"
        )));
    }
    let def = |api, base_url: Option<String>, key_env: Option<&str>, window| ModelDef {
        api,
        base_url,
        key_env: key_env.map(str::to_string),
        model: rest.to_string(),
        context_window: Some(window),
        max_output_tokens: None,
        sees_images: None,
        prices: Pricing::default(),
        max_concurrency: None,
    };
    match kind {
        "openai" => Ok(def(Api::Openai, None, Some("OPENAI_API_KEY"), 128_000)),
        "anthropic" => Ok(def(
            Api::Anthropic,
            None,
            Some("ANTHROPIC_API_KEY"),
            200_000,
        )),
        "ollama" => Ok(def(
            Api::Openai,
            Some(OLLAMA_BASE_URL.to_string()),
            None,
            32_768,
        )),
        "script" => Err(ModelError::Config(format!(
            "model spec {spec:?} is a script: it has no HTTP endpoint"
        ))),
        _ => Err(unknown(spec, models)),
    }
}

fn unknown(spec: &str, models: &ModelsConfig) -> ModelError {
    let names: Vec<&str> = models.models.keys().map(String::as_str).collect();
    let defined = if names.is_empty() {
        "models.toml defines none".to_string()
    } else {
        format!("models.toml defines {}", names.join(", "))
    };
    ModelError::Config(format!(
        "unknown model spec {spec:?}: use openai:MODEL, anthropic:MODEL, ollama:MODEL, script:PATH or a name from models.toml ({defined})"
    ))
}

fn from_def(
    spec: &str,
    def: &ModelDef,
    var: &dyn Fn(&str) -> Option<String>,
    options: &ResolveOptions,
) -> Result<ResolvedModel, ModelError> {
    // A spec like `ollama:qwen3` is named by its prefix, a defined model by its name.
    let name = match spec.split_once(':') {
        Some((prefix, _)) => prefix.to_string(),
        None => spec.to_string(),
    };
    let Address {
        base_url,
        api_key,
        key_var,
    } = address(spec, def, var)?;
    let key_var = key_var.unwrap_or_else(|| "(no key variable)".to_string());
    let limit = options.limits.get(
        &base_url,
        def.max_concurrency.unwrap_or(options.concurrency),
    );
    let http = HttpOptions {
        client: options
            .client
            .clone()
            .unwrap_or_else(|| build_client(&options.timeouts)),
        retry: options.retry.clone(),
        timeouts: options.timeouts,
        limit,
    };
    let default_window = match def.api {
        Api::Openai => 128_000,
        Api::Anthropic => 200_000,
    };
    let context_window = def.context_window.unwrap_or(default_window);
    let sees_images = def
        .sees_images
        .unwrap_or_else(|| super::vision::known_to_see_images(&def.model));
    let provider: Arc<dyn Provider> = match def.api {
        Api::Openai => Arc::new(OpenAiClient::new(
            OpenAiConfig {
                name,
                base_url,
                api_key,
                key_var,
                model: def.model.clone(),
                context_window,
                sees_images,
            },
            http,
        )),
        Api::Anthropic => Arc::new(AnthropicClient::new(
            AnthropicConfig {
                name,
                base_url,
                api_key: api_key.unwrap_or_default(),
                key_var,
                model: def.model.clone(),
                max_output_tokens: def.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
                context_window,
                sees_images,
            },
            http,
        )),
    };
    Ok(ResolvedModel {
        spec: spec.to_string(),
        provider,
        model: def.model.clone(),
        context_window,
        max_output_tokens: def.max_output_tokens,
        sees_images,
        pricing: def.prices,
    })
}

/// A model's address and key.
struct Address {
    base_url: String,
    api_key: Option<String>,
    key_var: Option<String>,
}

/// Where `def`'s calls go (its `base_url`, else the protocol's
/// `*_BASE_URL` variable, else the protocol's endpoint) and its key (from
/// `key_env`, else the protocol's default variable; an error when that is
/// needed and not set).
fn address(
    spec: &str,
    def: &ModelDef,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Address, ModelError> {
    let (provider_name, default_base, base_var, default_key) = match def.api {
        Api::Openai => ("openai", OPENAI_BASE_URL, "OPENAI_BASE_URL", None),
        Api::Anthropic => (
            "anthropic",
            ANTHROPIC_BASE_URL,
            "ANTHROPIC_BASE_URL",
            Some("ANTHROPIC_API_KEY"),
        ),
    };
    let base_url = def
        .base_url
        .clone()
        .or_else(|| var(base_var))
        .unwrap_or_else(|| default_base.to_string());
    let key_var = def.key_env.as_deref().or(default_key);
    let api_key = match key_var {
        Some(key_var) => Some(var(key_var).ok_or_else(|| ModelError::Auth {
            provider: provider_name.to_string(),
            message: format!("no key: {key_var} is not set (model {spec})"),
            key_var: key_var.to_string(),
        })?),
        None => None,
    };
    Ok(Address {
        base_url,
        api_key,
        key_var: key_var.map(str::to_string),
    })
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;

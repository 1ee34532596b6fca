use std::collections::HashMap;
use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

const MODELS: &str = r#"
[models.fast]
api = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "qwen3-8b"
context_window = 32768
max_concurrency = 2

[models.sonnet]
api = "anthropic"
key_env = "MY_ANTHROPIC_KEY"
model = "claude-sonnet-4-5"
max_output_tokens = 16000
sees_images = true
prices = { input = 3, output = 15, cache_read = 0.3, cache_write = 3.75 }
"#;

fn models() -> ModelsConfig {
    ModelsConfig::parse(MODELS, Path::new("/home/models.toml")).unwrap()
}

#[test]
fn models_toml_parses_every_field() {
    let models = models();
    assert_eq!(
        models.models["sonnet"],
        ModelDef {
            api: Api::Anthropic,
            base_url: None,
            key_env: Some("MY_ANTHROPIC_KEY".into()),
            model: "claude-sonnet-4-5".into(),
            context_window: None,
            max_output_tokens: Some(16000),
            sees_images: Some(true),
            prices: Pricing {
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 3.75
            },
            max_concurrency: None,
        }
    );
}

#[test]
fn unknown_keys_are_refused_naming_the_file_and_key() {
    let text = "[models.x]\napi = \"openai\"\nmodel = \"m\"\ncontext = 5\n";
    let error = ModelsConfig::parse(text, Path::new("/h/models.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("/h/models.toml") && error.contains("context"),
        "{error}"
    );
    let missing = ModelsConfig::load(Path::new("/definitely/not/here.toml")).unwrap();
    assert_eq!(missing, ModelsConfig::default());
}

#[test]
fn builtin_specs_resolve_with_their_keys_and_urls() {
    let home = Path::new("/home");
    let empty = ModelsConfig::default();
    let openai = resolve(
        "openai:gpt-4.1",
        &empty,
        &env(&[
            ("OPENAI_API_KEY", "sk"),
            ("OPENAI_BASE_URL", "http://proxy/v1"),
        ]),
        home,
    )
    .unwrap();
    assert_eq!(
        (
            openai.provider.name(),
            openai.model.as_str(),
            openai.context_window
        ),
        ("openai", "gpt-4.1", 128_000)
    );
    let anthropic = resolve(
        "anthropic:claude-x",
        &empty,
        &env(&[("ANTHROPIC_API_KEY", "k")]),
        home,
    )
    .unwrap();
    assert_eq!(
        (anthropic.provider.name(), anthropic.context_window),
        ("anthropic", 200_000)
    );
    let ollama = resolve("ollama:qwen3", &empty, &env(&[]), home).unwrap();
    assert_eq!(
        (ollama.provider.name(), ollama.model.as_str()),
        ("ollama", "qwen3")
    );
}

#[test]
fn a_missing_key_names_its_variable() {
    let error = resolve(
        "openai:gpt-4.1",
        &ModelsConfig::default(),
        &env(&[("OPENAI_API_KEY", " ")]),
        Path::new("/"),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ModelError::Auth { key_var, .. } if key_var == "OPENAI_API_KEY"),
        "{error}"
    );
    let error = resolve(
        "sonnet",
        &models(),
        &env(&[("ANTHROPIC_API_KEY", "k")]),
        Path::new("/"),
    )
    .unwrap_err();
    assert!(error.to_string().contains("MY_ANTHROPIC_KEY"), "{error}");
}

#[test]
fn named_models_carry_their_settings_and_prices() {
    let sonnet = resolve(
        "sonnet",
        &models(),
        &env(&[("MY_ANTHROPIC_KEY", "k")]),
        Path::new("/"),
    )
    .unwrap();
    assert_eq!(
        (
            sonnet.model.as_str(),
            sonnet.context_window,
            sonnet.max_output_tokens,
            sonnet.sees_images
        ),
        ("claude-sonnet-4-5", 200_000, Some(16000), true)
    );
    assert!(sonnet.provider.sees_images());
    let fast = resolve("fast", &models(), &env(&[]), Path::new("/")).unwrap();
    assert_eq!((fast.provider.name(), fast.context_window), ("fast", 32768));
}

#[test]
fn unknown_specs_say_what_is_accepted() {
    for spec in ["gpt-4", "mistral:large", "openai:"] {
        let error = resolve(spec, &models(), &env(&[]), Path::new("/")).unwrap_err();
        assert!(matches!(error, ModelError::Config(_)), "{spec}: {error}");
    }
    let error = resolve("gpt-4", &models(), &env(&[]), Path::new("/"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("openai:MODEL") && error.contains("fast, sonnet"),
        "{error}"
    );
}

#[tokio::test]
async fn a_script_spec_is_read_relative_to_the_home() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("demo.json"),
        r#"{"turns": [{"text": "hi"}]}"#,
    )
    .unwrap();
    let model = resolve(
        "script:demo.json",
        &ModelsConfig::default(),
        &env(&[]),
        home.path(),
    )
    .unwrap();
    assert_eq!(model.provider.name(), "script");
    let error = resolve(
        "script:none.json",
        &ModelsConfig::default(),
        &env(&[]),
        home.path(),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("none.json"), "{error}");
}

#[test]
fn cost_and_spend_add_up() {
    let prices = Pricing {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
    };
    let usage = Usage {
        input_tokens: 1_000_000,
        output_tokens: 100_000,
        cache_read_tokens: 2_000_000,
        cache_write_tokens: 400_000,
    };
    assert!((prices.cost(&usage) - (3.0 + 1.5 + 0.6 + 1.5)).abs() < 1e-9);
    let mut spend = Spend::default();
    spend.add(&usage, &prices);
    spend.add(&usage, &prices);
    assert_eq!(spend.usage.input_tokens, 2_000_000);
    assert!((spend.cost_usd - 13.2).abs() < 1e-9);
}

#[tokio::test]
async fn resolved_clients_share_one_cap_per_endpoint() {
    let options = ResolveOptions {
        limits: Arc::new(ConcurrencyLimits::new()),
        ..ResolveOptions::default()
    };
    let e = env(&[]);
    resolve_with("fast", &models(), &e, Path::new("/"), &options).unwrap();
    let cap = options.limits.get("http://127.0.0.1:8000/v1", 99);
    assert_eq!(
        cap.permits(),
        2,
        "models.toml's max_concurrency made the cap"
    );
}

#[test]
fn whether_a_model_sees_images_comes_from_models_toml_else_its_name() {
    let home = Path::new("/home");
    let models = ModelsConfig::parse(
        r#"
[models.blind]
api = "openai"
model = "gpt-4o"
sees_images = false

[models.local-vision]
api = "openai"
base_url = "http://127.0.0.1:1/v1"
model = "my-finetune"
sees_images = true
"#,
        Path::new("/home/models.toml"),
    )
    .unwrap();
    let keys = env(&[("OPENAI_API_KEY", "sk"), ("ANTHROPIC_API_KEY", "k")]);
    let sees = |spec: &str| {
        let model = resolve(spec, &models, &keys, home).unwrap();
        assert_eq!(model.sees_images, model.provider.sees_images(), "{spec}");
        model.sees_images
    };
    assert!(sees("openai:gpt-4o-mini"));
    assert!(sees("anthropic:claude-sonnet-4-5"));
    assert!(sees("ollama:llava:13b"));
    assert!(!sees("ollama:qwen3:8b"));
    assert!(!sees("openai:gpt-3.5-turbo"));
    assert!(!sees("blind"), "models.toml says no");
    assert!(sees("local-vision"), "models.toml says yes");
}

#[test]
fn an_endpoint_has_the_address_and_key_resolve_would_use_and_never_prints_the_key() {
    let sonnet = endpoint(
        "sonnet",
        &models(),
        &env(&[("MY_ANTHROPIC_KEY", "sk-secret")]),
    )
    .unwrap();
    assert_eq!(
        sonnet,
        ModelEndpoint {
            api: Api::Anthropic,
            base_url: ANTHROPIC_BASE_URL.into(),
            api_key: Some("sk-secret".into()),
            key_var: Some("MY_ANTHROPIC_KEY".into()),
            model: "claude-sonnet-4-5".into(),
            pricing: models().models["sonnet"].prices,
            max_concurrency: None,
        }
    );
    assert!(!format!("{sonnet:?}").contains("sk-secret"), "{sonnet:?}");
    let fast = endpoint("fast", &models(), &env(&[])).unwrap();
    assert_eq!(
        (fast.base_url.as_str(), fast.api_key, fast.max_concurrency),
        ("http://127.0.0.1:8000/v1", None, Some(2))
    );
    let openai = endpoint(
        "openai:gpt-4.1",
        &ModelsConfig::default(),
        &env(&[
            ("OPENAI_API_KEY", "k"),
            ("OPENAI_BASE_URL", "http://proxy/v1"),
        ]),
    )
    .unwrap();
    assert_eq!(
        (openai.base_url.as_str(), openai.model.as_str()),
        ("http://proxy/v1", "gpt-4.1")
    );
    let missing = endpoint("sonnet", &models(), &env(&[])).unwrap_err();
    assert!(
        matches!(&missing, ModelError::Auth { key_var, .. } if key_var == "MY_ANTHROPIC_KEY"),
        "{missing}"
    );
    let script = endpoint("script:demo.json", &models(), &env(&[]))
        .unwrap_err()
        .to_string();
    assert!(script.contains("no HTTP endpoint"), "{script}");
}

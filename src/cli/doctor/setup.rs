//! What `troupe doctor` checks besides the database: each model the home
//! uses (its spec, its key, and — unless `--offline` — whether its endpoint
//! answers and takes the key), and the programs some features need (node
//! and npm, for MCP servers from npm and the outside executors).
//!
//! A model is probed with a `GET` of its API's model list, which costs no
//! tokens: any HTTP answer means the endpoint is reachable, 401 or 403
//! that the key is refused. These lines inform; the exit status stays the
//! database's, so a machine without a key can still check its data.

use std::collections::BTreeSet;
use std::time::Duration;

use troupe_runtime::home::Home;
use troupe_runtime::model::{self, Api, ModelsConfig};

/// How long a model's endpoint has to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// One finding: the label and what was found; `ok` false for a problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What was checked (`model openai:gpt-4o-mini`, `node`).
    pub label: String,
    /// What was found.
    pub text: String,
    /// Whether it can be used.
    pub ok: bool,
}

/// The models the home uses: the default, each bot's own, each of models.toml.
pub fn models_in_use(default: &str, bots: &[String], models: &ModelsConfig) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let names = models.models.keys().cloned();
    for spec in std::iter::once(default.to_owned())
        .chain(bots.iter().cloned())
        .chain(names)
    {
        if !spec.is_empty() && seen.insert(spec.clone()) {
            out.push(spec);
        }
    }
    out
}

/// Checks each model of `specs`: resolves it (spec, key, script), then
/// probes its endpoint unless `offline`.
pub async fn models(
    home: &Home,
    specs: &[String],
    models: &ModelsConfig,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    offline: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for spec in specs {
        let label = format!("model {spec}");
        if let Err(e) = model::resolve(spec, models, env, home.root()) {
            out.push(Finding {
                label,
                text: e.to_string(),
                ok: false,
            });
            continue;
        }
        let Ok(endpoint) = model::endpoint(spec, models, env) else {
            // A model with no address (a script): nothing to reach.
            out.push(Finding {
                label,
                text: "ok (answered in-process)".into(),
                ok: true,
            });
            continue;
        };
        let key = match &endpoint.key_var {
            Some(var) if endpoint.api_key.is_some() => format!("key from {var}"),
            _ => "no key".into(),
        };
        if offline {
            out.push(Finding {
                label,
                text: format!("{key}; {} not probed (--offline)", endpoint.base_url),
                ok: true,
            });
            continue;
        }
        let (ok, reached) = probe(
            endpoint.api,
            &endpoint.base_url,
            endpoint.api_key.as_deref(),
        )
        .await;
        out.push(Finding {
            label,
            text: format!("{key}; {reached}"),
            ok,
        });
    }
    out
}

/// Asks the endpoint for its model list; whether it is usable, and what it said.
async fn probe(api: Api, base_url: &str, key: Option<&str>) -> (bool, String) {
    let base = base_url.trim_end_matches('/');
    let client = match troupe_runtime::net::client_builder()
        .timeout(PROBE_TIMEOUT)
        .build()
    {
        Ok(c) => c,
        Err(e) => return (false, format!("no HTTP client: {e}")),
    };
    let request = match api {
        Api::Openai => {
            let r = client.get(format!("{base}/models"));
            match key {
                Some(k) => r.bearer_auth(k),
                None => r,
            }
        }
        Api::Anthropic => {
            let r = client
                .get(format!("{base}/v1/models"))
                .header("anthropic-version", "2023-06-01");
            match key {
                Some(k) => r.header("x-api-key", k),
                None => r,
            }
        }
    };
    match request.send().await {
        Ok(response) => {
            let status = response.status();
            if status.is_success() {
                (true, format!("{base} answers and takes the key"))
            } else if matches!(status.as_u16(), 401 | 403) {
                (
                    false,
                    format!(
                        "{base} answers, but refuses the key (HTTP {}): check the key's value",
                        status.as_u16()
                    ),
                )
            } else {
                (true, format!("{base} answers (HTTP {})", status.as_u16()))
            }
        }
        Err(e) => (
            false,
            format!(
                "{base} cannot be reached: {}; check base_url and the network, or use --offline",
                crate::cli::describe(&e.into())
            ),
        ),
    }
}

/// node and npm: found on PATH, with their versions.
pub async fn programs() -> Vec<Finding> {
    let mut out = Vec::new();
    for program in ["node", "npm"] {
        let run = tokio::process::Command::new(program)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output();
        let found = tokio::time::timeout(Duration::from_secs(10), run).await;
        let finding = match found {
            Ok(Ok(o)) if o.status.success() => Finding {
                label: program.into(),
                text: String::from_utf8_lossy(&o.stdout).trim().to_owned(),
                ok: true,
            },
            _ => Finding {
                label: program.into(),
                text: "not found on PATH: MCP servers from npm (mcp.json) and the outside executors need node and npm".into(),
                ok: false,
            },
        };
        out.push(finding);
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn each_model_in_use_is_checked_once() {
        let models: ModelsConfig = ModelsConfig::parse(
            "[models.fast]\napi = \"openai\"\nmodel = \"m\"\n",
            std::path::Path::new("models.toml"),
        )
        .unwrap();
        let bots = vec![
            "fast".to_owned(),
            String::new(),
            "anthropic:claude".to_owned(),
        ];
        assert_eq!(
            models_in_use("openai:gpt-4o-mini", &bots, &models),
            vec!["openai:gpt-4o-mini", "fast", "anthropic:claude"]
        );
    }
}

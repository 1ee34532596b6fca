//! Brave Search's web search API: `GET {brave_url}?q=…&count=…` with the key
//! in `X-Subscription-Token`; results under `web.results[]` with `title`,
//! `url` and an HTML `description`.

use serde::Deserialize;

use super::{Engine, EngineError, Hit};

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    #[serde(default)]
    results: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    description: String,
}

/// Asks Brave Search.
pub(super) async fn search(
    client: &reqwest::Client,
    endpoint: &str,
    key: &str,
    query: &str,
    limit: usize,
) -> Result<Vec<Hit>, EngineError> {
    let request = client
        .get(endpoint)
        .query(&[("q", query), ("count", &limit.to_string())])
        .header("X-Subscription-Token", key)
        .header(reqwest::header::ACCEPT, "application/json");
    let body = super::answered(Engine::Brave, request).await?;
    parse(&body)
}

/// Reads Brave's answer.
pub(super) fn parse(body: &str) -> Result<Vec<Hit>, EngineError> {
    let answer: Answer = serde_json::from_str(body).map_err(|e| {
        EngineError::new(
            Engine::Brave,
            format!("the answer is not Brave Search's JSON ({e})"),
        )
    })?;
    Ok(answer
        .web
        .map(|w| w.results)
        .unwrap_or_default()
        .into_iter()
        .map(|item| Hit {
            title: super::plain(&item.title),
            url: item.url,
            snippet: super::plain(&item.description),
        })
        .collect())
}

//! Tavily's search API: `POST {tavily_url}` with a JSON query and the key as
//! a bearer token; results under `results[]` with `title`, `url`, `content`.

use serde::Deserialize;

use super::{Engine, EngineError, Hit};

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    content: String,
}

/// Asks Tavily.
pub(super) async fn search(
    client: &reqwest::Client,
    endpoint: &str,
    key: &str,
    query: &str,
    limit: usize,
) -> Result<Vec<Hit>, EngineError> {
    let request = client
        .post(endpoint)
        .bearer_auth(key)
        .json(&serde_json::json!({
            "query": query,
            "max_results": limit,
            "search_depth": "basic",
            "include_answer": false,
        }));
    let body = super::answered(Engine::Tavily, request).await?;
    parse(&body)
}

/// Reads Tavily's answer.
pub(super) fn parse(body: &str) -> Result<Vec<Hit>, EngineError> {
    let answer: Answer = serde_json::from_str(body).map_err(|e| {
        EngineError::new(
            Engine::Tavily,
            format!("the answer is not Tavily's JSON ({e})"),
        )
    })?;
    Ok(answer
        .results
        .into_iter()
        .map(|item| Hit {
            title: super::plain(&item.title),
            url: item.url,
            snippet: super::plain(&item.content),
        })
        .collect())
}

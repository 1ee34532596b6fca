//! DuckDuckGo's keyless HTML search: `POST {duckduckgo_url}` with the form
//! `q=…`, results read out of the page.
//!
//! Each result is a `div.result`; ads carry `result--ad` (and link through
//! `y.js`) and are skipped. Result links go through DuckDuckGo's redirector,
//! `//duckduckgo.com/l/?uddg=<the address, percent-encoded>&rut=…`; the
//! address is taken out of `uddg`. When DuckDuckGo suspects a bot it serves
//! a challenge page instead of results: that is an error, not "no results".

use super::{Engine, EngineError, Hit};

/// Asks DuckDuckGo.
pub(super) async fn search(
    client: &reqwest::Client,
    endpoint: &str,
    query: &str,
) -> Result<Vec<Hit>, EngineError> {
    let request = client
        .post(endpoint)
        .form(&[("q", query), ("kl", "wt-wt")])
        .header(reqwest::header::ACCEPT, "text/html");
    let (status, body) = super::fetch(Engine::DuckDuckGo, request).await?;
    if is_bot_check(&body) {
        return Err(bot_check());
    }
    if status != 200 {
        return Err(EngineError::status(Engine::DuckDuckGo, status, &body));
    }
    parse(&body)
}

fn bot_check() -> EngineError {
    EngineError::new(
        Engine::DuckDuckGo,
        "served a bot-check page instead of results; try again later, or set TAVILY_API_KEY or \
         BRAVE_SEARCH_API_KEY for a search API",
    )
}

/// Whether a page is DuckDuckGo's bot check rather than results.
fn is_bot_check(body: &str) -> bool {
    body.contains("anomaly-modal")
        || body.contains("challenge-form")
        || body.contains("bots use DuckDuckGo too")
}

/// Reads the results out of a DuckDuckGo HTML page, ads left out.
pub fn parse(body: &str) -> Result<Vec<Hit>, EngineError> {
    if is_bot_check(body) {
        return Err(bot_check());
    }
    if body.trim().is_empty() {
        return Err(EngineError::new(
            Engine::DuckDuckGo,
            "answered with an empty page",
        ));
    }
    let doc = dom_query::Document::from(body);
    let mut hits = Vec::new();
    for result in doc.select("div.result").iter() {
        if result.has_class("result--ad") {
            continue;
        }
        let link = result.select("a.result__a");
        let Some(href) = link.attr("href") else {
            continue;
        };
        let Some(url) = target(&href) else {
            continue;
        };
        let title = link.text().split_whitespace().collect::<Vec<_>>().join(" ");
        let snippet = result
            .select(".result__snippet")
            .text()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        hits.push(Hit {
            title,
            url,
            snippet,
        });
    }
    Ok(hits)
}

/// The address a result links to: `uddg` of DuckDuckGo's redirector, or the
/// link itself; `None` for ad links.
fn target(href: &str) -> Option<String> {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else if href.starts_with('/') {
        format!("https://duckduckgo.com{href}")
    } else {
        href.to_owned()
    };
    let url = url::Url::parse(&absolute).ok()?;
    let on_ddg = url
        .host_str()
        .is_some_and(|h| h.ends_with("duckduckgo.com"));
    if on_ddg && url.path() == "/y.js" {
        return None;
    }
    if on_ddg && url.path().starts_with("/l/") {
        return url
            .query_pairs()
            .find(|(k, _)| k == "uddg")
            .map(|(_, v)| v.into_owned());
    }
    Some(url.to_string())
}

//! `send_gif`: an animated GIF searched for and posted into the chat.
//!
//! The service is Giphy when `GIPHY_API_KEY` is set, else KLIPY's
//! Tenor-compatible API when `KLIPY_API_KEY` is set (Tenor's own API is shut
//! down); with neither key the tool is not offered. Both addresses are
//! `[web]` settings.
//!
//! The post is the call's result: its data carries a `post` object
//! (`kind: "gif"`, the media `url`, a smaller `preview`, the `title`, the
//! service's `page` and `provider`). The result is committed to the
//! conversation's transcript like every tool result and reaches every
//! subscriber as the `ToolCallFinished` event of `send_gif`, which is where
//! a chat page shows the GIF as a message of the agent.

use serde::Deserialize;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{parse_args, schema_for, Tool, ToolContext, ToolSpec};

use super::Env;

/// The most results one search looks through (`index` below this).
pub const MAX_INDEX: u64 = 24;

/// A GIF service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Giphy's search API.
    Giphy,
    /// KLIPY's Tenor-compatible API.
    Klipy,
}

impl Provider {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Giphy => "Giphy",
            Provider::Klipy => "KLIPY",
        }
    }

    /// The environment variable holding its key.
    pub fn key_var(self) -> &'static str {
        match self {
            Provider::Giphy => "GIPHY_API_KEY",
            Provider::Klipy => "KLIPY_API_KEY",
        }
    }
}

/// One GIF found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gif {
    /// The animated image.
    pub url: String,
    /// A smaller rendition, for previews.
    pub preview: String,
    /// Its title or description.
    pub title: String,
    /// Its page on the service.
    pub page: String,
}

/// The arguments of `send_gif`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendGifParams {
    /// What the GIF should show, in a few words ("happy dance", "facepalm").
    pub query: String,
    /// Which result to post, from 0 (the best match, the default) to 24: pick
    /// another when the first was not right.
    #[serde(default)]
    pub index: Option<u64>,
}

/// The `send_gif` tool.
pub struct SendGif {
    spec: ToolSpec,
    /// Built on first use.
    client: std::sync::OnceLock<reqwest::Client>,
    settings: troupe_runtime::config::Web,
    env: Env,
}

impl SendGif {
    /// The tool as `[web]` and the environment set it up.
    pub fn new(settings: &troupe_runtime::config::Web, env: Env) -> Self {
        Self {
            spec: ToolSpec::new(
                "send_gif",
                "Search for an animated GIF and post the best match straight into the chat, \
                 where people see it. Give what it should show in a few words; `index` picks \
                 another result of the same search.",
                schema_for::<SendGifParams>(),
            ),
            client: std::sync::OnceLock::new(),
            settings: settings.clone(),
            env,
        }
    }

    /// The service to use and its key: Giphy first, then KLIPY.
    pub fn provider(&self) -> Option<(Provider, String)> {
        [Provider::Giphy, Provider::Klipy]
            .into_iter()
            .find_map(|p| {
                (self.env)(p.key_var())
                    .filter(|k| !k.trim().is_empty())
                    .map(|k| (p, k))
            })
    }

    async fn search(
        &self,
        provider: Provider,
        key: &str,
        query: &str,
        count: u64,
    ) -> Result<Vec<Gif>, String> {
        let count = count.to_string();
        let client = self
            .client
            .get_or_init(|| super::api_client(self.settings.timeout()));
        let request = match provider {
            Provider::Giphy => client.get(&self.settings.giphy_url).query(&[
                ("api_key", key),
                ("q", query),
                ("limit", &count),
                ("rating", "pg-13"),
                ("lang", "en"),
            ]),
            Provider::Klipy => client.get(&self.settings.klipy_url).query(&[
                ("key", key),
                ("q", query),
                ("limit", &count),
                ("media_filter", "gif,tinygif"),
                ("contentfilter", "medium"),
            ]),
        };
        let name = provider.name();
        let response = request
            .send()
            .await
            .map_err(|e| format!("{name}: the request failed: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| format!("{name}: the answer could not be read: {e}"))?;
        match status {
            200 => {}
            401 | 403 => {
                return Err(format!(
                    "{name}: the key in {} was refused (HTTP {status}); check or renew it",
                    provider.key_var()
                ))
            }
            429 => {
                return Err(format!(
                    "{name}: rate limit reached (HTTP 429); try again later"
                ))
            }
            _ => return Err(format!("{name}: answered HTTP {status}")),
        }
        match provider {
            Provider::Giphy => parse_giphy(&body),
            Provider::Klipy => parse_tenor(&body),
        }
        .map_err(|e| format!("{name}: the answer could not be read ({e})"))
    }
}

#[async_trait::async_trait]
impl Tool for SendGif {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn available(&self, _ctx: &ToolContext) -> Option<ToolSpec> {
        self.provider().map(|_| self.spec.clone())
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        let params: SendGifParams = match parse_args("send_gif", args) {
            Ok(p) => p,
            Err(result) => return result,
        };
        let Some((provider, key)) = self.provider() else {
            return ToolResult::error(
                "send_gif has no GIF service: set GIPHY_API_KEY or KLIPY_API_KEY",
            );
        };
        let query = params.query.trim();
        if query.is_empty() {
            return ToolResult::error(
                "send_gif needs a query: say in a few words what the GIF should show",
            );
        }
        let index = params.index.unwrap_or(0).min(MAX_INDEX);
        let found = tokio::select! {
            found = self.search(provider, &key, query, index + 1) => found,
            () = ctx.cancel.cancelled() => return ToolResult::error("send_gif was stopped"),
        };
        let gifs = match found {
            Ok(gifs) => gifs,
            Err(e) => return ToolResult::error(e),
        };
        let Some(gif) = gifs.get(index as usize) else {
            return ToolResult::error(if gifs.is_empty() {
                format!(
                    "{} found no GIF for \"{query}\"; try other words",
                    provider.name()
                )
            } else {
                format!(
                    "{} found only {} GIFs for \"{query}\"; give an index below {}",
                    provider.name(),
                    gifs.len(),
                    gifs.len()
                )
            });
        };
        let title = if gif.title.is_empty() {
            query
        } else {
            gif.title.as_str()
        };
        ToolResult::ok_with(
            format!("Posted a GIF into the chat: \"{title}\" ({})", gif.url),
            serde_json::json!({
                "post": {
                    "kind": "gif",
                    "url": gif.url,
                    "preview": gif.preview,
                    "title": title,
                    "page": gif.page,
                    "provider": provider.name(),
                },
                "query": query,
                "index": index,
            }),
        )
    }
}

/// Reads Giphy's answer: `data[]` with `images.original.url`.
pub fn parse_giphy(body: &str) -> Result<Vec<Gif>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        data: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        #[serde(default)]
        title: String,
        #[serde(default)]
        url: String,
        images: Images,
    }
    #[derive(Deserialize)]
    struct Images {
        original: Rendition,
        #[serde(default)]
        fixed_height_small: Option<Rendition>,
    }
    #[derive(Deserialize)]
    struct Rendition {
        url: String,
    }
    let answer: Answer = serde_json::from_str(body)?;
    Ok(answer
        .data
        .into_iter()
        .map(|item| Gif {
            preview: item
                .images
                .fixed_height_small
                .map_or_else(|| item.images.original.url.clone(), |r| r.url),
            url: item.images.original.url,
            title: item.title,
            page: item.url,
        })
        .collect())
}

/// Reads a Tenor-compatible answer (KLIPY): `results[]` with
/// `media_formats.gif.url`.
pub fn parse_tenor(body: &str) -> Result<Vec<Gif>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        results: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        #[serde(default)]
        content_description: String,
        #[serde(default)]
        title: String,
        #[serde(default)]
        itemurl: String,
        media_formats: Formats,
    }
    #[derive(Deserialize)]
    struct Formats {
        gif: Rendition,
        #[serde(default)]
        tinygif: Option<Rendition>,
    }
    #[derive(Deserialize)]
    struct Rendition {
        url: String,
    }
    let answer: Answer = serde_json::from_str(body)?;
    Ok(answer
        .results
        .into_iter()
        .map(|item| Gif {
            preview: item
                .media_formats
                .tinygif
                .map_or_else(|| item.media_formats.gif.url.clone(), |r| r.url),
            url: item.media_formats.gif.url,
            title: if item.content_description.is_empty() {
                item.title
            } else {
                item.content_description
            },
            page: item.itemurl,
        })
        .collect())
}

#[cfg(test)]
#[path = "gif_tests.rs"]
mod tests;

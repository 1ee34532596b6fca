//! `send_gif`: an animated GIF searched for and posted into the chat.
//!
//! The service is Giphy when `GIPHY_API_KEY` is set, else KLIPY's
//! Tenor-compatible API when `KLIPY_API_KEY` is set (Tenor's own API is shut
//! down). Both addresses are `[web]` settings. The tool is offered every
//! turn, as the house reference offers it: without a key it answers with an
//! error result saying how to set one up, so the model says it in words.
//!
//! In a house thread the GIF is posted as a message of the bot into its
//! thread, carrying an image [`Attachment`] (its URL, size and the service's
//! attribution): the page shows it, `troupe thread read` prints it as a
//! link, and the other bots see it in their transcripts. In a personal
//! chat (no thread) the result's data carries the same `post` object, and
//! the chat shows it to the user as a link from the `ToolCallFinished`
//! event of `send_gif`.

use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::{Houses, Seat};
use troupe_runtime::protocol::house::Attachment;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

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

    /// How the service asks to be credited next to its GIFs.
    pub fn attribution(self) -> &'static str {
        match self {
            Provider::Giphy => "Powered by GIPHY",
            Provider::Klipy => "Powered by KLIPY",
        }
    }
}

/// What `send_gif` answers when no service has a key.
pub const NO_SERVICE: &str = "send_gif has no GIF service set up, so nothing was posted. \
     Tell the person in words instead. To enable it, whoever runs troupe sets \
     GIPHY_API_KEY (a key from developers.giphy.com) or KLIPY_API_KEY (from klipy.com) \
     in troupe's environment and restarts it.";

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
    /// Its width in pixels, when the service said.
    pub width: Option<u32>,
    /// Its height in pixels, when the service said.
    pub height: Option<u32>,
    /// Its size in bytes, when the service said.
    pub bytes: Option<u64>,
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

/// Where `send_gif` searches, as `[web]` and the environment set it up:
/// the tool's state. It is offered every turn: without a key the call
/// says how to get one.
pub struct GifSearch {
    /// Built on first use.
    client: std::sync::OnceLock<reqwest::Client>,
    settings: troupe_runtime::config::Web,
    env: Env,
}

impl GifSearch {
    /// As `[web]` and the environment set it up.
    pub fn new(settings: &troupe_runtime::config::Web, env: Env) -> Self {
        Self {
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

/// Search for an animated GIF and post the best match straight into the chat, where people see
/// it. Give what it should show in a few words; `index` picks another result of the same
/// search.
#[tool]
pub async fn send_gif(params: SendGifParams, ctx: &ToolContext, gifs: &GifSearch) -> ToolResult {
    let query = params.query.trim();
    if query.is_empty() {
        return ToolResult::error(
            "send_gif needs a query: say in a few words what the GIF should show",
        );
    }
    let Some((provider, key)) = gifs.provider() else {
        return ToolResult::error(NO_SERVICE);
    };
    let index = params.index.unwrap_or(0).min(MAX_INDEX);
    let found = tokio::select! {
        found = gifs.search(provider, &key, query, index + 1) => found,
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
    let attachment = Attachment {
        kind: "image".into(),
        url: gif.url.clone(),
        preview: Some(gif.preview.clone()).filter(|p| !p.is_empty() && *p != gif.url),
        width: gif.width,
        height: gif.height,
        bytes: gif.bytes,
        title: title.to_string(),
        attribution: provider.attribution().into(),
        page: Some(gif.page.clone()).filter(|p| !p.is_empty()),
    };
    if let (Some(_), Ok(houses)) = (Seat::of(ctx), Houses::of(ctx)) {
        // In a thread: a message of the bot, which everyone there sees.
        let text = format!(
            "Posted a GIF into this thread: \"{title}\" ({}). People see it now; \
             do not describe or link it again.",
            gif.url
        );
        let mut result = houses.0.post_attachment(ctx, attachment, text).await;
        if let Some(data) = result.data.as_object_mut() {
            data.insert("query".into(), query.into());
            data.insert("index".into(), index.into());
        }
        return result;
    }
    ToolResult::ok_with(
        format!(
            "Sent a GIF to the user: \"{title}\" ({}). They see it as a link; \
             do not describe or link it again.",
            gif.url
        ),
        serde_json::json!({
            "post": attachment,
            "query": query,
            "index": index,
        }),
    )
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
        original: Original,
        #[serde(default)]
        fixed_height_small: Option<Rendition>,
    }
    // Giphy writes its numbers as strings.
    #[derive(Deserialize)]
    struct Original {
        url: String,
        #[serde(default)]
        width: Option<String>,
        #[serde(default)]
        height: Option<String>,
        #[serde(default)]
        size: Option<String>,
    }
    #[derive(Deserialize)]
    struct Rendition {
        url: String,
    }
    let answer: Answer = serde_json::from_str(body)?;
    Ok(answer
        .data
        .into_iter()
        .map(|item| {
            let original = item.images.original;
            Gif {
                preview: item
                    .images
                    .fixed_height_small
                    .map_or_else(|| original.url.clone(), |r| r.url),
                width: original.width.and_then(|w| w.parse().ok()),
                height: original.height.and_then(|h| h.parse().ok()),
                bytes: original.size.and_then(|b| b.parse().ok()),
                url: original.url,
                title: item.title,
                page: item.url,
            }
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
        #[serde(default)]
        dims: Option<(u32, u32)>,
        #[serde(default)]
        size: Option<u64>,
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
            width: item.media_formats.gif.dims.map(|d| d.0),
            height: item.media_formats.gif.dims.map(|d| d.1),
            bytes: item.media_formats.gif.size,
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

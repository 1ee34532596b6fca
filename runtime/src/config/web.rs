//! `[web]`: how the web tools reach the web.
//!
//! `web_fetch` takes addresses from the model, so it refuses every address
//! that is not on the public internet unless the user opens the way on
//! purpose (`allow_private_addresses`, or one address at a time with
//! `allow_addresses`). The search engines' and GIF services' addresses are
//! settings so a proxy, a self-hosted compatible or a test server can stand
//! in for them; their keys come from the environment, never from this file.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[web]`: the web tools' settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Web {
    /// Lets `web_fetch` reach loopback, private, link-local and other
    /// non-public addresses (a LAN service, a local server).
    pub allow_private_addresses: bool,
    /// Non-public addresses `web_fetch` may reach anyway, one by one
    /// (such as a NAS at `192.168.1.20`), with `allow_private_addresses` off.
    pub allow_addresses: Vec<IpAddr>,
    /// Tavily's search endpoint (used when `TAVILY_API_KEY` is set).
    pub tavily_url: String,
    /// Brave Search's web search endpoint (used when `BRAVE_SEARCH_API_KEY`
    /// is set).
    pub brave_url: String,
    /// DuckDuckGo's HTML search page (keyless; the last engine tried).
    pub duckduckgo_url: String,
    /// Giphy's GIF search endpoint (used when `GIPHY_API_KEY` is set).
    pub giphy_url: String,
    /// KLIPY's Tenor-compatible search endpoint (used when `KLIPY_API_KEY`
    /// is set and Giphy has no key).
    pub klipy_url: String,
    /// How long one web request may take, in seconds.
    pub timeout_secs: u64,
}

impl Default for Web {
    fn default() -> Self {
        Self {
            allow_private_addresses: false,
            allow_addresses: Vec::new(),
            tavily_url: "https://api.tavily.com/search".to_owned(),
            brave_url: "https://api.search.brave.com/res/v1/web/search".to_owned(),
            duckduckgo_url: "https://html.duckduckgo.com/html/".to_owned(),
            giphy_url: "https://api.giphy.com/v1/gifs/search".to_owned(),
            klipy_url: "https://api.klipy.com/v2/search".to_owned(),
            timeout_secs: 30,
        }
    }
}

impl Web {
    /// [`Web::timeout_secs`] as a duration (at least a second).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }
}

//! The web: `web_search`, `web_fetch` and `send_gif`.
//!
//! What comes back from the web is written by strangers, so both reading
//! tools hand it to the model inside `<untrusted_tool_result>` blocks
//! ([`untrusted`]): data to weigh, never instructions to follow. `web_fetch`
//! reaches only public addresses ([`guard`]); the search engines and GIF
//! services are the user's own choice of endpoints (`[web]` in
//! `config.toml`) with keys from the environment.

pub mod cache;
pub mod client;
pub mod extract;
pub mod fetch;
pub mod gif;
pub mod guard;
pub mod search;

#[cfg(test)]
pub(crate) mod testserver;

/// How the web tools look up their keys (`TAVILY_API_KEY`, …): the process
/// environment in use, a fixed table in tests.
pub type Env = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The client for the user's configured services (search engines, GIF
/// services): no proxy from the environment, the `[web]` timeout. These
/// addresses are the user's choice, not the model's, so they are not guarded.
pub(crate) fn api_client(timeout: std::time::Duration) -> reqwest::Client {
    troupe_runtime::net::client_builder()
        .no_proxy()
        .timeout(timeout)
        .user_agent(client::USER_AGENT)
        .build()
        .unwrap_or_default()
}

pub use troupe_runtime::tool::untrusted::UNTRUSTED_TAG;

/// Text from the web in an `<untrusted_tool_result>` block
/// ([`troupe_runtime::tool::untrusted::untrusted`]), ending its line: the
/// web tools put blocks one after another.
pub fn untrusted(attrs: &[(&str, &str)], body: &str) -> String {
    let mut block = troupe_runtime::tool::untrusted::untrusted(attrs, body);
    block.push('\n');
    block
}

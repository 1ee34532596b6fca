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

/// The tag around text from the web.
pub const UNTRUSTED_TAG: &str = "untrusted_tool_result";

/// Wraps `body` in an `<untrusted_tool_result>` block with `attrs`. A
/// closing (or opening) tag inside the body is defused, so the page cannot
/// end the block early and speak as troupe.
pub fn untrusted(attrs: &[(&str, &str)], body: &str) -> String {
    let mut open = format!("<{UNTRUSTED_TAG}");
    for (name, value) in attrs {
        let value = value
            .replace('&', "&amp;")
            .replace('"', "&quot;")
            .replace('<', "&lt;");
        open.push_str(&format!(" {name}=\"{value}\""));
    }
    open.push('>');
    let body = defuse(body);
    let newline = if body.ends_with('\n') { "" } else { "\n" };
    format!("{open}\n{body}{newline}</{UNTRUSTED_TAG}>\n")
}

fn defuse(body: &str) -> String {
    if !body.contains(UNTRUSTED_TAG) {
        return body.to_owned();
    }
    body.replace(
        &format!("</{UNTRUSTED_TAG}"),
        &format!("&lt;/{UNTRUSTED_TAG}"),
    )
    .replace(
        &format!("<{UNTRUSTED_TAG}"),
        &format!("&lt;{UNTRUSTED_TAG}"),
    )
}

//! The HTTP side of `web_fetch`: one guarded GET, redirects handled by hand.
//!
//! reqwest follows no redirect here: each hop is looked at. A redirect on
//! the same site (same host, `www.` aside) is followed, at most
//! [`MAX_HOPS`] times, and every hop passes the guard again; a redirect to
//! another site is handed back to the model, which decides whether to read
//! it, unless the guard refuses its target, which is then an error. Bodies
//! are read up to [`MAX_BODY_BYTES`].

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use super::guard::{self, GuardError, GuardedResolver, Lookup, Policy, Refusal};

/// The most same-site redirects followed in one fetch.
pub const MAX_HOPS: usize = 5;
/// The most bytes of one body read; a longer page is cut there.
pub const MAX_BODY_BYTES: usize = 20 * 1024 * 1024;

/// The user agent the web tools send.
pub const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (compatible; troupe/",
    env!("CARGO_PKG_VERSION"),
    "; web_fetch)"
);

/// A response read whole.
#[derive(Debug, Clone)]
pub struct Response {
    /// Where it was read from, after same-site redirects.
    pub url: Url,
    /// Its `Content-Type`, lowercased, without parameters (empty if none).
    pub mime: String,
    /// Its charset parameter, if any.
    pub charset: Option<String>,
    /// Its body.
    pub body: Vec<u8>,
    /// Whether the body was cut at [`MAX_BODY_BYTES`].
    pub cut: bool,
}

/// What a fetch ended with.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A page.
    Page(Response),
    /// A redirect to another site, not followed.
    Redirect {
        /// The address that redirected.
        from: Url,
        /// Where it points.
        to: Url,
        /// The HTTP status.
        status: u16,
    },
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The guard refused the address.
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    /// A redirect pointed somewhere the guard refuses.
    #[error("`{from}` redirects to `{to}`, which is refused: {refusal}")]
    RedirectRefused {
        /// The address that redirected.
        from: String,
        /// Where it pointed.
        to: String,
        /// Why it is refused.
        refusal: Refusal,
    },
    /// The server answered with an error status.
    #[error("`{url}` answered HTTP {status}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Status {
        /// The address.
        url: String,
        /// The status.
        status: u16,
        /// The start of the body, if it was text.
        detail: String,
    },
    /// Too many same-site redirects.
    #[error("`{url}` redirected more than {MAX_HOPS} times; read the last address directly if it is the page you want")]
    TooManyRedirects {
        /// The last address.
        url: String,
    },
    /// The request failed on the way (connection, TLS, timeout, name).
    #[error("fetching `{url}` failed: {reason}")]
    Request {
        /// The address.
        url: String,
        /// Why.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be set up: {0}")]
    Client(String),
}

/// `web_fetch`'s HTTP client: guarded, no proxy, no automatic redirects.
#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    resolver: Arc<GuardedResolver>,
    policy: Policy,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A client that resolves names through `lookup` and connects only to
    /// addresses `policy` allows.
    pub fn new(
        policy: Policy,
        lookup: Arc<dyn Lookup>,
        timeout: Duration,
    ) -> Result<Self, FetchError> {
        let resolver = Arc::new(GuardedResolver::new(lookup, policy.clone()));
        let client = troupe_runtime::net::client_builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::clone(&resolver))
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| FetchError::Client(e.to_string()))?;
        Ok(Self {
            client,
            resolver,
            policy,
        })
    }

    /// GETs `url`, following same-site redirects.
    pub async fn get(&self, url: Url) -> Result<Outcome, FetchError> {
        let mut url = url;
        for _ in 0..=MAX_HOPS {
            guard::check_url(&url, &self.policy)?;
            let response = self
                .client
                .get(url.clone())
                .header(
                    reqwest::header::ACCEPT,
                    "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.8,*/*;q=0.5",
                )
                .send()
                .await
                .map_err(|e| request_error(&url, &e))?;
            let status = response.status();
            if status.is_redirection() {
                let Some(to) = location(&response, &url) else {
                    return Err(FetchError::Status {
                        url: url.to_string(),
                        status: status.as_u16(),
                        detail: "a redirect without a usable Location header".into(),
                    });
                };
                if same_site(&url, &to) {
                    url = to;
                    continue;
                }
                self.check_target(&url, &to).await?;
                return Ok(Outcome::Redirect {
                    from: url,
                    to,
                    status: status.as_u16(),
                });
            }
            let (mime, charset) = content_type(&response);
            let (body, cut) = read_body(response, &url).await?;
            if !status.is_success() {
                let detail = if mime.starts_with("text/") || mime.contains("json") {
                    let text = String::from_utf8_lossy(&body);
                    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
                    text.chars().take(200).collect()
                } else {
                    String::new()
                };
                return Err(FetchError::Status {
                    url: url.to_string(),
                    status: status.as_u16(),
                    detail,
                });
            }
            return Ok(Outcome::Page(Response {
                url,
                mime,
                charset,
                body,
                cut,
            }));
        }
        Err(FetchError::TooManyRedirects {
            url: url.to_string(),
        })
    }

    /// Refuses a cross-site redirect whose target the guard refuses, so a
    /// page cannot hand the model an internal address as "moved here".
    async fn check_target(&self, from: &Url, to: &Url) -> Result<(), FetchError> {
        let refused = |refusal| FetchError::RedirectRefused {
            from: from.to_string(),
            to: to.to_string(),
            refusal,
        };
        guard::check_url(to, &self.policy).map_err(refused)?;
        if let Some(url::Host::Domain(name)) = to.host() {
            match self.resolver.resolve_checked(name).await {
                Ok(_) | Err(GuardError::Lookup { .. }) => {}
                Err(GuardError::Refused(r)) => return Err(refused(r)),
            }
        }
        Ok(())
    }
}

/// Whether a redirect from `a` to `b` stays on the same site: the same host,
/// `www.` aside.
pub fn same_site(a: &Url, b: &Url) -> bool {
    let host = |u: &Url| {
        let h = u.host_str().unwrap_or_default().to_ascii_lowercase();
        h.strip_prefix("www.").map(str::to_owned).unwrap_or(h)
    };
    host(a) == host(b) && matches!(b.scheme(), "http" | "https")
}

fn location(response: &reqwest::Response, base: &Url) -> Option<Url> {
    let value = response
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    base.join(value).ok()
}

fn content_type(response: &reqwest::Response) -> (String, Option<String>) {
    let raw = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut parts = raw.split(';');
    let mime = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("charset")).then(|| v.trim().trim_matches('"').to_owned())
    });
    (mime, charset)
}

async fn read_body(
    mut response: reqwest::Response,
    url: &Url,
) -> Result<(Vec<u8>, bool), FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| request_error(url, &e))? {
        let room = MAX_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A request failure, with the guard's refusal pulled out of reqwest's
/// chain of causes when that is what stopped it.
fn request_error(url: &Url, error: &reqwest::Error) -> FetchError {
    let mut reasons = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(GuardError::Refused(refusal)) = e.downcast_ref::<GuardError>() {
            return FetchError::Refused(refusal.clone());
        }
        let text = e.to_string();
        if !reasons.iter().any(|r: &String| r.contains(&text)) {
            reasons.push(text);
        }
        source = e.source();
    }
    let reason = if error.is_timeout() {
        "it timed out".to_owned()
    } else {
        reasons.join(": ")
    };
    FetchError::Request {
        url: url.to_string(),
        reason,
    }
}

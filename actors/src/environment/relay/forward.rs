//! Forwarding a call to its model's provider: the real key added, the
//! client's headers reduced to those the API reads, and the answer streamed
//! back as it arrives, tallied and bounded in silence.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body_util::{BodyExt, LengthLimitError, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use troupe_runtime::model::limit::DEFAULT_CONCURRENCY;
use troupe_runtime::model::sse::SseParser;
use troupe_runtime::model::{Api, ModelEndpoint, Timeouts};
use troupe_runtime::protocol::Usage;

use super::{Body, Refusal, Relay, Tally, Wire, MAX_BODY};

/// The connection pool of every relay: it follows no redirect (a key is
/// never sent on to where a provider points).
static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| {
    troupe_runtime::net::client_builder()
        .connect_timeout(Timeouts::default().connect)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
});

impl Relay {
    /// Forwards a call to its model's provider and streams the answer back.
    pub(super) async fn forward(
        &self,
        wire: Wire,
        request: Request<Incoming>,
    ) -> Result<Response<Body>, Refusal> {
        let api = wire.api();
        let started = Instant::now();
        let (parts, body) = request.into_parts();
        let mut body = read_json(&parts.headers, body).await?;
        let named = match body.get("model") {
            Some(Value::String(model)) => model.clone(),
            _ => {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    format!("the request names no \"model\"; {}", self.choices()),
                ))
            }
        };
        let offered = self.find(&named)?;
        let endpoint = match (&offered.endpoint, &offered.served) {
            (Ok(endpoint), _) => endpoint,
            (Err(_), Some(provider)) => {
                return self
                    .answer_here(wire, offered, provider, &parts.headers, &body, started)
                    .await
            }
            (Err(why), None) => {
                return Err(Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "model_unavailable",
                    format!("model {} cannot be relayed: {why}", offered.name),
                ))
            }
        };
        if endpoint.api != api {
            let (speaks, path, variable) = match endpoint.api {
                Api::Openai => (
                    "OpenAI chat completions",
                    "/v1/chat/completions",
                    "OPENAI_BASE_URL",
                ),
                Api::Anthropic => ("Anthropic messages", "/v1/messages", "ANTHROPIC_BASE_URL"),
            };
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!(
                    "model {} speaks {speaks}: send it to POST {path} (${variable})",
                    offered.name
                ),
            ));
        }
        body["model"] = Value::String(endpoint.model.clone());
        let base = endpoint.base_url.trim_end_matches('/');
        let url = match wire {
            Wire::Chat => format!("{base}/chat/completions"),
            Wire::Responses => format!("{base}/responses"),
            Wire::Messages => format!("{base}/v1/messages"),
            Wire::CountTokens => format!("{base}/v1/messages/count_tokens"),
        };
        let headers = upstream_headers(api, &parts.headers, endpoint)?;
        let unavailable = || {
            Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "model_unavailable",
                "the relay is stopping".into(),
            )
        };
        let permit = self
            .0
            .limits
            .get(
                &endpoint.base_url,
                endpoint.max_concurrency.unwrap_or(DEFAULT_CONCURRENCY),
            )
            .acquire()
            .await
            .map_err(|_| unavailable())?;
        let send = CLIENT
            .post(&url)
            .headers(headers)
            .body(body.to_string())
            .send();
        let response = match tokio::time::timeout(self.0.timeouts.first_byte, send).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                return Err(Refusal::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    format!(
                        "model {}'s provider could not be reached: {}",
                        offered.name,
                        e.without_url()
                    ),
                ))
            }
            Err(_) => {
                return Err(Refusal::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    format!(
                        "model {}'s provider did not answer within {} s",
                        offered.name,
                        self.0.timeouts.first_byte.as_secs()
                    ),
                ))
            }
        };
        let status = response.status();
        let mut out = Response::builder().status(status);
        for (name, value) in response.headers() {
            if passes_back(name) {
                out = out.header(name, value);
            }
        }
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let tally = Tally {
            origin: self.0.origin.clone(),
            model: offered.name.clone(),
            pricing: endpoint.pricing,
            status: status.as_u16(),
            started,
            sse: streamed.then(SseParser::new),
            whole: Vec::new(),
            usage: Usage::default(),
            bytes: 0,
            ended: "cut short",
        };
        let stream = relayed(
            response.bytes_stream(),
            self.0.timeouts.between_chunks,
            tally,
            permit,
        );
        out.body(StreamBody::new(stream).boxed_unsync())
            .map_err(|e| {
                Refusal::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    format!("the provider's answer could not be passed on: {e}"),
                )
            })
    }
}

/// The request's body, bounded, as a JSON object.
pub(super) async fn read_json(headers: &HeaderMap, body: Incoming) -> Result<Value, Refusal> {
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!(
                "the request body is over the relay's limit of {} MiB",
                MAX_BODY / (1024 * 1024)
            ),
        )
    };
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large()),
        Err(e) => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("the request body could not be read: {e}"),
            ))
        }
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "the request body is JSON but not an object; send an object naming a \"model\"".into(),
        )),
        Err(e) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!("the request body is not JSON ({e}); send an object naming a \"model\""),
        )),
    }
}

/// The headers sent to the provider: the few the API reads from the
/// client, and the real key. Nothing else of the request passes.
pub(super) fn upstream_headers(
    api: Api,
    incoming: &HeaderMap,
    endpoint: &ModelEndpoint,
) -> Result<HeaderMap, Refusal> {
    let bad_key = || {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "model_unavailable",
            "the model's key is not a valid header value; the house's owner must fix it".into(),
        )
    };
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(accept) = incoming.get(ACCEPT) {
        headers.insert(ACCEPT, accept.clone());
    }
    match api {
        Api::Openai => {
            if let Some(key) = &endpoint.api_key {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| bad_key())?;
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
            }
        }
        Api::Anthropic => {
            let version = HeaderName::from_static("anthropic-version");
            let beta = HeaderName::from_static("anthropic-beta");
            let given = incoming.get(&version).cloned().unwrap_or_else(|| {
                HeaderValue::from_static(troupe_runtime::model::anthropic::API_VERSION)
            });
            headers.insert(version, given);
            if let Some(value) = incoming.get(&beta) {
                headers.insert(beta, value.clone());
            }
            if let Some(key) = &endpoint.api_key {
                let mut value = HeaderValue::from_str(key).map_err(|_| bad_key())?;
                value.set_sensitive(true);
                headers.insert(HeaderName::from_static("x-api-key"), value);
            }
        }
    }
    Ok(headers)
}

/// Whether a provider's response header is passed back to the client.
fn passes_back(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "content-type" | "cache-control" | "retry-after" | "request-id" | "x-request-id"
    ) || name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
}

/// The provider's body as the client's: each piece passed on as it comes,
/// tallied, the endpoint's permit held until it ends or is dropped. A
/// provider that breaks off or falls silent too long breaks the client's
/// response off too (it is not ended as if complete).
fn relayed(
    upstream: impl Stream<Item = reqwest::Result<Bytes>> + Send + Unpin + 'static,
    silence: Duration,
    tally: Tally,
    permit: OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some((upstream, tally, permit)), move |state| async move {
        let (mut upstream, mut tally, permit) = state?;
        match tokio::time::timeout(silence, upstream.next()).await {
            Ok(Some(Ok(bytes))) => {
                tally.push(&bytes);
                Some((Ok(Frame::data(bytes)), Some((upstream, tally, permit))))
            }
            Ok(None) => {
                tally.finish();
                None
            }
            Ok(Some(Err(e))) => {
                tally.ended = "broken off by the provider";
                Some((Err(std::io::Error::other(e.without_url())), None))
            }
            Err(_) => {
                tally.ended = "the provider fell silent";
                let why = format!("the provider sent nothing for {} s", silence.as_secs());
                Some((
                    Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why)),
                    None,
                ))
            }
        }
    })
}

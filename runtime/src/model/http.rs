//! One streamed HTTP model call, with its retries, timeouts and permit.
//!
//! Both clients hand this module a finished request body and a decoder for
//! their SSE dialect; it does the rest the same way for both. The call runs in
//! its own task that holds the endpoint's concurrency permit until the stream
//! ends or the consumer drops it, and feeds events through a small channel.
//! A failure before the response (refused connection, timeout, retryable
//! status) is retried by [`RetryPolicy`]; a stream that breaks midway is
//! retried from scratch only while nothing the consumer would act on (text or
//! a tool call) has been passed on, because a second answer cannot be spliced
//! onto half of a first one.
//!
//! A 200 is read by what its body is, not only what the request asked for
//! (see [`super::answer`]): an event stream, a whole JSON answer, an error
//! object, or something else — a protocol error that is never retried. Each
//! failure's class and retry rule is [`super::ErrorClass`].

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use tokio::sync::mpsc;

use super::answer::{bad_json, error_object, not_the_api, Declared, MAX_WHOLE_BYTES};
use super::limit::{ConcurrencyLimit, DEFAULT_CONCURRENCY};
use super::retry::{decide, Caller, Decision, RetryPolicy, Timeouts};
use super::sse::{SseEvent, SseParser};
use super::{ModelError, ModelEvent, ModelStream};

/// How a client talks HTTP: the shared connection pool, retries, timeouts
/// and the endpoint's concurrency cap.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The connection pool (clones share it).
    pub client: reqwest::Client,
    /// When and how long to retry.
    pub retry: RetryPolicy,
    /// Per-attempt limits.
    pub timeouts: Timeouts,
    /// The endpoint's concurrency cap.
    pub limit: ConcurrencyLimit,
}

impl HttpOptions {
    /// Options with a fresh client built for `timeouts`, and a private cap.
    pub fn new(retry: RetryPolicy, timeouts: Timeouts, limit: ConcurrencyLimit) -> Self {
        Self {
            client: build_client(&timeouts),
            retry,
            timeouts,
            limit,
        }
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self::new(
            RetryPolicy::default(),
            Timeouts::default(),
            ConcurrencyLimit::new(DEFAULT_CONCURRENCY),
        )
    }
}

/// A client with the connect timeout set (the others are applied per read).
pub fn build_client(timeouts: &Timeouts) -> reqwest::Client {
    crate::net::client_builder()
        .connect_timeout(timeouts.connect)
        .build()
        .unwrap_or_default()
}

/// A provider's stream dialect: SSE events in, model events out.
pub(crate) trait Decoder: Send + 'static {
    /// Decodes one SSE event.
    fn event(&mut self, event: &SseEvent) -> Result<Vec<ModelEvent>, ModelError>;
    /// Whether the response's end marker has been seen.
    fn is_done(&self) -> bool;
    /// The body ended without the end marker: the events that still follow,
    /// or why the stream counts as broken.
    fn at_end(&mut self) -> Result<Vec<ModelEvent>, ModelError>;
    /// Decodes a whole, non-streamed answer (the API's non-streaming
    /// response shape) into the events a stream of it would have given.
    fn whole(&mut self, answer: &serde_json::Value) -> Result<Vec<ModelEvent>, ModelError>;
}

/// One request, ready to send as many times as needed.
pub(crate) struct Call {
    pub caller: Caller,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Call {
    /// A streamed JSON call of `caller`'s API: `body` posted to `url`,
    /// asking for an event stream, with `headers` besides and the key as
    /// the header `auth` names (`key` written as it goes there; none for a
    /// keyless endpoint). A key that cannot go in a header is a
    /// configuration error naming its variable.
    pub(crate) fn streamed_json(
        caller: Caller,
        url: String,
        body: &serde_json::Value,
        headers: &[(HeaderName, HeaderValue)],
        auth: Option<(HeaderName, String)>,
    ) -> Result<Self, ModelError> {
        let body = serde_json::to_vec(body)
            .map_err(|err| ModelError::Config(format!("cannot encode the request: {err}")))?;
        let mut all = HeaderMap::new();
        all.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        all.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        for (name, value) in headers {
            all.insert(name.clone(), value.clone());
        }
        if let Some((name, key)) = auth {
            let value = HeaderValue::from_str(&key).map_err(|_| {
                ModelError::Config(format!(
                    "{} holds characters that cannot go in an HTTP header",
                    caller.key_var
                ))
            })?;
            all.insert(name, value);
        }
        Ok(Self {
            caller,
            url,
            headers: all,
            body: Bytes::from(body),
        })
    }
}

/// Starts the call in its own task and returns its event stream.
pub(crate) fn start<D, F>(http: HttpOptions, call: Call, decoder: F) -> ModelStream
where
    D: Decoder,
    F: Fn() -> D + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        // Stop at once when the consumer drops the stream, even while
        // waiting for a permit or on the network, so the permit goes back
        // promptly.
        tokio::select! {
            () = tx.closed() => {}
            () = run(&http, &call, &decoder, &tx) => {}
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Takes a permit, then tries the call until it finishes, fails or runs out
/// of attempts; the permit is held throughout.
async fn run<D, F>(http: &HttpOptions, call: &Call, decoder: &F, tx: &Sender)
where
    D: Decoder,
    F: Fn() -> D,
{
    let _permit = match http.limit.acquire().await {
        Ok(permit) => permit,
        Err(err) => {
            let _ = tx
                .send(Err(ModelError::Connection {
                    provider: call.caller.provider.clone(),
                    message: format!("concurrency cap closed: {err}"),
                }))
                .await;
            return;
        }
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        match attempt_once(http, call, decoder(), tx, attempt).await {
            Outcome::Finished => return,
            Outcome::Retry(delay) => {
                tracing::debug!(provider = %call.caller.provider, attempt, ?delay, "retrying model call");
                tokio::time::sleep(delay).await;
            }
            Outcome::Fail(err) => {
                let _ = tx.send(Err(err)).await;
                return;
            }
        }
    }
}

enum Outcome {
    /// Done, or the consumer went away.
    Finished,
    Retry(Duration),
    Fail(ModelError),
}

type Sender = mpsc::Sender<Result<ModelEvent, ModelError>>;

async fn attempt_once<D: Decoder>(
    http: &HttpOptions,
    call: &Call,
    mut decoder: D,
    tx: &Sender,
    attempt: u32,
) -> Outcome {
    let provider = &call.caller.provider;
    let policy = &http.retry;
    // A failure before anything reached the consumer may be retried.
    let retry_or_fail = |err: ModelError, shown: bool| {
        if !shown && attempt < policy.max_attempts {
            Outcome::Retry(policy.backoff(attempt))
        } else {
            Outcome::Fail(err)
        }
    };
    let request = http
        .client
        .post(&call.url)
        .headers(call.headers.clone())
        .body(call.body.clone())
        .send();
    let response = match tokio::time::timeout(http.timeouts.first_byte, request).await {
        Err(_) => {
            return retry_or_fail(
                timeout(
                    provider,
                    "waiting for the first byte",
                    http.timeouts.first_byte,
                ),
                false,
            )
        }
        Ok(Err(err)) if err.is_connect() && err.is_timeout() => {
            return retry_or_fail(
                timeout(provider, "connecting", http.timeouts.connect),
                false,
            )
        }
        Ok(Err(err)) => return retry_or_fail(connection(provider, &err), false),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        let headers = response.headers().clone();
        let body = match tokio::time::timeout(http.timeouts.between_chunks, response.text()).await {
            Ok(Ok(body)) => body,
            Ok(Err(err)) => err.to_string(),
            Err(_) => "(the error body did not arrive in time)".to_string(),
        };
        return match decide(
            &call.caller,
            policy,
            status.as_u16(),
            &headers,
            &body,
            attempt,
        ) {
            Decision::Retry(delay) => Outcome::Retry(delay),
            Decision::Fail(err) => Outcome::Fail(err),
        };
    }

    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut body: Body = Box::pin(response.bytes_stream());
    let read = Reader {
        provider,
        between_chunks: http.timeouts.between_chunks,
    };
    if Declared::of(&content_type) == Declared::Json {
        let bytes = match read.whole(&mut body, Vec::new()).await {
            Ok(bytes) => bytes,
            Err(err) => return retry_or_fail(err, false),
        };
        return whole_answer(
            &mut decoder,
            &bytes,
            &content_type,
            tx,
            provider,
            &retry_or_fail,
        )
        .await;
    }

    let mut parser = SseParser::new();
    let mut shown = false;
    let mut events_seen = false;
    // While no event has arrived, the raw body is kept: it may be a whole
    // answer or a page sent with the wrong content type.
    let mut raw = Vec::new();
    loop {
        let sse_events = match read.next(&mut body).await {
            Err(err) => return retry_or_fail(err, shown),
            Ok(Some(bytes)) => {
                if !events_seen {
                    raw.extend_from_slice(&bytes);
                }
                let events = parser.push(&bytes);
                if let Some(err) = stray_error(provider, parser.take_stray()) {
                    return retry_or_fail_content(err, shown, &retry_or_fail);
                }
                events
            }
            Ok(None) => {
                let last: Vec<SseEvent> = parser.finish().into_iter().collect();
                if !events_seen && last.is_empty() {
                    return whole_answer(
                        &mut decoder,
                        &raw,
                        &content_type,
                        tx,
                        provider,
                        &retry_or_fail,
                    )
                    .await;
                }
                if let Some(outcome) =
                    pass_on(&mut decoder, &last, tx, &mut shown, &retry_or_fail).await
                {
                    return outcome;
                }
                if decoder.is_done() {
                    return Outcome::Finished;
                }
                return match decoder.at_end() {
                    Ok(events) => {
                        for event in events {
                            if tx.send(Ok(event)).await.is_err() {
                                break;
                            }
                        }
                        Outcome::Finished
                    }
                    Err(err) => retry_or_fail(err, shown),
                };
            }
        };
        if !sse_events.is_empty() && !events_seen {
            events_seen = true;
            raw = Vec::new();
        } else if !events_seen && raw.len() > MAX_WHOLE_BYTES {
            return Outcome::Fail(not_the_api(provider, &content_type, &raw));
        }
        if let Some(outcome) =
            pass_on(&mut decoder, &sse_events, tx, &mut shown, &retry_or_fail).await
        {
            return outcome;
        }
        if decoder.is_done() {
            return Outcome::Finished;
        }
    }
}

type Body = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// Reads a body piece by piece under the between-chunks limit.
struct Reader<'a> {
    provider: &'a str,
    between_chunks: Duration,
}

impl Reader<'_> {
    async fn next(&self, body: &mut Body) -> Result<Option<Bytes>, ModelError> {
        match tokio::time::timeout(self.between_chunks, body.next()).await {
            Err(_) => Err(timeout(
                self.provider,
                "between chunks",
                self.between_chunks,
            )),
            Ok(Some(Err(err))) => Err(connection(self.provider, &err)),
            Ok(Some(Ok(bytes))) => Ok(Some(bytes)),
            Ok(None) => Ok(None),
        }
    }

    /// The rest of the body after `prefix`, bounded by [`MAX_WHOLE_BYTES`].
    async fn whole(&self, body: &mut Body, mut prefix: Vec<u8>) -> Result<Vec<u8>, ModelError> {
        while let Some(bytes) = self.next(body).await? {
            prefix.extend_from_slice(&bytes);
            if prefix.len() > MAX_WHOLE_BYTES {
                return Err(ModelError::Malformed {
                    provider: self.provider.to_string(),
                    message: format!(
                        "a whole (non-streamed) answer is larger than {} MiB",
                        MAX_WHOLE_BYTES / (1024 * 1024)
                    ),
                });
            }
        }
        Ok(prefix)
    }
}

/// A body that is one whole answer (JSON), an API error object, or not the
/// API at all.
async fn whole_answer<D: Decoder>(
    decoder: &mut D,
    bytes: &[u8],
    content_type: &str,
    tx: &Sender,
    provider: &str,
    retry_or_fail: &impl Fn(ModelError, bool) -> Outcome,
) -> Outcome {
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(err) if Declared::of(content_type) == Declared::Json => {
            return Outcome::Fail(bad_json(provider, &err, bytes))
        }
        Err(_) => return Outcome::Fail(not_the_api(provider, content_type, bytes)),
    };
    if let Some(err) = error_object(provider, &value) {
        return retry_or_fail_content(err, false, retry_or_fail);
    }
    match decoder.whole(&value) {
        Ok(events) => {
            for event in events {
                if tx.send(Ok(event)).await.is_err() {
                    break;
                }
            }
            Outcome::Finished
        }
        Err(err) => Outcome::Fail(err),
    }
}

/// A bare JSON error object among the stream's lines, if there is one.
fn stray_error(provider: &str, stray: Vec<String>) -> Option<ModelError> {
    stray.iter().find_map(|line| {
        let value: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        error_object(provider, &value)
    })
}

/// A content error is retried only when a fresh attempt may not meet it.
fn retry_or_fail_content(
    err: ModelError,
    shown: bool,
    retry_or_fail: &impl Fn(ModelError, bool) -> Outcome,
) -> Outcome {
    if err.retryable() {
        retry_or_fail(err, shown)
    } else {
        Outcome::Fail(err)
    }
}

/// Decodes and forwards events; `Some` ends the attempt.
async fn pass_on<D: Decoder>(
    decoder: &mut D,
    sse_events: &[SseEvent],
    tx: &Sender,
    shown: &mut bool,
    retry_or_fail: &impl Fn(ModelError, bool) -> Outcome,
) -> Option<Outcome> {
    for sse in sse_events {
        if decoder.is_done() {
            break;
        }
        let events = match decoder.event(sse) {
            Ok(events) => events,
            Err(err @ ModelError::Api { .. }) => {
                return Some(retry_or_fail_content(err, *shown, retry_or_fail))
            }
            Err(err) => return Some(Outcome::Fail(err)),
        };
        for event in events {
            *shown |= matches!(
                event,
                ModelEvent::TextDelta { .. }
                    | ModelEvent::ToolCallStarted { .. }
                    | ModelEvent::ToolCallDelta { .. }
                    | ModelEvent::ToolCallCompleted { .. }
            );
            if tx.send(Ok(event)).await.is_err() {
                return Some(Outcome::Finished);
            }
        }
    }
    None
}

fn timeout(provider: &str, phase: &str, limit: Duration) -> ModelError {
    ModelError::Timeout {
        provider: provider.to_string(),
        phase: phase.to_string(),
        secs: limit.as_secs(),
    }
}

fn connection(provider: &str, err: &reqwest::Error) -> ModelError {
    use std::error::Error as _;
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ModelError::Connection {
        provider: provider.to_string(),
        message,
    }
}

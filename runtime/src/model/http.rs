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

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::HeaderMap;
use tokio::sync::mpsc;

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
}

/// One request, ready to send as many times as needed.
pub(crate) struct Call {
    pub caller: Caller,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Bytes,
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

    let mut body = response.bytes_stream();
    let mut parser = SseParser::new();
    let mut shown = false;
    loop {
        let next = tokio::time::timeout(http.timeouts.between_chunks, body.next()).await;
        let sse_events = match next {
            Err(_) => {
                let err = timeout(provider, "between chunks", http.timeouts.between_chunks);
                return retry_or_fail(err, shown);
            }
            Ok(Some(Err(err))) => return retry_or_fail(connection(provider, &err), shown),
            Ok(Some(Ok(bytes))) => parser.push(&bytes),
            Ok(None) => {
                let last: Vec<SseEvent> = parser.finish().into_iter().collect();
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
            Err(err @ ModelError::Api { .. }) if retryable_api_error(&err) => {
                return Some(retry_or_fail(err, *shown))
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

/// An error event that a fresh attempt may not meet (overload, server fault).
fn retryable_api_error(err: &ModelError) -> bool {
    match err {
        ModelError::Api { kind, .. } => {
            matches!(
                kind.as_str(),
                "overloaded_error" | "api_error" | "server_error"
            )
        }
        _ => false,
    }
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

//! Calls to a model troupe runs in-process, with no address (a script
//! above all): answered here in the wire format they came in.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::Value;
use troupe_runtime::model::{Pricing, Provider};
use troupe_runtime::protocol::Usage;

use super::{anthropic, responses, served, whole, Body, Offered, Refusal, Relay, Tally, Wire};

impl Relay {
    /// Answers a call to a model with no address from its provider here,
    /// in the wire format it came in.
    pub(super) async fn answer_here(
        &self,
        wire: Wire,
        offered: &Offered,
        provider: &Arc<dyn Provider>,
        headers: &HeaderMap,
        body: &Value,
        started: Instant,
    ) -> Result<Response<Body>, Refusal> {
        let provider = match headers.get(served::EXECUTOR_HEADER) {
            None => Arc::clone(provider),
            Some(value) => {
                let executor = value.to_str().unwrap_or_default().trim();
                match provider.for_executor(executor) {
                    Some(own) => own,
                    None if provider.name() == "script" => {
                        return Err(Refusal::new(
                            StatusCode::BAD_REQUEST,
                            "invalid_request_error",
                            format!(
                                "script {} has no turns for executor {executor}; add an \
                                 `executors.{executor}.turns` section to it",
                                offered.name
                            ),
                        ))
                    }
                    None => Arc::clone(provider),
                }
            }
        };
        let mut tally = Tally {
            origin: self.0.origin.clone(),
            model: offered.name.clone(),
            pricing: Pricing::default(),
            status: StatusCode::OK.as_u16(),
            started,
            sse: None,
            whole: Vec::new(),
            usage: Usage::default(),
            bytes: 0,
            ended: "cut short",
        };
        let (request, stream) = match wire {
            Wire::Chat => {
                let chat = served::chat_request(body, &offered.name)?;
                (chat.request, chat.stream)
            }
            Wire::Messages => anthropic::request(body, &offered.name)?,
            Wire::Responses => responses::request(body, &offered.name)?,
            Wire::CountTokens => {
                tally.ended = "complete";
                return Ok(whole(StatusCode::OK, &anthropic::count_tokens(body)));
            }
        };
        let events = provider
            .stream(request)
            .await
            .map_err(|e| served::refusal(&e))?;
        if wire != Wire::Chat {
            let gathered = match served::gather(events).await {
                Ok(gathered) => gathered,
                Err(e) => {
                    let refusal = served::refusal(&e);
                    tally.status = refusal.status.as_u16();
                    tally.ended = "the model failed";
                    return Err(refusal);
                }
            };
            tally.usage = gathered.usage.unwrap_or_default();
            tally.ended = "complete";
            let answer = match wire {
                Wire::Messages => anthropic::answer(&gathered, &offered.name),
                _ => responses::answer(&gathered, &offered.name),
            };
            return Ok(if stream {
                served::event_stream(&answer.events)
            } else {
                whole(StatusCode::OK, &answer.whole)
            });
        }
        let mut answer = served::Answer::new(&offered.name);
        if stream {
            let mut response = Response::new(
                StreamBody::new(served::chunks(events, answer, tally)).boxed_unsync(),
            );
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            headers.insert(
                hyper::header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            );
            return Ok(response);
        }
        let mut events = events;
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    answer.event(event);
                }
                Err(e) => {
                    let refusal = served::refusal(&e);
                    tally.status = refusal.status.as_u16();
                    tally.ended = "the model failed";
                    return Err(refusal);
                }
            }
        }
        let whole_answer = answer.whole();
        tally.usage = answer.usage().unwrap_or_default();
        tally.ended = "complete";
        Ok(whole(StatusCode::OK, &whole_answer))
    }
}

//! A relayed call's account: the usage its answer reports, and one log line
//! when it ends, however it ends.

use std::time::Instant;

use serde_json::Value;
use troupe_runtime::model::sse::SseParser;
use troupe_runtime::model::Pricing;
use troupe_runtime::protocol::Usage;

use super::MAX_BODY;

/// The largest whole (not streamed) answer read for its usage.
const MAX_TALLIED: usize = MAX_BODY;

/// A relayed call's account: its answer's usage, logged when it ends.
pub(super) struct Tally {
    pub(super) origin: String,
    pub(super) model: String,
    pub(super) pricing: Pricing,
    pub(super) status: u16,
    pub(super) started: Instant,
    /// An event stream's parser; `None` for a whole answer.
    pub(super) sse: Option<SseParser>,
    /// A whole answer, read for its usage at the end.
    pub(super) whole: Vec<u8>,
    pub(super) usage: Usage,
    pub(super) bytes: u64,
    pub(super) ended: &'static str,
}

impl Tally {
    /// Tallies one piece of the answer as it passes.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        match &mut self.sse {
            Some(parser) => {
                for event in parser.push(bytes) {
                    if let Ok(value) = serde_json::from_str::<Value>(&event.data) {
                        read_usage(&value, &mut self.usage);
                    }
                }
            }
            None if self.whole.len() + bytes.len() <= MAX_TALLIED => {
                self.whole.extend_from_slice(bytes);
            }
            None => {}
        }
    }

    /// The answer ended whole.
    pub(super) fn finish(&mut self) {
        if self.sse.is_none() {
            if let Ok(value) = serde_json::from_slice::<Value>(&self.whole) {
                read_usage(&value, &mut self.usage);
            }
        }
        self.ended = "complete";
    }
}

impl Drop for Tally {
    /// Every call is accounted for, a client that went away included.
    fn drop(&mut self) {
        let usage = &self.usage;
        tracing::info!(
            origin = %self.origin,
            model = %self.model,
            status = self.status,
            ended = self.ended,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            cache_read_tokens = usage.cache_read_tokens,
            cache_write_tokens = usage.cache_write_tokens,
            cost_usd = self.pricing.cost(usage),
            bytes = self.bytes,
            millis = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "model call relayed"
        );
    }
}

/// Reads the usage in one answer or stream event into `usage`: OpenAI's
/// (`usage.prompt_tokens`, …) or Anthropic's (`usage` or
/// `message.usage`, running totals: the latest wins).
pub(super) fn read_usage(value: &Value, usage: &mut Usage) {
    let found = value
        .get("usage")
        .or_else(|| value.get("message").and_then(|m| m.get("usage")))
        .filter(|u| u.is_object());
    let Some(reported) = found else {
        return;
    };
    let count = |key: &str| reported.get(key).and_then(Value::as_u64);
    if let Some(prompt) = count("prompt_tokens") {
        let cached = reported["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        usage.input_tokens = prompt.saturating_sub(cached);
        usage.cache_read_tokens = cached;
    }
    if let Some(n) = count("completion_tokens") {
        usage.output_tokens = n;
    }
    if let Some(n) = count("input_tokens") {
        usage.input_tokens = n;
    }
    if let Some(n) = count("output_tokens") {
        usage.output_tokens = n;
    }
    if let Some(n) = count("cache_read_input_tokens") {
        usage.cache_read_tokens = n;
    }
    if let Some(n) = count("cache_creation_input_tokens") {
        usage.cache_write_tokens = n;
    }
}

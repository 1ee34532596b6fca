//! When to try a model call again, and how long to wait first.
//!
//! Both HTTP clients share these rules, so a provider's overload, a rate
//! limit or a dropped connection is handled the same way everywhere: 408, 409,
//! 429, 5xx and 529 are retried; the server's `retry-after-ms` or
//! `retry-after` is honoured (capped); otherwise the wait grows exponentially
//! with jitter; `x-should-retry` overrides the table. Two failures are never
//! retried because waiting cannot fix them: a refused key (401/403) and an
//! exhausted quota (a 429 whose body says so).

use std::time::Duration;

use reqwest::header::HeaderMap;

use super::ModelError;

/// How many times to try and how long to wait between tries.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The first backoff; each further one doubles it.
    pub base_delay: Duration,
    /// The longest computed backoff.
    pub max_delay: Duration,
    /// The longest wait a server's `retry-after` may ask for.
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The exponential backoff before attempt `attempt + 1` (attempt counts
    /// from 1), with jitter taking off up to a quarter.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        let jitter: f64 = rand::random_range(0.75..=1.0);
        full.mul_f64(jitter)
    }

    /// The wait the server asked for: `retry-after-ms`, then `retry-after` in
    /// seconds or as an HTTP date; capped by `retry_after_cap`.
    pub fn server_delay(&self, headers: &HeaderMap) -> Option<Duration> {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let asked = if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
            Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        } else if let Some(value) = text("retry-after") {
            parse_retry_after(value, chrono::Utc::now())
        } else {
            None
        }?;
        Some(asked.min(self.retry_after_cap))
    }
}

/// Parses a `retry-after` value: seconds, or an HTTP date (relative to `now`).
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = when.with_timezone(&chrono::Utc) - now;
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// Connect, first-byte and between-chunk limits of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening the connection.
    pub connect: Duration,
    /// From sending the request to the response's status line.
    pub first_byte: Duration,
    /// Silence allowed between two pieces of a streamed body.
    pub between_chunks: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            between_chunks: Duration::from_secs(120),
        }
    }
}

/// What to do after an HTTP error status.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Wait this long and try again.
    Retry(Duration),
    /// Give up with this error.
    Fail(ModelError),
}

/// Who is being called, for the errors' wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The provider's short name (`openai`, `anthropic`).
    pub provider: String,
    /// The variable holding the key, named when the key is refused.
    pub key_var: String,
}

/// Decides what an error status means after `attempt` attempts (from 1).
pub fn decide(
    caller: &Caller,
    policy: &RetryPolicy,
    status: u16,
    headers: &HeaderMap,
    body: &str,
    attempt: u32,
) -> Decision {
    let message = error_message(body);
    let provider = caller.provider.clone();
    if status == 401 || status == 403 {
        return Decision::Fail(ModelError::Auth {
            provider,
            message,
            key_var: caller.key_var.clone(),
        });
    }
    if status == 429 && quota_exhausted(body) {
        return Decision::Fail(ModelError::QuotaExhausted { provider, message });
    }
    let should_retry = match headers.get("x-should-retry").and_then(|v| v.to_str().ok()) {
        Some("true") => true,
        Some("false") => false,
        _ => matches!(status, 408 | 409 | 429 | 500..=599),
    };
    if should_retry && attempt < policy.max_attempts {
        let delay = policy
            .server_delay(headers)
            .unwrap_or_else(|| policy.backoff(attempt));
        return Decision::Retry(delay);
    }
    Decision::Fail(if status == 429 {
        ModelError::RateLimited {
            provider,
            message,
            attempts: attempt,
        }
    } else {
        ModelError::Http {
            provider,
            status,
            message,
        }
    })
}

/// Whether a 429's body says the account's quota or billing is exhausted.
fn quota_exhausted(body: &str) -> bool {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(body) {
        let error = &json["error"];
        for field in ["code", "type"] {
            if error[field].as_str() == Some("insufficient_quota") {
                return true;
            }
        }
    }
    let lower = body.to_lowercase();
    lower.contains("quota") || lower.contains("billing")
}

/// The provider's own message from an error body: OpenAI's and Anthropic's
/// `{"error": {"message": …}}`, else the body itself (shortened).
pub fn error_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(body) {
        let error = &json["error"];
        if let Some(message) = error["message"].as_str().or(error.as_str()) {
            return match error["type"].as_str().or(error["code"].as_str()) {
                Some(kind) => format!("{message} ({kind})"),
                None => message.to_string(),
            };
        }
        if let Some(message) = json["message"].as_str().or(json["detail"].as_str()) {
            return message.to_string();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".to_string();
    }
    let mut end = body.len().min(500);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].to_string()
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;

//! Telling a plan's usage limit from any other failed model call.
//!
//! Each harness reports an account at its limit in its own words: the
//! ChatGPT backend Codex signs in to answers `429` with `{"error": {"type":
//! "usage_limit_reached", "resets_at": …}}`, Anthropic's with a
//! `rate_limit_error`, Claude Code ends its task with `Claude AI usage limit
//! reached|<reset time>`, and pi passes the provider's error on. A harness
//! that ran into its limit is not a failed task: troupe marks the account
//! at its limit (with its reset time when one is said) and the task can go
//! on on another account.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The state of a plan's limits, as Claude Code's `rate_limit_event` says
/// it (`rate_limit_info`: `status` `allowed`, `allowed_warning` or
/// `rejected`; `rateLimitType` the window — `five_hour`, `seven_day`,
/// `seven_day_opus`, `seven_day_sonnet`, `overage`, …; `resetsAt` in Unix
/// seconds; `utilization` the fraction of the window used).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// `allowed`, `allowed_warning` or `rejected`.
    pub status: String,
    /// The window it is about, if said.
    pub window: Option<String>,
    /// When that window resets (Unix seconds), if said.
    pub resets_at: Option<i64>,
    /// The fraction of the window used, if said.
    pub utilization: Option<f64>,
}

impl RateLimit {
    /// Reads a `rate_limit_info` object.
    pub fn of(info: &Value) -> Option<Self> {
        Some(Self {
            status: info["status"].as_str()?.to_string(),
            window: info["rateLimitType"].as_str().map(str::to_string),
            resets_at: info["resetsAt"].as_i64(),
            utilization: info["utilization"].as_f64(),
        })
    }

    /// Whether the account is at this limit now (its calls are refused).
    pub fn rejected(&self) -> bool {
        self.status == "rejected"
    }

    /// The state in words, for the record and the accounts' view.
    pub fn describe(&self) -> String {
        let window = self.window.as_deref().unwrap_or("plan");
        let used = self
            .utilization
            .map(|u| format!(", {:.0}% used", u * 100.0))
            .unwrap_or_default();
        let state = match self.status.as_str() {
            "rejected" => "limit reached",
            "allowed_warning" => "limit near",
            _ => "within its limit",
        };
        format!("Claude Code's {window} {state}{used} (rate_limit_event)")
    }
}

/// A usage limit a harness reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLimit {
    /// What it said, on one line, bounded.
    pub why: String,
    /// When it resets (Unix seconds), when it said.
    pub resets_at: Option<i64>,
}

/// The words that mark a usage or rate limit in an error's text.
const MARKS: &[&str] = &[
    "usage_limit_reached",
    "usage limit",
    "rate_limit_error",
    "rate limit",
    "limit reached",
    "quota exceeded",
    "insufficient_quota",
];

/// The limit `error` reports, if it is one, read at `now`.
pub fn usage_limit(error: &str, now: DateTime<Utc>) -> Option<UsageLimit> {
    let lower = error.to_ascii_lowercase();
    if !MARKS.iter().any(|m| lower.contains(m)) {
        return None;
    }
    let resets_at = json_reset(error, now).or_else(|| pipe_reset(error));
    let why: String = error
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("usage limit reached")
        .chars()
        .take(300)
        .collect();
    Some(UsageLimit { why, resets_at })
}

/// `resets_at` (Unix seconds) or `resets_in_seconds` in the first JSON
/// object of the text, at any depth.
fn json_reset(text: &str, now: DateTime<Utc>) -> Option<i64> {
    let start = text.find('{')?;
    let value: serde_json::Value = serde_json::Deserializer::from_str(&text[start..])
        .into_iter()
        .next()?
        .ok()?;
    fn find(v: &serde_json::Value, now: i64) -> Option<i64> {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(at) = map.get("resets_at").and_then(serde_json::Value::as_i64) {
                    return Some(at);
                }
                if let Some(s) = map
                    .get("resets_in_seconds")
                    .and_then(serde_json::Value::as_i64)
                {
                    return Some(now + s);
                }
                map.values().find_map(|v| find(v, now))
            }
            serde_json::Value::Array(items) => items.iter().find_map(|v| find(v, now)),
            _ => None,
        }
    }
    find(&value, now.timestamp())
}

/// Claude Code's `…usage limit reached|1735689600`.
fn pipe_reset(text: &str) -> Option<i64> {
    let (_, tail) = text.rsplit_once('|')?;
    let digits: String = tail
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|t: &i64| *t > 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    #[test]
    fn each_harness_words_for_its_limit_are_read_with_their_reset_time() {
        let codex = r#"429 {"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":1800003600}}"#;
        assert_eq!(
            usage_limit(codex, now()).unwrap().resets_at,
            Some(1_800_003_600)
        );
        let within = r#"429 {"error":{"type":"usage_limit_reached","resets_in_seconds":60}}"#;
        assert_eq!(
            usage_limit(within, now()).unwrap().resets_at,
            Some(1_800_000_060)
        );
        let claude = "Claude AI usage limit reached|1800007200";
        assert_eq!(
            usage_limit(claude, now()).unwrap(),
            UsageLimit {
                why: claude.into(),
                resets_at: Some(1_800_007_200)
            }
        );
        let anthropic =
            r#"429 {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
        assert_eq!(usage_limit(anthropic, now()).unwrap().resets_at, None);
    }

    #[test]
    fn another_failure_is_no_limit() {
        assert_eq!(usage_limit("500 internal server error", now()), None);
        assert_eq!(usage_limit("connection refused", now()), None);
    }
}

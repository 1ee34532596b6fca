use std::time::Duration;

use pretty_assertions::assert_eq;
use reqwest::header::{HeaderMap, HeaderValue};

use super::*;

fn caller() -> Caller {
    Caller {
        provider: "openai".into(),
        key_var: "OPENAI_API_KEY".into(),
    }
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_static(value));
    }
    map
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(250),
        retry_after_cap: Duration::from_secs(60),
    }
}

#[test]
fn retry_after_is_read_in_ms_then_seconds_then_http_date_and_capped() {
    let p = policy();
    assert_eq!(
        p.server_delay(&headers(&[
            ("retry-after-ms", "1500"),
            ("retry-after", "9")
        ])),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        p.server_delay(&headers(&[("retry-after", "2")])),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        p.server_delay(&headers(&[("retry-after", "3600")])),
        Some(Duration::from_secs(60))
    );
    let now = chrono::DateTime::parse_from_rfc3339("2015-10-21T07:27:50Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after("soon", now), None);
    assert_eq!(p.server_delay(&HeaderMap::new()), None);
}

#[test]
fn backoff_doubles_with_jitter_up_to_the_cap() {
    let p = policy();
    for _ in 0..50 {
        let first = p.backoff(1);
        assert!(first >= Duration::from_millis(75) && first <= Duration::from_millis(100));
        let second = p.backoff(2);
        assert!(second >= Duration::from_millis(150) && second <= Duration::from_millis(200));
        let late = p.backoff(30);
        assert!(late <= Duration::from_millis(250) && late >= Duration::from_millis(187));
    }
}

#[test]
fn statuses_are_retried_by_the_table_until_attempts_run_out() {
    let p = policy();
    let none = HeaderMap::new();
    for status in [408, 409, 429, 500, 502, 503, 529] {
        assert!(
            matches!(
                decide(&caller(), &p, status, &none, "", 1),
                Decision::Retry(_)
            ),
            "{status}"
        );
    }
    assert_eq!(
        decide(
            &caller(),
            &p,
            400,
            &none,
            r#"{"error":{"message":"bad field","type":"invalid_request_error"}}"#,
            1
        ),
        Decision::Fail(ModelError::Http {
            provider: "openai".into(),
            status: 400,
            message: "bad field (invalid_request_error)".into()
        })
    );
    assert_eq!(
        decide(&caller(), &p, 429, &none, "slow down", 3),
        Decision::Fail(ModelError::RateLimited {
            provider: "openai".into(),
            message: "slow down".into(),
            attempts: 3
        })
    );
}

#[test]
fn x_should_retry_overrides_the_table() {
    let p = policy();
    assert!(matches!(
        decide(
            &caller(),
            &p,
            400,
            &headers(&[("x-should-retry", "true")]),
            "",
            1
        ),
        Decision::Retry(_)
    ));
    assert!(matches!(
        decide(
            &caller(),
            &p,
            503,
            &headers(&[("x-should-retry", "false")]),
            "",
            1
        ),
        Decision::Fail(ModelError::Http { status: 503, .. })
    ));
}

#[test]
fn refused_keys_and_exhausted_quotas_are_never_retried() {
    let p = policy();
    let retry = headers(&[("x-should-retry", "true")]);
    assert_eq!(
        decide(
            &caller(),
            &p,
            401,
            &retry,
            r#"{"error":{"message":"Incorrect API key"}}"#,
            1
        ),
        Decision::Fail(ModelError::Auth {
            provider: "openai".into(),
            message: "Incorrect API key".into(),
            key_var: "OPENAI_API_KEY".into()
        })
    );
    let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    assert_eq!(
        decide(&caller(), &p, 429, &retry, quota, 1),
        Decision::Fail(ModelError::QuotaExhausted {
            provider: "openai".into(),
            message: "You exceeded your current quota (insufficient_quota)".into()
        })
    );
    assert!(matches!(
        decide(
            &caller(),
            &p,
            429,
            &HeaderMap::new(),
            "check your billing details",
            1
        ),
        Decision::Fail(ModelError::QuotaExhausted { .. })
    ));
}

#[test]
fn error_messages_come_from_either_providers_body_or_the_raw_text() {
    assert_eq!(
        error_message(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        ),
        "Overloaded (overloaded_error)"
    );
    assert_eq!(
        error_message(r#"{"error":"model not found"}"#),
        "model not found"
    );
    assert_eq!(error_message("  "), "(empty body)");
    assert_eq!(
        error_message("<html>bad gateway</html>"),
        "<html>bad gateway</html>"
    );
}

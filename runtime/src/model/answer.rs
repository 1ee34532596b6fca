//! What a successful response's body turned out to be.
//!
//! A streaming request is answered with an event stream by the APIs
//! themselves, but not always by what sits in front of them: some
//! OpenAI-compatible servers and proxies answer a streaming request that
//! carries tools with one whole JSON completion (`Content-Type:
//! application/json`), a proxy may write a bare JSON error object into the
//! middle of a stream, and a captive portal or a misrouted base URL answers
//! 200 with an HTML page. This module tells those apart, so a whole answer
//! is accepted as one answer, an error object becomes the API's own error,
//! and anything else is a protocol error that says what arrived — never a
//! "connection failed".

use serde_json::Value;

use super::ModelError;

/// The most bytes read of a body that is not an event stream.
pub(crate) const MAX_WHOLE_BYTES: usize = 32 * 1024 * 1024;

/// The body's shape as its `Content-Type` declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// `application/json` (or `+json`): one whole answer.
    Json,
    /// `text/event-stream`, or anything else: read as a stream, with the
    /// whole-answer fallback if no event arrives.
    Stream,
}

impl Declared {
    pub(crate) fn of(content_type: &str) -> Self {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if essence == "application/json" || essence.ends_with("+json") {
            Self::Json
        } else {
            Self::Stream
        }
    }
}

/// The API error an object carries, if it is one: OpenAI's
/// `{"error": {...}}` and Anthropic's `{"type": "error", "error": {...}}`.
pub(crate) fn error_object(provider: &str, value: &Value) -> Option<ModelError> {
    let error = value.get("error").filter(|e| !e.is_null())?;
    let kind = match (&error["type"], &error["code"]) {
        (Value::String(kind), _) => kind.clone(),
        (_, Value::String(code)) => code.clone(),
        (_, Value::Number(code)) => code.to_string(),
        _ => "error".to_string(),
    };
    let message = error["message"]
        .as_str()
        .or(error.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    Some(ModelError::Api {
        provider: provider.to_string(),
        kind,
        message,
    })
}

/// The error for a 200 whose body is neither an event stream nor a JSON
/// answer: names the content type and what the body looked like.
pub(crate) fn not_the_api(provider: &str, content_type: &str, body: &[u8]) -> ModelError {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim();
    let declared = if content_type.is_empty() {
        "no content type".to_string()
    } else {
        format!("`{content_type}`")
    };
    let what = if trimmed.is_empty() {
        "an empty body".to_string()
    } else if let Some(title) = html_title(trimmed) {
        format!("an HTML page titled \"{title}\"")
    } else if trimmed.starts_with('<') {
        format!("an HTML page: {}", snippet(trimmed, 200))
    } else {
        format!("this: {}", snippet(trimmed, 300))
    };
    ModelError::Malformed {
        provider: provider.to_string(),
        message: format!(
            "expected an event stream or a JSON answer, got {what} ({declared}); \
             check that the base URL points at the API itself (for OpenAI-compatible \
             servers it ends in /v1), not at a web page, a login page or a proxy's error page"
        ),
    }
}

/// The error for a body declared JSON that does not parse.
pub(crate) fn bad_json(provider: &str, err: &serde_json::Error, body: &[u8]) -> ModelError {
    let text = String::from_utf8_lossy(body);
    ModelError::Malformed {
        provider: provider.to_string(),
        message: format!(
            "the answer is declared JSON but is not ({err}): {}",
            snippet(text.trim(), 300)
        ),
    }
}

fn html_title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title")?;
    let title = text.get(open_end..close)?.trim();
    (!title.is_empty()).then(|| snippet(title, 120))
}

/// The first `max` bytes of `text` (on a character boundary), marked if cut.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod shapes;

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn content_types_are_read_by_their_essence() {
        assert_eq!(
            Declared::of("application/json; charset=utf-8"),
            Declared::Json
        );
        assert_eq!(Declared::of("Application/Problem+JSON"), Declared::Json);
        assert_eq!(Declared::of("text/event-stream"), Declared::Stream);
        assert_eq!(Declared::of("text/html"), Declared::Stream);
        assert_eq!(Declared::of(""), Declared::Stream);
    }

    #[test]
    fn both_error_shapes_are_recognised() {
        let openai = json!({"error": {"message": "bad gateway", "code": 502}});
        assert_eq!(
            error_object("openai", &openai),
            Some(ModelError::Api {
                provider: "openai".into(),
                kind: "502".into(),
                message: "bad gateway".into(),
            })
        );
        let anthropic = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            error_object("anthropic", &anthropic),
            Some(ModelError::Api {
                provider: "anthropic".into(),
                kind: "overloaded_error".into(),
                message: "Overloaded".into(),
            })
        );
        assert_eq!(
            error_object("openai", &json!({"error": null, "choices": []})),
            None
        );
    }

    #[test]
    fn an_html_page_is_named_by_its_title() {
        let page = b"<!DOCTYPE html><html><head><title> 502 Bad Gateway </title></head></html>";
        let err = not_the_api("openai", "text/html", page);
        assert_eq!(err.class(), crate::model::ErrorClass::Protocol);
        let text = err.to_string();
        assert!(
            text.contains("an HTML page titled \"502 Bad Gateway\" (`text/html`)"),
            "{text}"
        );
        assert!(!text.contains("connection failed"), "{text}");
    }
}

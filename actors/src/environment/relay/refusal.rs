//! A request the relay does not forward: an error in the shape both APIs'
//! clients read, saying what to do instead.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::Body;

/// A request the relay does not forward, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
}

impl Refusal {
    /// A refusal with this status, error kind and message.
    pub(super) fn new(status: StatusCode, kind: &'static str, message: String) -> Self {
        Self {
            status,
            kind,
            message,
        }
    }

    /// The error in a shape both APIs' clients read: Anthropic's
    /// (`type`, `error.type`) and OpenAI's (`error.message`, `error.code`).
    pub(super) fn response(&self) -> Response<Body> {
        whole(
            self.status,
            &json!({"type": "error", "error": self.error()}),
        )
    }

    /// The `error` object itself.
    pub(super) fn error(&self) -> Value {
        json!({
            "type": self.kind,
            "code": self.kind,
            "message": format!("troupe model relay: {}", self.message),
        })
    }
}

/// A whole JSON response.
pub(super) fn whole(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!("{body}\n")))
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

//! One error type for every route, answered as
//! `{"error": {"code": "...", "message": "..."}}` with its status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use troupe_actors::node::NodeError;

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed or refused as asked (400).
    #[error("{0}")]
    BadRequest(String),
    /// No token, or an unknown or revoked one (401).
    #[error("{0}")]
    Unauthorized(String),
    /// Authenticated, but not allowed (403).
    #[error("{0}")]
    Forbidden(String),
    /// Nothing there, or nothing this caller may see (404).
    #[error("{0}")]
    NotFound(String),
    /// The request names a host this server does not answer for (421).
    #[error("{0}")]
    MisdirectedHost(String),
    /// It clashes with what is there (409): a name taken, a version moved on.
    #[error("{0}")]
    Conflict(String),
    /// The request body is larger than the server takes (413).
    #[error("{0}")]
    TooLarge(String),
    /// Too many requests; try again after this many seconds (429).
    #[error("too many requests: try again in {0} s")]
    RateLimited(u64),
    /// The request took longer than the server allows (503).
    #[error("the request took too long and was stopped; what it committed stays committed")]
    Timeout,
    /// The bot's model cannot be used: the server's configuration (an
    /// unknown model, a key not set, a bad script) must be fixed (503,
    /// `model_unavailable`).
    #[error("{0}")]
    ModelUnavailable(String),
    /// The house asked for is on another node of the cluster, which is
    /// down or did not answer (503, `node_down`; the body names the node).
    #[error("{message}")]
    NodeDown {
        /// The node.
        node: String,
        /// What happened and what to do.
        message: String,
    },
    /// Something broke on our side (500).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::MisdirectedHost(_) => (StatusCode::MISDIRECTED_REQUEST, "misdirected"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            Self::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Timeout => (StatusCode::SERVICE_UNAVAILABLE, "timeout"),
            Self::ModelUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "model_unavailable"),
            Self::NodeDown { .. } => (StatusCode::SERVICE_UNAVAILABLE, "node_down"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<NodeError> for ApiError {
    fn from(e: NodeError) -> Self {
        match &e {
            NodeError::NoSuchBot(_) | NodeError::NoSuchConversation(_) => {
                Self::NotFound(e.to_string())
            }
            NodeError::BotExists(_) | NodeError::Conflict(_) => Self::Conflict(e.to_string()),
            NodeError::Model(_) => Self::ModelUnavailable(e.to_string()),
            NodeError::Refused(_) | NodeError::TooLarge(_) | NodeError::Bot(_) => {
                Self::BadRequest(e.to_string())
            }
            _ => Self::Internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        if status.is_server_error() {
            tracing::warn!(code, error = %self, "request failed");
        }
        let mut body =
            serde_json::json!({ "error": { "code": code, "message": self.to_string() } });
        if let Self::NodeDown { node, .. } = &self {
            body["error"]["node"] = serde_json::json!(node);
        }
        let mut response = (status, axum::Json(body)).into_response();
        if let Self::RateLimited(seconds) = self {
            if let Ok(v) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        response
    }
}

/// A JSON body that failed to parse answers 400 with serde's reason.
impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(e: axum::extract::rejection::JsonRejection) -> Self {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return Self::TooLarge(
                "the body is larger than the server takes (`[server] max_body_bytes`)".into(),
            );
        }
        Self::BadRequest(format!(
            "the JSON body is not what this route takes: {}",
            e.body_text()
        ))
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(e: axum::extract::rejection::QueryRejection) -> Self {
        Self::BadRequest(format!("bad query parameters: {}", e.body_text()))
    }
}

/// A JSON body whose parse failure answers as an [`ApiError`].
#[derive(Debug, axum::extract::FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Body<T>(pub T);

/// Query parameters whose parse failure answers as an [`ApiError`].
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Params<T>(pub T);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_is_409_and_a_refusal_400_by_their_variants() {
        let conflict = ApiError::from(NodeError::Conflict(
            "a house named `x` exists already".into(),
        ));
        assert_eq!(conflict.parts(), (StatusCode::CONFLICT, "conflict"));
        // The words do not decide: a refusal that says "already" is still a 400.
        let refused = ApiError::from(NodeError::Refused("already refused".into()));
        assert_eq!(refused.parts(), (StatusCode::BAD_REQUEST, "bad_request"));
    }
}

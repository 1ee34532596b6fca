//! `GET /api/metrics`: the Prometheus scrape, for the home's owner
//! (`crate::telemetry::metrics`, docs/operating.md).

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;

/// The text exposition format, version 0.0.4.
const CONTENT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /api/metrics`: every series in Prometheus's text format.
pub async fn scrape(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let text = crate::telemetry::metrics::render(state.node()).await;
    Ok(([(CONTENT_TYPE, CONTENT)], text).into_response())
}

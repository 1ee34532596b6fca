//! The executors' accounts over HTTP, for the node's owner: the same view
//! as `executor_accounts` and `troupe executors accounts`
//! ([`troupe_runtime::executors::accounts`]), read with no model call and
//! no process started; the accounts are those the node started with.

use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use troupe_runtime::executors::accounts;

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;

/// `GET /api/executors/accounts`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Only this executor's accounts (`claude-code`), or one (`claude-code@work`).
    executor: Option<String>,
}

/// `GET /api/executors/accounts[?executor=NAME]`: every account of every
/// installed or configured executor.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(filter): Query<Filter>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let home = state.node().home().clone();
    let executors = state.node().settings().executors.clone();
    let found = state
        .node()
        .store()
        .read(move |conn| {
            accounts::view(
                &home,
                &executors,
                Some(conn),
                chrono::Utc::now(),
                filter.executor.as_deref(),
            )
        })
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(json!({ "accounts": found })))
}

//! `/api/requests`: approvals and `ask_user` questions waiting for a person.
//!
//! A bot's turn in a thread waits on the people of that thread's house;
//! a conversation outside any house, on the people who manage the node.
//! An approval is answered with `"once"`, `"session"`, `"always"` or
//! `"deny"`; a question with the answers `ask_user` takes; `{"cancel":
//! true}` withdraws the request (the call does not run).
//!
//! The requests are kept with the turns that wait on them: after a restart
//! they are listed again, under the same ids, and an answer reaches the
//! resumed turn (docs/runtime-semantics.md, "Requests that wait on a
//! person").

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::{ApiError, Body};
use super::feed::PendingRequest;
use super::AppState;

fn visible(caller: &Caller, request: &PendingRequest) -> bool {
    match request.house {
        Some(house) => caller.everywhere || house == caller.house.house.id,
        None => caller.manages_node(),
    }
}

/// `GET /api/requests`: what waits for the caller, oldest first.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Json<Value> {
    let requests: Vec<_> = state
        .feed()
        .pending_with_kept()
        .await
        .into_iter()
        .filter(|r| visible(&caller, r))
        .collect();
    Json(json!({ "requests": requests }))
}

/// Body of `POST /api/requests/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The answer.
    answer: Option<Value>,
    /// Withdraw the request instead.
    #[serde(default)]
    cancel: bool,
}

/// `POST /api/requests/{id}`: answers it.
pub async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<Answer>,
) -> Result<Json<Value>, ApiError> {
    let missing = || {
        ApiError::NotFound(format!(
            "no request `{id}` waits for you (answered already, timed out, its turn ended, or never asked); GET /api/requests lists those that wait"
        ))
    };
    let request = state
        .feed()
        .pending_with_kept()
        .await
        .into_iter()
        .find(|r| r.id == id)
        .filter(|r| visible(&caller, r))
        .ok_or_else(missing)?;
    let answer = match (body.cancel, body.answer) {
        (true, _) => None,
        (false, Some(a)) => {
            if request.kind == "approval" && troupe_actors::gate::parse_approval(&a).is_none() {
                return Err(ApiError::BadRequest(
                    "an approval takes \"once\", \"session\", \"always\" or \"deny\"".into(),
                ));
            }
            Some(a)
        }
        (false, None) => {
            return Err(ApiError::BadRequest(
                "give `answer`, or `cancel: true`".into(),
            ))
        }
    };
    state.feed().settle(&id);
    let answered = state
        .node()
        .answer_request(&id, answer)
        .await
        .map_err(|e| ApiError::Internal(format!("the answer could not be kept: {e}")))?;
    if !answered {
        return Err(missing());
    }
    tracing::info!(request = %id, by = %caller.member.handle, "request answered");
    Ok(Json(json!({ "answered": id })))
}

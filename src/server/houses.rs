//! `/api/me`, `/api/houses`: who the caller is, the houses they see, members.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;

/// `GET /api/me`: the caller, their house, what they may do.
pub async fn me(caller: Caller) -> Json<Value> {
    Json(json!({
        "handle": caller.member.handle,
        "display_name": caller.member.display_name,
        "house": caller.house.house,
        "every_house": caller.everywhere,
        "manages_node": caller.manages_node(),
    }))
}

/// `GET /api/houses`: the houses the caller sees (a member: their own).
/// In a cluster, each says its `node`, and a caller who sees every house
/// sees the other nodes' too (`id`, `name`, `node`).
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let houses = if caller.everywhere {
        state.node().houses().await?
    } else {
        vec![caller.house.house.clone()]
    };
    let Some(cluster) = state.inner.options.cluster.as_ref() else {
        return Ok(Json(json!({ "houses": houses })));
    };
    let mut listed: Vec<Value> = houses
        .into_iter()
        .map(|h| {
            let mut v = json!(h);
            v["node"] = json!(cluster.node_name());
            v
        })
        .collect();
    if caller.everywhere {
        for (h, node) in cluster.peer_houses() {
            listed.push(json!({ "id": h.id, "name": h.name, "node": node }));
        }
        listed.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    Ok(Json(json!({ "houses": listed })))
}

/// `GET /api/houses/{house}`: the house and its members.
pub async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    let members = h.members().await?;
    Ok(Json(json!({ "house": h.house, "members": members })))
}

/// `GET /api/houses/{house}/members`: people, then bots with their listen modes.
pub async fn members(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    Ok(Json(json!({ "members": h.members().await? })))
}

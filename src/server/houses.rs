//! `/api/me`, `/api/houses`: who the caller is, the houses they see,
//! members, turn-taking rules.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};
use troupe_actors::house::Rules;

use super::auth::Caller;
use super::error::{ApiError, Body};
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

/// `GET /api/houses/{house}/rules`: the house's turn-taking rules
/// (docs/house.md).
pub async fn rules(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    Ok(Json(json!({ "rules": h.rules().await? })))
}

/// `PUT /api/houses/{house}/rules`: replaces them (a field left out takes
/// its default; each at least 1); only for the people who manage the
/// node. Answers the rules.
pub async fn set_rules(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Body(rules): Body<Rules>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let h = caller.house(&state, &house).await?;
    for (name, value) in [
        ("max_turns_per_round", rules.max_turns_per_round),
        ("max_chain", rules.max_chain),
        ("context_messages", rules.context_messages),
    ] {
        if value == 0 {
            return Err(ApiError::BadRequest(format!("{name} must be at least 1")));
        }
    }
    h.set_rules(rules).await?;
    Ok(Json(json!({ "rules": rules })))
}

/// Body of `POST /api/houses/{house}/move`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveTo {
    /// The node to move the house to.
    node: String,
}

/// `POST /api/houses/{house}/move`: moves the house, which this node
/// hosts, to another node of the cluster (the owner only; asked of any
/// node, it is forwarded to the house's). Answers once the house is the
/// other node's: what moved and how long the house was not served.
pub async fn move_house(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Body(body): Body<MoveTo>,
) -> Result<Json<Value>, ApiError> {
    use troupe_actors::cluster::PlaceError;
    caller.require_owner()?;
    let Some(cluster) = state.inner.options.cluster.as_ref() else {
        return Err(ApiError::BadRequest(format!(
            "this server is not a node of a cluster, so house `{house}` has nowhere to move; \
             start it with `troupe serve --cluster …` (docs/cluster.md)"
        )));
    };
    let to = body.node.trim();
    match cluster.move_house(&house, to).await {
        Ok(m) => Ok(Json(json!({
            "house": {"id": m.house.id, "name": m.house.name},
            "from": m.from,
            "to": m.to,
            "epoch": m.epoch,
            "threads": m.counts.threads,
            "messages": m.counts.messages,
            "files": m.counts.files,
            "bytes": m.counts.bytes,
            "took_ms": m.took.as_millis() as u64,
        }))),
        Err(PlaceError::Node(e)) => Err(e.into()),
        Err(PlaceError::Conflict(m)) => Err(ApiError::Conflict(m)),
        Err(e @ (PlaceError::UnknownNode { .. } | PlaceError::Refused(_))) => {
            Err(ApiError::BadRequest(e.to_string()))
        }
        Err(e @ (PlaceError::Down { .. } | PlaceError::Failed { .. })) => Err(ApiError::NodeDown {
            node: to.to_string(),
            message: e.to_string(),
        }),
    }
}

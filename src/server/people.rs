//! The owner's routes for people and their tokens: make a house, add a
//! person (their first token in the answer) or a bot, take a member out,
//! issue and revoke tokens — so someone joins while `troupe serve` runs,
//! from the web page's owner views or any client.
//!
//! Like the node's other routes these belong to the people who manage the
//! node (the house `home`, or the owner's socket): anyone else gets 403.
//! They reach every house by name, since onboarding someone into `acme` is
//! the owner's business, not `acme`'s. Secrets are in the answer once and
//! never again: the store keeps only their hashes.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use troupe_actors::house::HouseRef;
use troupe_runtime::protocol::house::ListenMode;

use super::auth::Caller;
use super::error::{ApiError, Body};
use super::AppState;

/// The house `name`, for a caller who manages the node.
async fn managed(state: &AppState, caller: &Caller, name: &str) -> Result<HouseRef, ApiError> {
    caller.require_owner()?;
    state
        .node()
        .house(name)
        .await
        .map_err(|e| ApiError::NotFound(e.to_string()))
}

/// `GET /api/people`: every house with its members and tokens (never a
/// secret).
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let node = state.node();
    let tokens = node.all_tokens().await?;
    let mut houses = Vec::new();
    for house in node.houses().await? {
        let members = node.house(&house.name).await?.members().await?;
        let own: Vec<_> = tokens.iter().filter(|t| t.house == house.id).collect();
        houses.push(json!({ "house": house, "members": members, "tokens": own }));
    }
    Ok(Json(json!({ "houses": houses })))
}

/// Body of `POST /api/houses`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewHouse {
    /// Letters, digits, `-`, `_`, `.`.
    name: String,
    /// The node of the cluster to make it on (this node's name for this
    /// one); left out in a cluster, rendezvous hashing chooses.
    node: Option<String>,
}

/// `POST /api/houses`: makes a house — on this node, or in a cluster on the
/// node asked for or chosen (docs/cluster.md); 201 with the house and its
/// node, 409 when the name is taken, 503 naming the node when it is down.
pub async fn create_house(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewHouse>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    use troupe_actors::cluster::{PlaceError, Placed};
    caller.require_owner()?;
    let name = body.name.trim();
    let Some(cluster) = state.inner.options.cluster.as_ref() else {
        if let Some(node) = body.node {
            return Err(ApiError::BadRequest(format!(
                "this server is not a node of a cluster, so it cannot place a house on node `{node}`; leave `node` out, or start it with `troupe serve --cluster …`"
            )));
        }
        let house = state.node().create_house(name).await?;
        return Ok((StatusCode::CREATED, Json(json!({ "house": house.house }))));
    };
    let node = body.node.as_deref().map(str::trim);
    match cluster.create_house(node, name).await {
        Ok(Placed::Here(house)) => Ok((
            StatusCode::CREATED,
            Json(json!({ "house": house.house, "node": cluster.node_name() })),
        )),
        Ok(Placed::There { node, house }) => Ok((
            StatusCode::CREATED,
            Json(json!({ "house": {"id": house.id, "name": house.name}, "node": node })),
        )),
        Err(PlaceError::Node(e)) => Err(e.into()),
        Err(PlaceError::Conflict(m)) => Err(ApiError::Conflict(m)),
        Err(e @ (PlaceError::UnknownNode { .. } | PlaceError::Refused(_))) => {
            Err(ApiError::BadRequest(e.to_string()))
        }
        Err(e @ (PlaceError::Down { .. } | PlaceError::Failed { .. })) => Err(ApiError::NodeDown {
            node: node.map_or_else(|| cluster.place(name), str::to_string),
            message: e.to_string(),
        }),
    }
}

/// Body of `POST /api/houses/{house}/members`: a person or a bot.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    /// A person's handle.
    human: Option<String>,
    /// The person's display name (the handle when left out).
    name: Option<String>,
    /// A bot of this node.
    bot: Option<String>,
    /// When the bot is offered turns: `all`, `mentions` (the default) or `off`.
    listen: Option<String>,
}

/// `POST /api/houses/{house}/members`: adds a person — 201 with their
/// first token — or a bot; again for a bot, changes its listen mode, and
/// for a person, their display name (200, no new token).
pub async fn add_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Body(body): Body<NewMember>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let h = managed(&state, &caller, &house).await?;
    let members = h.members().await?;
    let known = |handle: &str| members.iter().any(|m| m.handle == handle.trim());
    match (body.human, body.bot) {
        (Some(handle), None) => {
            if body.listen.is_some() {
                return Err(ApiError::BadRequest(
                    "`listen` is for a bot; a person reads and posts where they take part".into(),
                ));
            }
            let again = known(&handle);
            let member = h.add_human(handle.trim(), body.name.as_deref()).await?;
            if again {
                return Ok((StatusCode::OK, Json(json!({ "member": member }))));
            }
            let token = h.issue_token(&member.handle).await?;
            Ok((
                StatusCode::CREATED,
                Json(json!({
                    "member": member,
                    "token": { "id": token.id, "secret": token.secret, "handle": member.handle },
                })),
            ))
        }
        (None, Some(bot)) => {
            if body.name.is_some() {
                return Err(ApiError::BadRequest(
                    "`name` is a person's display name; a bot's title is its definition's (`PATCH /api/bots/{bot}`)".into(),
                ));
            }
            let listen = body.listen.as_deref().unwrap_or("mentions");
            let mode = ListenMode::parse(listen).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "`listen` must be all, mentions or off, not `{listen}`"
                ))
            })?;
            let again = known(&bot);
            let member = h.add_bot(bot.trim(), mode).await?;
            let status = if again {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok((status, Json(json!({ "member": member }))))
        }
        _ => Err(ApiError::BadRequest(
            "give `human` (a person's handle, with an optional `name`) or `bot` (a bot's name, with an optional `listen`), not both".into(),
        )),
    }
}

/// `DELETE /api/houses/{house}/members/{handle}`: takes a member out of
/// the house and its threads; a person's tokens stop working at once.
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, handle)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let h = managed(&state, &caller, &house).await?;
    if !h.remove_member(&handle).await? {
        return Err(ApiError::NotFound(format!(
            "`{handle}` is not a member of `{house}`"
        )));
    }
    Ok(Json(json!({ "removed": handle })))
}

/// Body of `POST /api/houses/{house}/tokens`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// The person's handle.
    handle: String,
}

/// `POST /api/houses/{house}/tokens`: a new token for a person of the
/// house; 201 with its secret, shown this once.
pub async fn issue_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Body(body): Body<NewToken>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let h = managed(&state, &caller, &house).await?;
    let token = h.issue_token(body.handle.trim()).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "token": { "id": token.id, "secret": token.secret, "handle": body.handle.trim() },
        })),
    ))
}

/// `DELETE /api/tokens/{id}`: revokes a token, whichever house it is of.
pub async fn revoke_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    if !state.node().revoke_token(&id).await? {
        return Err(ApiError::NotFound(format!(
            "no live token `{id}`; `GET /api/people` lists them"
        )));
    }
    Ok(Json(json!({ "revoked": id })))
}

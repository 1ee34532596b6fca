//! `/api/houses/{house}/threads…`: list, open, archive, read, post;
//! `/api/houses/{house}/search`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use troupe_actors::house::ThreadRef;
use troupe_runtime::protocol::house::ThreadFilter;

use super::auth::Caller;
use super::error::{ApiError, Body, Params};
use super::AppState;

/// The largest page of messages one request returns.
const MAX_PAGE: usize = 500;

/// The thread `reference` (name, id or link) of `house`, as `caller` may see it.
pub async fn find(
    state: &AppState,
    caller: &Caller,
    house: &str,
    reference: &str,
) -> Result<ThreadRef, ApiError> {
    let h = caller.house(state, house).await?;
    h.thread(reference)
        .await
        .map_err(|_| ApiError::NotFound(format!("`{house}` has no thread `{reference}`")))
}

/// Query of `GET …/threads`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// Archived threads too.
    #[serde(default)]
    archived: bool,
    /// Only threads this member is in.
    participant: Option<String>,
    /// At most this many (default 100).
    limit: Option<usize>,
}

/// `GET /api/houses/{house}/threads`: most recently active first, pinned on top.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Params(q): Params<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    let threads = h
        .threads(ThreadFilter {
            include_archived: q.archived,
            participant: q.participant,
            limit: q.limit.unwrap_or(100).min(1000),
            ..ThreadFilter::default()
        })
        .await?;
    Ok(Json(json!({ "threads": threads })))
}

/// Body of `POST …/threads`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewThread {
    /// Its name, unique in the house.
    name: Option<String>,
    /// Its tags.
    #[serde(default)]
    tags: Vec<String>,
    /// Members taking part from the start (the caller always does).
    #[serde(default)]
    with: Vec<String>,
    /// Opened by this name instead of the caller, who then takes part only
    /// if `with` names them: only for a caller who sees every house (the
    /// home's own CLI).
    #[serde(rename = "as")]
    creator: Option<String>,
}

/// `POST /api/houses/{house}/threads`: opens a thread; 201 with it.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Body(body): Body<NewThread>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let h = caller.house(&state, &house).await?;
    let mut with = body.with;
    let by_caller = body.creator.is_none();
    let creator = caller.author(body.creator)?;
    if by_caller
        && !with
            .iter()
            .any(|w| w.eq_ignore_ascii_case(&caller.member.handle))
    {
        with.insert(0, caller.member.handle.clone());
    }
    let t = h
        .create_thread(body.name.as_deref(), &body.tags, &creator, &with)
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "thread": t.info }))))
}

/// `GET /api/houses/{house}/threads/{thread}`.
pub async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, thread)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let t = find(&state, &caller, &house, &thread).await?;
    Ok(Json(json!({ "thread": t.info })))
}

/// Body of `POST …/archive`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Archive {
    /// `true` to archive, `false` to bring it back (default `true`).
    #[serde(default = "yes")]
    archived: bool,
}

fn yes() -> bool {
    true
}

/// `POST /api/houses/{house}/threads/{thread}/archive`: `{"archived": bool}`.
pub async fn archive(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, thread)): Path<(String, String)>,
    Body(body): Body<Archive>,
) -> Result<Json<Value>, ApiError> {
    let t = find(&state, &caller, &house, &thread).await?;
    let changed = t.set_archived(body.archived).await?;
    let info = t.refresh().await?;
    Ok(Json(json!({ "changed": changed, "thread": info })))
}

/// Body of `POST …/pin`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// `true` to pin, `false` to unpin (default `true`).
    #[serde(default = "yes")]
    pinned: bool,
}

/// `POST /api/houses/{house}/threads/{thread}/pin`: `{"pinned": bool}`;
/// a pinned thread heads the house's lists.
pub async fn pin(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, thread)): Path<(String, String)>,
    Body(body): Body<Pin>,
) -> Result<Json<Value>, ApiError> {
    let t = find(&state, &caller, &house, &thread).await?;
    let changed = t.set_pinned(body.pinned).await?;
    let info = t.refresh().await?;
    Ok(Json(json!({ "changed": changed, "thread": info })))
}

/// Query of `GET …/messages`.
#[derive(Debug, Deserialize)]
pub struct Page {
    /// Messages after this id, oldest first (catching up).
    after: Option<i64>,
    /// Messages before this id (paging back).
    before: Option<i64>,
    /// Without `after` or `before`: the page before the newest this many
    /// (default 0, the newest page).
    #[serde(default)]
    offset: usize,
    /// At most this many (default 50, at most 500).
    limit: Option<usize>,
}

/// `GET /api/houses/{house}/threads/{thread}/messages`: the newest page,
/// or `?before=ID` for the page before, or `?after=ID` for what follows,
/// or `?offset=N` for the page before the newest `N`.
/// Each message's `seq` is its id; a bot's message carries `tools`, the
/// calls of the turn that wrote it (see [`super::history`]).
pub async fn messages(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, thread)): Path<(String, String)>,
    Params(q): Params<Page>,
) -> Result<Json<Value>, ApiError> {
    let t = find(&state, &caller, &house, &thread).await?;
    let limit = q.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let messages = match (q.after, q.before) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give `after` or `before`, not both".into(),
            ))
        }
        (Some(_), None) | (None, Some(_)) if q.offset > 0 => {
            return Err(ApiError::BadRequest(
                "`offset` pages from the newest message: give it without `after` or `before`"
                    .into(),
            ))
        }
        (Some(after), None) => t.read_after(after, limit).await?,
        (None, Some(before)) => t.read_before(before, limit).await?,
        (None, None) => t.read(q.offset, limit).await?,
    };
    let messages = super::history::with_tools(state.node().store(), t.info.id, messages)
        .await
        .map_err(|e| ApiError::Internal(format!("the thread's tool calls: {e}")))?;
    Ok(Json(json!({ "messages": messages })))
}

/// Body of `POST …/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    /// The message; `@handle` mentions choose who answers (docs/house.md).
    text: String,
    /// Post as this person of the house instead: only for a caller who
    /// sees every house (the home's own CLI).
    #[serde(rename = "as")]
    author: Option<String>,
}

/// `POST /api/houses/{house}/threads/{thread}/messages`: posts as the
/// caller. Answers 202 once the post is committed, with its id; it lands
/// in the thread (and the bots answer) through the thread's stream.
pub async fn post(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, thread)): Path<(String, String)>,
    Body(body): Body<NewMessage>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let t = find(&state, &caller, &house, &thread).await?;
    let author = caller.author(body.author)?;
    let id = t.post(&author, &body.text).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": id, "thread": t.info.id })),
    ))
}

/// Query of `GET …/search` and `GET …/search/files`.
#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    /// The words: all of them, accents ignored (none: no hits).
    #[serde(default)]
    pub(super) q: String,
    /// How many hits (default 10, at most 100).
    limit: Option<usize>,
}

impl SearchQuery {
    /// How many hits: the one asked for, 10 by default, 1 to 100.
    pub(super) fn limit(&self) -> usize {
        self.limit.unwrap_or(10).clamp(1, 100)
    }
}

/// `GET /api/houses/{house}/search?q=WORDS`: the house's thread messages
/// holding every word, best first.
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Params(q): Params<SearchQuery>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    let hits = h.search(&q.q, q.limit()).await?;
    Ok(Json(json!({ "hits": hits })))
}

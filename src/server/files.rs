//! `/api/houses/{house}/files…`: the house's shared files.
//!
//! `GET …/files?folder=` lists them with their state; `GET …/files/{path}`
//! answers the bytes (`?version=` for an older one, `?text=true` for the
//! text search reads), with the version in `X-Troupe-Version`; `PUT …/files/{path}` writes the request body as one
//! new version (`?message=`, and `?as=` for the home's CLI); `DELETE …/files/{path}?version=N` deletes it
//! with all its versions if `N` is still its newest version, else 409;
//! `GET …/versions?path=` is the log; `GET …/search/files?q=` searches
//! their text.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::{ApiError, Params};
use super::threads::SearchQuery;
use super::AppState;

/// Query of `GET …/files`.
#[derive(Debug, Deserialize)]
pub struct Folder {
    /// Only files under this folder.
    folder: Option<String>,
}

/// `GET /api/houses/{house}/files`.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Params(q): Params<Folder>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    Ok(Json(
        json!({ "files": h.files(q.folder.as_deref()).await? }),
    ))
}

/// Query of `GET …/files/{path}`.
#[derive(Debug, Deserialize)]
pub struct Version {
    /// A house version (the newest when left out).
    version: Option<i64>,
    /// The file's text (a document's converted text) instead of its bytes.
    #[serde(default)]
    text: bool,
}

/// `GET /api/houses/{house}/files/{path}`: the bytes, or with `text` the
/// text (404 when it has none: binary, or its conversion failed).
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, path)): Path<(String, String)>,
    Params(q): Params<Version>,
) -> Result<Response, ApiError> {
    let h = caller.house(&state, &house).await?;
    let file = h
        .read_file(&path, q.version)
        .await
        .map_err(|e| ApiError::NotFound(e.to_string()))?;
    let mut headers = HeaderMap::new();
    let kind = if q.text || file.kind == "text" {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    for (name, value) in [
        ("x-troupe-version", file.version),
        ("x-troupe-latest", file.latest),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value.to_string()) {
            headers.insert(name, v);
        }
    }
    let body = if q.text {
        file.text.map(String::into_bytes).ok_or_else(|| {
            ApiError::NotFound(format!(
                "`{}` has no text (binary, or its conversion failed: `troupe files ls {house}` says why)",
                file.path
            ))
        })?
    } else {
        file.bytes
    };
    Ok((headers, body).into_response())
}

/// Query of `PUT …/files/{path}`.
#[derive(Debug, Deserialize)]
pub struct Put {
    /// What the version is about.
    message: Option<String>,
    /// The author kept in the log, for a caller who sees every house (the
    /// home's own CLI); otherwise the caller.
    #[serde(rename = "as")]
    author: Option<String>,
}

/// `PUT /api/houses/{house}/files/{path}`: the body becomes the file, as
/// one new version by the caller. 201 with the version and the file.
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, path)): Path<(String, String)>,
    Params(q): Params<Put>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let h = caller.house(&state, &house).await?;
    let message = q.message.unwrap_or_default();
    let author = caller.author(q.author)?;
    let (version, files) = h.put_file(&author, &message, &path, body.to_vec()).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "version": version, "files": files })),
    ))
}

/// Query of `DELETE …/files/{path}`.
#[derive(Debug, Deserialize)]
pub struct Delete {
    /// The file's newest version as the caller saw it.
    version: i64,
    /// What the deletion is about.
    message: Option<String>,
    /// The author kept in the log, as for `PUT`.
    #[serde(rename = "as")]
    author: Option<String>,
}

/// `DELETE /api/houses/{house}/files/{path}?version=N`: irreversible.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, path)): Path<(String, String)>,
    Params(q): Params<Delete>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    let author = caller.author(q.author)?;
    let version = h
        .delete_files(
            &author,
            &q.message.unwrap_or_default(),
            vec![(path, q.version)],
        )
        .await
        .map_err(|e| match ApiError::from(e) {
            ApiError::BadRequest(text) if text.contains("changed") => ApiError::Conflict(text),
            other => other,
        })?;
    Ok(Json(json!({ "version": version })))
}

/// Query of `GET …/versions`.
#[derive(Debug, Deserialize)]
pub struct Log {
    /// Only the versions that touched this file.
    path: Option<String>,
    /// At most this many (default 50).
    limit: Option<usize>,
}

/// `GET /api/houses/{house}/versions`: the house's versions, newest first,
/// with their messages and authors.
pub async fn versions(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Params(q): Params<Log>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    let log = h
        .file_log(q.path.as_deref(), q.limit.unwrap_or(50).min(1000))
        .await?;
    Ok(Json(json!({ "versions": log })))
}

/// `GET /api/houses/{house}/search/files?q=WORDS`: keyword search over
/// the text of the house's files, best first.
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Path(house): Path<String>,
    Params(q): Params<SearchQuery>,
) -> Result<Json<Value>, ApiError> {
    let h = caller.house(&state, &house).await?;
    let hits = h.search_files(&q.q, q.limit()).await?;
    Ok(Json(json!({ "hits": hits })))
}

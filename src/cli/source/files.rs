//! A house's shared files as `troupe files` reads them, by the rule of
//! [`Source`]: through the server holding the home (its `…/files`,
//! `…/versions` and `…/search/files` routes, so a house of another node
//! is read on its node), else from the home's store read-only.

use troupe_runtime::store::house_files::{self as table, FileHit, FileInfo, VersionInfo};

use super::super::files::file_path;
use super::super::house::find_house;
use super::super::remote::encode;
use super::{unknown, Source};

impl Source {
    /// A house's current files (under `folder` when given), by path.
    pub async fn files(&self, house: &str, folder: Option<&str>) -> anyhow::Result<Vec<FileInfo>> {
        match self {
            Source::Server(remote) => {
                let query = folder
                    .map(|f| format!("?folder={}", encode(f)))
                    .unwrap_or_default();
                Self::get(remote, house, &format!("/files{query}"), "files").await
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let folder = folder.map(str::to_string);
                Ok(view
                    .read(move |c| table::list(c, h.id, folder.as_deref()))
                    .await?)
            }
        }
    }

    /// The file at `path` at house version `version` (the newest when
    /// `None`): its bytes, or with `text` the text search reads.
    pub async fn file(
        &self,
        house: &str,
        path: &str,
        version: Option<i64>,
        text: bool,
    ) -> anyhow::Result<Vec<u8>> {
        match self {
            Source::Server(remote) => {
                let mut query = Vec::new();
                if let Some(v) = version {
                    query.push(format!("version={v}"));
                }
                if text {
                    query.push("text=true".to_string());
                }
                let query = if query.is_empty() {
                    String::new()
                } else {
                    format!("?{}", query.join("&"))
                };
                remote
                    .get_bytes(&format!("{}{query}", file_path(house, path)))
                    .await
                    .map_err(|e| unknown(e, house))
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let asked = path.to_string();
                let file = view
                    .read(move |c| table::read(c, h.id, &asked, version))
                    .await?
                    .ok_or_else(|| {
                        let when = version.map(|v| format!(" at version {v}")).unwrap_or_default();
                        anyhow::anyhow!(
                            "there is no file `{path}` in house `{house}`{when}; `troupe files ls {house}` lists them"
                        )
                    })?;
                if !text {
                    return Ok(file.bytes);
                }
                file.text.map(String::into_bytes).ok_or_else(|| {
                    anyhow::anyhow!(
                        "`{}` has no text (binary, or its conversion failed: `troupe files ls {house}` says why)",
                        file.path
                    )
                })
            }
        }
    }

    /// The versions of a house's files, newest first (those touching
    /// `path` when given), at most `limit` (through the server, at most
    /// its 1,000).
    pub async fn file_log(
        &self,
        house: &str,
        path: Option<&str>,
        limit: usize,
    ) -> anyhow::Result<Vec<VersionInfo>> {
        match self {
            Source::Server(remote) => {
                let only = path
                    .map(|p| format!("&path={}", encode(p)))
                    .unwrap_or_default();
                let rest = format!("/versions?limit={limit}{only}");
                Self::get(remote, house, &rest, "versions").await
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let path = path.map(str::to_string);
                Ok(view
                    .read(move |c| table::log(c, h.id, path.as_deref(), limit))
                    .await?)
            }
        }
    }

    /// Hits for `query` in the text of a house's files, best first (through
    /// the server, at most its 100, and what is still pending indexed
    /// first).
    pub async fn search_files(
        &self,
        house: &str,
        query: &str,
        limit: usize,
    ) -> anyhow::Result<Vec<FileHit>> {
        match self {
            Source::Server(remote) => {
                let rest = format!("/search/files?q={}&limit={limit}", encode(query));
                Self::get(remote, house, &rest, "hits").await
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let q = query.to_string();
                Ok(view
                    .read(move |c| table::search(c, h.id, &q, limit))
                    .await?)
            }
        }
    }
}

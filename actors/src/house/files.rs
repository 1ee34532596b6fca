//! The house's shared files from Rust: list, write, read, delete, log and
//! search, each scoped to its house (the tools reach the same store rows).

use troupe_runtime::store::house_files::{
    self as table, FileHit, FileInfo, FileRead, NewFile, VersionInfo,
};
use troupe_runtime::store::StoreError;

use super::api::HouseRef;
use crate::node::NodeError;

/// A store refusal as the house error it is; other failures as they are.
fn refusal(e: StoreError) -> NodeError {
    match e {
        StoreError::Invalid(text) => NodeError::Refused(text),
        StoreError::Conflict(text) => NodeError::Conflict(text),
        other => NodeError::Store(other),
    }
}

impl HouseRef {
    /// Its current files (under `folder` when given), by path.
    pub async fn files(&self, folder: Option<&str>) -> Result<Vec<FileInfo>, NodeError> {
        let (id, folder) = (self.house.id, folder.map(str::to_string));
        self.node
            .store()
            .read(move |c| table::list(c, id, folder.as_deref()))
            .await
            .map_err(refusal)
    }

    /// Writes `files` as ONE new version by `author`; its number and the
    /// files as written. Refused whole (nothing written) on a bad path, a
    /// file over `[files] max_file_bytes` or a house over its quota.
    pub async fn write_files(
        &self,
        author: &str,
        message: &str,
        files: Vec<NewFile>,
    ) -> Result<(i64, Vec<FileInfo>), NodeError> {
        let limits = self.node.settings().files;
        table::write_files(
            self.node.store(),
            self.house.id,
            author,
            message,
            files,
            limits,
        )
        .await
        .map_err(refusal)
    }

    /// Writes local bytes as the file `path` (a document is converted for
    /// search first, off the async threads): one new version.
    pub async fn put_file(
        &self,
        author: &str,
        message: &str,
        path: &str,
        bytes: Vec<u8>,
    ) -> Result<(i64, Vec<FileInfo>), NodeError> {
        let owned = path.to_string();
        let file =
            tokio::task::spawn_blocking(move || troupe_tools::house_files::prepare(&owned, bytes))
                .await
                .map_err(|e| NodeError::Refused(format!("preparing `{path}` failed: {e}")))?;
        self.write_files(author, message, vec![file]).await
    }

    /// The file at `path`, at house version `version` (the newest when
    /// `None`).
    pub async fn read_file(&self, path: &str, version: Option<i64>) -> Result<FileRead, NodeError> {
        let (id, owned) = (self.house.id, path.to_string());
        let found = self
            .node
            .store()
            .read(move |c| table::read(c, id, &owned, version))
            .await
            .map_err(refusal)?;
        found.ok_or_else(|| {
            let when = version
                .map(|v| format!(" at version {v}"))
                .unwrap_or_default();
            NodeError::Refused(format!(
                "there is no file `{path}` in house `{}`{when}; `troupe files ls {}` lists them",
                self.house.name, self.house.name
            ))
        })
    }

    /// Deletes each `(path, version seen)` with all its earlier versions as
    /// one new version; refused whole when any file changed since.
    pub async fn delete_files(
        &self,
        author: &str,
        message: &str,
        files: Vec<(String, i64)>,
    ) -> Result<i64, NodeError> {
        let (id, author, message) = (self.house.id, author.to_string(), message.to_string());
        self.node
            .store()
            .write(move |tx| table::delete(tx, id, &author, &message, &files))
            .await
            .map_err(refusal)
    }

    /// The versions of its files, newest first (those touching `path` when
    /// given), at most `limit`.
    pub async fn file_log(
        &self,
        path: Option<&str>,
        limit: usize,
    ) -> Result<Vec<VersionInfo>, NodeError> {
        let (id, path) = (self.house.id, path.map(str::to_string));
        self.node
            .store()
            .read(move |c| table::log(c, id, path.as_deref(), limit))
            .await
            .map_err(refusal)
    }

    /// Keyword search over its files' text, best first (what its last
    /// writes left pending is indexed first).
    pub async fn search_files(&self, query: &str, top_k: usize) -> Result<Vec<FileHit>, NodeError> {
        let (id, q) = (self.house.id, query.to_string());
        table::catch_up(self.node.store(), id)
            .await
            .map_err(refusal)?;
        self.node
            .store()
            .read(move |c| table::search(c, id, &q, top_k))
            .await
            .map_err(refusal)
    }
}

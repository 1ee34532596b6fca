//! The crash harness's house files workload and its check.
//!
//! Every worker writes, back to back, one new version of the same four
//! files of the house `crash` (three text files of [`FILE_BYTES`] and a
//! binary one), all four made from the write's token: the first line names
//! the token and the file, the rest follows from them. A kill lands in the
//! middle of a write (its contents, its rows), of its commit, or of the
//! search indexing the writer does after it. A token is noted in
//! `file-writes` before its write and again with its version once the
//! write returned (committed).
//!
//! The check ([`check`]) reads every version of the four files:
//!
//! - `file_versions_mixed`: a version whose four files are not all the
//!   whole files of that version's token (a torn or mixed write);
//! - `file_writes_lost`: an acknowledged write whose version is not there,
//!   or not with its token;
//! - `file_index_missing`: a current text file not indexed once the last
//!   worker stopped cleanly, or indexed from another version than its own.

use std::io::Write as _;

use serde_json::json;
use troupe_runtime::id::HouseId;
use troupe_runtime::rusqlite::Connection;
use troupe_runtime::store::house_files::{self as table, FileState, Indexing, NewFile};

use super::records::append_synced;
use super::worker::HOUSE;
use super::Files;
use crate::Runtime;

/// The files every write writes, together; the last one is binary.
pub const SHARED_FILES: [&str; 4] = [
    "shared/plan.md",
    "shared/notes.md",
    "shared/ledger.md",
    "shared/image.bin",
];

/// The size of each file.
pub const FILE_BYTES: usize = 48 * 1024;

/// The whole content of file `i` of the write `token`.
pub fn content(token: &str, i: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_BYTES + 64);
    let _ = writeln!(out, "{token} {i}");
    let mut h = token
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64 ^ i as u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    while out.len() < FILE_BYTES {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
        let _ = writeln!(out, "{token} line {h:016x} of file {i}");
    }
    if i == SHARED_FILES.len() - 1 {
        out.extend_from_slice(&[0, 1, 2, 3]);
    }
    out
}

/// Writes a new version of the four files, forever (until killed).
pub async fn drive(runtime: &Runtime, files: &Files, incarnation: u64) -> anyhow::Result<()> {
    let house = runtime.house(HOUSE).await?;
    for n in 0u64.. {
        let token = format!("i{incarnation}-f{n}");
        let new: Vec<NewFile> = SHARED_FILES
            .iter()
            .enumerate()
            .map(|(i, path)| NewFile {
                path: (*path).to_string(),
                bytes: content(&token, i),
                indexing: if i == SHARED_FILES.len() - 1 {
                    Indexing::Binary
                } else {
                    Indexing::Text
                },
            })
            .collect();
        append_synced(&files.file_writes, &format!("sent\t{token}\n"))?;
        let (version, _) = house.write_files("crash-harness", &token, new).await?;
        append_synced(&files.file_writes, &format!("ack\t{token}\t{version}\n"))?;
    }
    Ok(())
}

/// Checks every version of the four files; adds its counts to `out`.
pub fn check(
    db: &Connection,
    files: &Files,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let house: Option<String> = db
        .query_row("SELECT id FROM houses WHERE name = ?1", [HOUSE], |r| {
            r.get(0)
        })
        .ok();
    let Some(house) = house else {
        out.insert("file_versions".into(), json!(0));
        return Ok(());
    };
    let house: HouseId = house.parse()?;
    let versions = table::log(db, house, None, usize::MAX >> 1)?;
    let (mut written, mut mixed) = (0, 0);
    let mut tokens = std::collections::HashMap::new();
    for v in versions.iter().filter(|v| v.author == "crash-harness") {
        written += 1;
        tokens.insert(v.version, v.message.clone());
        let whole = v.changes.len() == SHARED_FILES.len()
            && SHARED_FILES.iter().enumerate().all(|(i, path)| {
                matches!(table::read(db, house, path, Some(v.version)),
                    Ok(Some(f)) if f.version == v.version && f.bytes == content(&v.message, i))
            });
        if !whole {
            mixed += 1;
        }
    }
    let (mut acknowledged, mut lost) = (0, 0);
    for line in super::records::read(&files.file_writes) {
        if let [kind, token, version] = line.as_slice() {
            if kind != "ack" {
                continue;
            }
            acknowledged += 1;
            let version: i64 = version.parse().unwrap_or(-1);
            if tokens.get(&version).map(String::as_str) != Some(token.as_str()) {
                lost += 1;
            }
        }
    }
    out.insert("file_versions".into(), json!(written));
    out.insert("file_writes_acknowledged".into(), json!(acknowledged));
    out.insert("file_versions_mixed".into(), json!(mixed));
    out.insert("file_writes_lost".into(), json!(lost));
    out.insert("file_index_missing".into(), json!(unindexed(db, house)?));
    Ok(())
}

/// Current text files not indexed from their own version, chunk for chunk.
fn unindexed(db: &Connection, house: HouseId) -> anyhow::Result<usize> {
    let mut missing = 0;
    for f in table::list(db, house, Some("shared"))? {
        if f.kind == "binary" {
            missing += usize::from(f.state != FileState::NotIndexable);
            continue;
        }
        let text = table::read(db, house, &f.path, None)?
            .and_then(|r| r.text)
            .unwrap_or_default();
        let (own, other): (i64, i64) = db.query_row(
            "SELECT COUNT(*) FILTER (WHERE version = ?3), COUNT(*) FILTER (WHERE version != ?3)
             FROM house_file_chunks WHERE house_id = ?1 AND path_key = ?2",
            troupe_runtime::rusqlite::params![
                house.to_string(),
                table::path::key(&f.path),
                f.version
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let whole = own as usize == table::chunks(&text).len() && other == 0;
        missing += usize::from(f.state != FileState::Indexed || !whole);
    }
    Ok(missing)
}

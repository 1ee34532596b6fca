//! Small named values that belong to no other table: markers, leases,
//! settings a process must share with another one on the same home.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::error::StoreError;

/// The value stored under `key`, if any.
pub fn get(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT value FROM kv WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

/// Stores `value` under `key`, replacing what was there.
pub fn set(tx: &Transaction<'_>, key: &str, value: &str) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO kv (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![key, value])?;
    Ok(())
}

/// Removes `key`; true if it was there.
pub fn remove(tx: &Transaction<'_>, key: &str) -> Result<bool, StoreError> {
    Ok(tx
        .prepare_cached("DELETE FROM kv WHERE key = ?1")?
        .execute([key])?
        == 1)
}

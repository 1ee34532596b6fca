//! Members' access tokens: what a person presents to the server.
//!
//! A token is a random secret shown once, when it is issued; the store keeps
//! only its SHA-256 (a token carries 256 random bits, so a fast hash is
//! enough: there is nothing to guess). Each token belongs to one member of
//! one house and authenticates only while it is not revoked and its member
//! is still in the house: removing a person from a house locks their tokens
//! out without touching them.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use crate::id::HouseId;

/// Migration 7: members' tokens, hashed; and the index that finds the
/// thread of a bot's conversation there (the server's event streams).
pub const TOKENS: &str = r#"
CREATE TABLE member_tokens (
    id         TEXT PRIMARY KEY,
    hash       BLOB NOT NULL UNIQUE,
    house_id   TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    handle     TEXT NOT NULL COLLATE NOCASE,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    used_at    TEXT
);
CREATE INDEX member_tokens_by_member ON member_tokens (house_id, handle);
CREATE INDEX thread_seats_by_conversation ON thread_seats (conversation_id);
"#;

/// A token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Its id (what `troupe token revoke` takes).
    pub id: String,
    /// The house.
    pub house: HouseId,
    /// The member it speaks for.
    pub handle: String,
    /// When it was issued.
    pub created_at: String,
    /// When it was revoked.
    pub revoked_at: Option<String>,
    /// When it was last presented (updated at most once a minute).
    pub used_at: Option<String>,
}

/// Records a token of `handle` in `house`, by the hash of its secret.
pub fn insert(
    tx: &Transaction<'_>,
    id: &str,
    hash: &[u8; 32],
    house: HouseId,
    handle: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO member_tokens (id, hash, house_id, handle, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![id, &hash[..], house.to_string(), handle, super::now()])?;
    Ok(())
}

/// The house and handle a secret's hash authenticates: a token not
/// revoked, of a person still a member of its house.
pub fn authenticate(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<(String, HouseId, String)>, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT t.id, t.house_id, m.handle FROM member_tokens t
             JOIN house_members m ON m.house_id = t.house_id AND m.handle = t.handle AND m.kind = 'human'
             WHERE t.hash = ?1 AND t.revoked_at IS NULL",
        )?
        .query_row(params![&hash[..]], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })
        .optional()?;
    row.map(|(id, house, handle)| Ok((id, super::conversations::parse_id(&house)?, handle)))
        .transpose()
}

/// Notes that token `id` was used now, if it was not in the last minute.
pub fn touch(tx: &Transaction<'_>, id: &str) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE member_tokens SET used_at = ?2 WHERE id = ?1
         AND (used_at IS NULL OR used_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 minute'))",
    )?
    .execute(params![id, super::now()])?;
    Ok(())
}

/// Revokes the token `id`, or every token of member `handle` when `id` is
/// a handle of `house`; how many were revoked.
pub fn revoke(
    tx: &Transaction<'_>,
    house: Option<HouseId>,
    id_or_handle: &str,
) -> Result<usize, StoreError> {
    let by_id = tx
        .prepare_cached(
            "UPDATE member_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL
             AND (?3 IS NULL OR house_id = ?3)",
        )?
        .execute(params![
            id_or_handle,
            super::now(),
            house.map(|h| h.to_string())
        ])?;
    if by_id > 0 {
        return Ok(by_id);
    }
    let Some(house) = house else { return Ok(0) };
    Ok(tx
        .prepare_cached(
            "UPDATE member_tokens SET revoked_at = ?3 WHERE house_id = ?1 AND handle = ?2
             AND revoked_at IS NULL",
        )?
        .execute(params![house.to_string(), id_or_handle, super::now()])?)
}

/// The tokens of `house` (every house's when `None`), newest first.
pub fn list(conn: &Connection, house: Option<HouseId>) -> Result<Vec<TokenInfo>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, house_id, handle, created_at, revoked_at, used_at FROM member_tokens
         WHERE ?1 IS NULL OR house_id = ?1 ORDER BY created_at DESC, id",
    )?;
    let rows = stmt.query_map(params![house.map(|h| h.to_string())], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, Option<String>>(5)?,
        ))
    })?;
    rows.map(|r| {
        let (id, house, handle, created_at, revoked_at, used_at) = r?;
        Ok(TokenInfo {
            id,
            house: super::conversations::parse_id(&house)?,
            handle,
            created_at,
            revoked_at,
            used_at,
        })
    })
    .collect()
}

/// A new token: its secret (shown once), its id and the hash to store.
pub struct Minted {
    /// The secret the member presents: `troupe_` and 43 URL-safe characters.
    pub secret: String,
    /// Its id, for lists and revocation.
    pub id: String,
    /// The SHA-256 of the secret.
    pub hash: [u8; 32],
}

/// Makes a new random token.
pub fn mint() -> Minted {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("troupe_{}", url_safe(&bytes));
    let hash = hash(&secret);
    let id = hash[..5].iter().map(|b| format!("{b:02x}")).collect();
    Minted { secret, id, hash }
}

/// The hash a secret is stored and looked up by.
pub fn hash(secret: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes()).into()
}

/// Unpadded URL-safe base64: the token stays one word in a header, a URL
/// or a shell.
fn url_safe(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_are_one_word_and_differ() {
        let (a, b) = (mint(), mint());
        assert_ne!(a.secret, b.secret);
        assert_eq!(a.secret.len(), "troupe_".len() + 43);
        assert!(a.secret[7..]
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_eq!(hash(&a.secret), a.hash);
        assert_eq!(a.id.len(), 10);
        assert_eq!(url_safe(b"\xfb\xff"), "-_8");
    }
}

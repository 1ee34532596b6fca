//! Members' tokens from Rust: issue, list, revoke, authenticate.
//!
//! A person reaches a house over the server with a token of theirs
//! ([`HouseRef::issue_token`]); the server asks [`Node::authenticate`] who
//! a presented secret speaks for. Secrets are shown once and stored hashed
//! (`troupe_runtime::store::tokens`).

use troupe_runtime::protocol::house::{House, Member, MemberKind};
use troupe_runtime::store::house as table;
use troupe_runtime::store::tokens::{self, TokenInfo};

use super::HouseRef;
use crate::node::{Node, NodeError};

/// A token just issued: the only time its secret is seen.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// Its id, for `troupe token revoke`.
    pub id: String,
    /// The secret to present as `Authorization: Bearer …`.
    pub secret: String,
}

/// Who a token speaks for.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The token's id.
    pub token: String,
    /// Its house.
    pub house: HouseRef,
    /// The person.
    pub member: Member,
}

impl HouseRef {
    /// Issues a new token for the person `handle` of this house.
    pub async fn issue_token(&self, handle: &str) -> Result<IssuedToken, NodeError> {
        let (house, owned) = (self.house.id, handle.to_string());
        let minted = tokens::mint();
        let (id, hash) = (minted.id.clone(), minted.hash);
        let member = self
            .node
            .store()
            .write(move |tx| {
                let member = table::member(tx, house, &owned)?;
                if matches!(&member, Some(m) if m.kind == MemberKind::Human) {
                    tokens::insert(tx, &id, &hash, house, &owned)?;
                }
                Ok(member)
            })
            .await?;
        match member {
            Some(m) if m.kind == MemberKind::Human => Ok(IssuedToken {
                id: minted.id,
                secret: minted.secret,
            }),
            Some(_) => Err(NodeError::Refused(format!(
                "`{handle}` is a bot; tokens are for people (bots act through their turns)"
            ))),
            None => Err(NodeError::Refused(format!(
                "`{handle}` is not a member of `{}`; add them with `troupe house add {} --human {handle}`",
                self.house.name, self.house.name
            ))),
        }
    }

    /// This house's tokens, newest first (never their secrets).
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, NodeError> {
        let house = self.house.id;
        Ok(self
            .node
            .store()
            .read(move |c| tokens::list(c, Some(house)))
            .await?)
    }

    /// Revokes the token with id `id_or_handle`, or every token of the
    /// member with that handle; how many were revoked.
    pub async fn revoke_tokens(&self, id_or_handle: &str) -> Result<usize, NodeError> {
        let (house, owned) = (self.house.id, id_or_handle.to_string());
        Ok(self
            .node
            .store()
            .write(move |tx| tokens::revoke(tx, Some(house), &owned))
            .await?)
    }
}

impl Node {
    /// Who the secret `secret` speaks for: `None` for an unknown or revoked
    /// token, or one whose person left the house.
    pub async fn authenticate(&self, secret: &str) -> Result<Option<Authenticated>, NodeError> {
        let hash = tokens::hash(secret);
        let found = self
            .store()
            .read(move |c| {
                let Some((token, house, handle)) = tokens::authenticate(c, &hash)? else {
                    return Ok(None);
                };
                let house: Option<House> = table::house(c, house)?;
                let member = house
                    .as_ref()
                    .map(|h| table::member(c, h.id, &handle))
                    .transpose()?
                    .flatten();
                Ok(house.zip(member).map(|(h, m)| (token, h, m)))
            })
            .await?;
        let Some((token, house, member)) = found else {
            return Ok(None);
        };
        let id = token.clone();
        // Best effort: when a token was last used is a hint, not a record.
        let _ = self.store().write(move |tx| tokens::touch(tx, &id)).await;
        Ok(Some(Authenticated {
            token,
            house: HouseRef {
                node: self.clone(),
                house,
            },
            member,
        }))
    }

    /// Revokes the token `id` in whichever house it is; whether one was.
    pub async fn revoke_token(&self, id: &str) -> Result<bool, NodeError> {
        let owned = id.to_string();
        Ok(self
            .store()
            .write(move |tx| tokens::revoke(tx, None, &owned))
            .await?
            > 0)
    }

    /// Every house's tokens, newest first.
    pub async fn all_tokens(&self) -> Result<Vec<TokenInfo>, NodeError> {
        Ok(self.store().read(|c| tokens::list(c, None)).await?)
    }
}

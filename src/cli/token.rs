//! `troupe token …`: the tokens people present to `troupe serve`.
//!
//! `troupe house add HOUSE --human HANDLE` issues a person's first token;
//! here a person gets another, and tokens are listed (never their secrets:
//! the store keeps only hashes) and revoked. Beside a running `troupe
//! serve`, issuing and revoking go through its API.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use troupe_runtime::store::tokens;

use serde_json::json;

use super::house::find_house;
use super::remote::{encode, Remote};
use super::view::View;
use super::Builder;

/// `troupe token`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe token issue acme ada      a token for the person `ada` of house `acme`
  troupe token list --json
  troupe token revoke TOKEN_ID")]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Issue a new token for a person of a house; it is printed once.
    Issue {
        /// The house.
        house: String,
        /// The person's handle.
        handle: String,
    },
    /// List tokens: id, house, person, issued, last used, revoked.
    List {
        /// Only this house's.
        house: Option<String>,
        /// One JSON object per token.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by its id; with --house, every token of a person.
    Revoke {
        /// The token's id (`troupe token list`), or a handle with --house.
        id: String,
        /// Revoke every token of the person ID names in this house.
        #[arg(long)]
        house: Option<String>,
    },
}

/// Runs `troupe token …`.
pub async fn token<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    args: TokenArgs,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    match args.command {
        TokenCommand::List { house, json } => {
            let view = read_only().await?;
            let houses = view.read(troupe_runtime::store::house::list_houses).await?;
            let only = match &house {
                Some(name) => Some(find_house(&view, name).await?.id),
                None => None,
            };
            for t in view.read(move |c| tokens::list(c, only)).await? {
                let house = houses
                    .iter()
                    .find(|h| h.id == t.house)
                    .map_or_else(|| t.house.to_string(), |h| h.name.clone());
                if json {
                    let mut value = serde_json::to_value(&t)?;
                    value["house_name"] = house.into();
                    println!("{value}");
                } else {
                    let state = match (&t.revoked_at, &t.used_at) {
                        (Some(at), _) => format!("revoked {at}"),
                        (None, Some(at)) => format!("last used {at}"),
                        (None, None) => "never used".into(),
                    };
                    println!(
                        "{}  {:<16} {:<16} issued {}  {state}",
                        t.id, house, t.handle, t.created_at
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TokenCommand::Issue { house, handle } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let path = format!("/houses/{}/tokens", encode(&house));
                let answer = remote.post(&path, &json!({ "handle": handle })).await?;
                let t = &answer["token"];
                println!("a token for `{handle}` of `{house}` (shown once; `troupe token revoke {}` revokes it):", t["id"].as_str().unwrap_or_default());
                println!("{}", t["secret"].as_str().unwrap_or_default());
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = builder.recover(false).build().await?;
            let issued =
                async { anyhow::Ok(runtime.house(&house).await?.issue_token(&handle).await?) }
                    .await;
            runtime.shutdown().await;
            let t = issued?;
            println!("a token for `{handle}` of `{house}` (shown once; `troupe token revoke {}` revokes it):", t.id);
            println!("{}", t.secret);
            Ok(ExitCode::SUCCESS)
        }
        TokenCommand::Revoke { id, house } => {
            let revoked = if let Some(remote) = Remote::find(builder.home_dir()) {
                revoke_remote(&remote, &id, house.as_deref()).await
            } else {
                revoke_here(builder, &id, house.as_deref()).await
            };
            match revoked? {
                0 => Err(anyhow::anyhow!(
                    "no live token `{id}`{}; `troupe token list` lists them",
                    house.map(|h| format!(" in `{h}`")).unwrap_or_default()
                )),
                n => {
                    println!("revoked {n} token(s)");
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
    }
}

/// Revokes token `id`, or with `house` every token of the person `id`
/// names there, on the home itself: how many.
async fn revoke_here(builder: Builder, id: &str, house: Option<&str>) -> anyhow::Result<usize> {
    let runtime = builder.recover(false).build().await?;
    let revoked = async {
        anyhow::Ok(match house {
            Some(h) => runtime.house(h).await?.revoke_tokens(id).await?,
            None => usize::from(runtime.node().revoke_token(id).await?),
        })
    }
    .await;
    runtime.shutdown().await;
    revoked
}

/// The same through a running server: `DELETE /api/tokens/{id}`, or for
/// a person, each of their live tokens `GET /api/people` lists.
async fn revoke_remote(remote: &Remote, id: &str, house: Option<&str>) -> anyhow::Result<usize> {
    let Some(house) = house else {
        return match remote.delete(&format!("/tokens/{}", encode(id))).await {
            Ok(_) => Ok(1),
            Err(e) if e.to_string().starts_with("no live token") => Ok(0),
            Err(e) => Err(e),
        };
    };
    let people = remote.get("/people").await?;
    let entry = people["houses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| {
            h["house"]["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(house))
                || h["house"]["id"] == house
        })
        .ok_or_else(|| anyhow::anyhow!("no house `{house}`; `troupe house list` lists them"))?;
    let mut n = 0;
    for t in entry["tokens"].as_array().into_iter().flatten() {
        let person = t["handle"].as_str().unwrap_or_default();
        if person.eq_ignore_ascii_case(id) && t["revoked_at"].is_null() {
            let token = t["id"].as_str().unwrap_or_default();
            remote.delete(&format!("/tokens/{}", encode(token))).await?;
            n += 1;
        }
    }
    Ok(n)
}

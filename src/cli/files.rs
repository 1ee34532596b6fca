//! `troupe files`: a house's shared files from the command line — list,
//! put local files, get one (to stdout or a file), the log of versions,
//! remove, search.
//!
//! Listings, reads, the log and search go by the rule of `source.rs`:
//! beside a running `troupe serve` they ask it (reaching a house of
//! another node of a cluster), else they open the store read-only; `put`
//! and `rm` start a node of the home or, beside a running server, go
//! through its API.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use troupe_runtime::house::OWNER;
use troupe_runtime::store::house_files as table;

use super::remote::{encode, Remote};
use super::source::Source;
use super::view::View;
use super::Builder;

/// `troupe files …`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe files put acme notes/plan.md ./plan.md -m \"first draft\"
  troupe files ls acme notes
  troupe files get acme notes/plan.md --version 1
  troupe files log acme notes/plan.md")]
pub struct FilesArgs {
    #[command(subcommand)]
    command: FilesCommand,
}

#[derive(Debug, Subcommand)]
enum FilesCommand {
    /// List a house's files with their version, size and search state.
    Ls {
        /// The house.
        house: String,
        /// Only the files under this folder.
        folder: Option<String>,
        /// One JSON object per file.
        #[arg(long)]
        json: bool,
    },
    /// Put local files into a house as ONE new version: `put HOUSE PATH LOCAL [PATH LOCAL]…`.
    Put {
        /// The house.
        house: String,
        /// Pairs of a house path and the local file to store there.
        #[arg(required = true, num_args = 2.., value_names = ["PATH", "LOCAL"])]
        pairs: Vec<String>,
        /// What this version changes.
        #[arg(long, short, default_value = "")]
        message: String,
        /// The author kept in the log.
        #[arg(long = "as", default_value = OWNER)]
        author: String,
    },
    /// Print a file (its bytes), or write it to a local file.
    Get {
        /// The house.
        house: String,
        /// The file's path in the house.
        path: String,
        /// As it was at this version.
        #[arg(long)]
        version: Option<i64>,
        /// Write it here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
        /// A document's text (what search reads) instead of its bytes.
        #[arg(long)]
        text: bool,
    },
    /// The versions of a house's files, newest first, with authors and messages.
    Log {
        /// The house.
        house: String,
        /// Only the versions that touched this file.
        path: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per version.
        #[arg(long)]
        json: bool,
    },
    /// Remove a file and all its versions, if it is still at the version you saw.
    Rm {
        /// The house.
        house: String,
        /// The file's path in the house.
        path: String,
        /// The version you saw (`troupe files ls` shows it). Without it: the
        /// file's only version, or, when it has several, its newest once you
        /// say yes on a terminal.
        #[arg(long)]
        version: Option<i64>,
        /// Why, kept in the log.
        #[arg(long, short, default_value = "")]
        message: String,
        /// The author kept in the log.
        #[arg(long = "as", default_value = OWNER)]
        author: String,
    },
    /// Keyword search over a house's files.
    Search {
        /// The house.
        house: String,
        /// The words.
        #[arg(required = true)]
        query: Vec<String>,
        /// At most this many hits.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
}

/// Runs `troupe files …`.
pub async fn files<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    args: FilesArgs,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    match args.command {
        FilesCommand::Ls {
            house,
            folder,
            json,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            for f in source.files(&house, folder.as_deref()).await? {
                if json {
                    println!("{}", serde_json::to_string(&f)?);
                } else {
                    println!(
                        "{:<40} v{:<5} {:>10}  {:<8} {}  {}",
                        f.path,
                        f.version,
                        indicatif::HumanBytes(f.size).to_string(),
                        f.kind,
                        f.state.label(),
                        f.author
                    );
                }
            }
        }
        FilesCommand::Get {
            house,
            path,
            version,
            out,
            text,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            let bytes = source.file(&house, &path, version, text).await?;
            match out {
                Some(out) => std::fs::write(&out, &bytes)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?,
                None => std::io::stdout().lock().write_all(&bytes)?,
            }
        }
        FilesCommand::Log {
            house,
            path,
            limit,
            json,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            for v in source.file_log(&house, path.as_deref(), limit).await? {
                if json {
                    println!("{}", serde_json::to_string(&v)?);
                } else {
                    let changes: Vec<String> = v
                        .changes
                        .iter()
                        .map(|c| {
                            format!("{}{}", if c.action == "delete" { "-" } else { "+" }, c.path)
                        })
                        .collect();
                    println!(
                        "version {:<5} {}  {:<12} {}{}",
                        v.version,
                        v.created_at.format("%Y-%m-%d %H:%M"),
                        v.author,
                        changes.join(" "),
                        if v.message.is_empty() {
                            String::new()
                        } else {
                            format!("  — {}", v.message)
                        }
                    );
                }
            }
        }
        FilesCommand::Search {
            house,
            query,
            limit,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            let hits = source.search_files(&house, &query.join(" "), limit).await?;
            for (i, hit) in hits.into_iter().enumerate() {
                let snippet = hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
                println!(
                    "[{}] {}#{}, version {} — {snippet}",
                    i + 1,
                    hit.path,
                    hit.chunk,
                    hit.version
                );
            }
        }
        FilesCommand::Put {
            house,
            pairs,
            message,
            author,
        } => {
            if pairs.len() % 2 != 0 {
                anyhow::bail!(
                    "give pairs of a house path and a local file: `troupe files put {house} brief.md ./brief.md`"
                );
            }
            let mut locals = Vec::new();
            for pair in pairs.chunks(2) {
                let bytes = std::fs::read(&pair[1]).map_err(|e| {
                    anyhow::anyhow!("cannot read {}: {e}; nothing was written", pair[1])
                })?;
                locals.push((pair[0].clone(), bytes));
            }
            // A bar for large files only, on a terminal.
            let total: u64 = locals.iter().map(|(_, b)| b.len() as u64).sum();
            let on = crate::progress::wanted(false) && total >= LARGE;
            let bar = crate::progress::bar(on, total, "storing", true);
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let done = put_remote(&remote, &house, locals, &message, &author, &bar).await;
                bar.finish_and_clear();
                return done;
            }
            let mut files = Vec::new();
            for (path, bytes) in locals {
                let size = bytes.len() as u64;
                files.push(
                    tokio::task::spawn_blocking(move || {
                        troupe_tools::house_files::prepare(&path, bytes)
                    })
                    .await?,
                );
                bar.inc(size);
            }
            bar.set_message("writing the version");
            let runtime = builder.recover(false).build().await?;
            let result = async {
                let h = runtime.house(&house).await?;
                anyhow::Ok(h.write_files(&author, &message, files).await?)
            }
            .await;
            bar.finish_and_clear();
            runtime.shutdown().await;
            let (version, written) = result?;
            for f in written {
                print_written(&f, version);
            }
        }
        FilesCommand::Rm {
            house,
            path,
            version,
            message,
            author,
        } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let version = match version {
                    Some(v) => v,
                    None => seen_version_remote(&remote, &house, &path).await?,
                };
                let query = format!(
                    "?version={version}&message={}&as={}",
                    encode(&message),
                    encode(&author)
                );
                let answer = remote
                    .delete(&format!("{}{query}", file_path(&house, &path)))
                    .await?;
                println!(
                    "removed `{path}` and all its versions (files version {})",
                    answer["version"]
                );
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = builder.recover(false).build().await?;
            let result = async {
                let h = runtime.house(&house).await?;
                let version = match version {
                    Some(v) => v,
                    None => seen_version(&h, &house, &path).await?,
                };
                let entry = vec![(path.clone(), version)];
                anyhow::Ok(h.delete_files(&author, &message, entry).await?)
            }
            .await;
            runtime.shutdown().await;
            let v = result?;
            println!("removed `{path}` and all its versions (files version {v})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// From this many bytes, `files put` shows a bar on a terminal.
const LARGE: u64 = 8 << 20;

/// `…/files/{path}` of the API, each segment of the house path encoded.
pub(super) fn file_path(house: &str, path: &str) -> String {
    let segments: Vec<String> = path.split('/').map(encode).collect();
    format!("/houses/{}/files/{}", encode(house), segments.join("/"))
}

/// A written file as `files put` prints it.
fn print_written(f: &table::FileInfo, version: i64) {
    println!(
        "{} → version {version} ({}, {})",
        f.path,
        indicatif::HumanBytes(f.size),
        f.state.label()
    );
}

/// `files put` through a running server: one `PUT` — one version — per
/// file, since the API writes one file at a time.
async fn put_remote(
    remote: &Remote,
    house: &str,
    locals: Vec<(String, Vec<u8>)>,
    message: &str,
    author: &str,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<ExitCode> {
    if locals.len() > 1 {
        eprintln!(
            "troupe: the home is served at {}; each file becomes its own version there",
            remote.url()
        );
    }
    let query = format!("?message={}&as={}", encode(message), encode(author));
    for (path, bytes) in locals {
        let size = bytes.len() as u64;
        let answer = remote
            .put_bytes(&format!("{}{query}", file_path(house, &path)), bytes)
            .await?;
        let version = answer["version"].as_i64().unwrap_or_default();
        let written: Vec<table::FileInfo> = serde_json::from_value(answer["files"].clone())?;
        bar.inc(size);
        bar.suspend(|| {
            for f in &written {
                print_written(f, version);
            }
        });
    }
    Ok(ExitCode::SUCCESS)
}

/// [`seen_version`] through a running server.
async fn seen_version_remote(remote: &Remote, house: &str, path: &str) -> anyhow::Result<i64> {
    let log = remote
        .get(&format!(
            "/houses/{}/versions?path={}&limit=2",
            encode(house),
            encode(path)
        ))
        .await?;
    let versions = log["versions"].as_array().cloned().unwrap_or_default();
    let newest = versions
        .first()
        .and_then(|v| v["version"].as_i64())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "there is no file `{path}` in house `{house}`; `troupe files ls {house}` lists them"
            )
        })?;
    confirm_newest(house, path, newest, versions.len())
}

/// The version `files rm` removes when none is given: the file's only one;
/// of several, the newest, once the person at the terminal says yes.
async fn seen_version(
    h: &troupe_actors::house::HouseRef,
    house: &str,
    path: &str,
) -> anyhow::Result<i64> {
    let newest = h.read_file(path, None).await?.version;
    let versions = h.file_log(Some(path), 2).await?.len();
    confirm_newest(house, path, newest, versions)
}

/// `newest` when it is the file's only version, or once the person at
/// the terminal says yes.
fn confirm_newest(house: &str, path: &str, newest: i64, versions: usize) -> anyhow::Result<i64> {
    use std::io::{BufRead, IsTerminal, Write};
    if versions <= 1 {
        return Ok(newest);
    }
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "`{path}` has several versions; give the one you saw with --version (the newest is {newest}; `troupe files log {house} {path}` lists them)"
        );
    }
    eprint!("`{path}` has several versions; remove it, as of version {newest}, with all of them? [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(newest)
    } else {
        anyhow::bail!("nothing was removed")
    }
}

//! `troupe thread …`: a house's threads — list, read, search, open,
//! archive, pin, and post.
//!
//! Beside a running `troupe serve`, every command goes through its API
//! (`src/cli/source.rs`, `src/cli/remote.rs`): in a cluster, that reaches
//! a house of another node. Without one, listings read the store
//! read-only and changes and posts start a node of the home. `thread
//! post` waits for the round it starts to settle and prints the bots'
//! answers as they land.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use troupe_actors::house::ThreadEvent;
use troupe_runtime::protocol::house::{MemberKind, ThreadInfo, ThreadMessage};
use troupe_runtime::protocol::Address;
use troupe_runtime::store::mailbox;

use serde_json::json;

use super::remote::{encode, Remote};
use super::source::Source;
use super::view::View;
use super::Builder;

/// `troupe thread`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  troupe thread create acme general
  troupe thread post acme general \"Who can review the launch notes?\"
  troupe thread read acme general
  troupe thread search acme \"launch notes\"")]
pub struct ThreadArgs {
    #[command(subcommand)]
    command: ThreadCommand,
}

#[derive(Debug, Subcommand)]
enum ThreadCommand {
    /// Open a named thread in a house.
    Create {
        /// The house.
        house: String,
        /// The thread's name, unique in the house.
        name: String,
        /// A tag (repeat for more).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// A member who takes part from the start (repeat for more).
        #[arg(long = "with")]
        with: Vec<String>,
    },
    /// List a house's threads, most recently active first.
    List {
        /// The house.
        house: String,
        /// Archived threads too.
        #[arg(long)]
        all: bool,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per thread.
        #[arg(long)]
        json: bool,
    },
    /// Post a message as a person, wait for the bots' answers and print them.
    Post {
        /// The house.
        house: String,
        /// The thread: its name, id or link.
        thread: String,
        /// The message.
        text: String,
        /// The person posting (a human member; the house's only person when left out).
        #[arg(long = "as")]
        author: Option<String>,
        /// Return once the post is committed.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the round, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// One JSON object per message that lands.
        #[arg(long)]
        json: bool,
    },
    /// Print a thread's messages, oldest first.
    Read {
        /// The house.
        house: String,
        /// The thread: its name, id or link.
        thread: String,
        /// Skip this many of the newest messages.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many messages.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// One JSON object per message.
        #[arg(long)]
        json: bool,
    },
    /// Search a house's threads (all words, accents ignored).
    Search {
        /// The house.
        house: String,
        /// The words.
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// How many hits.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// One JSON object per hit.
        #[arg(long)]
        json: bool,
    },
    /// Archive a thread: off the list, history kept.
    Archive {
        /// The house.
        house: String,
        /// The thread.
        thread: String,
    },
    /// Bring an archived thread back.
    Unarchive {
        /// The house.
        house: String,
        /// The thread.
        thread: String,
    },
    /// Pin a thread to the top of the house's lists (`list_threads pinned_only` finds it).
    Pin {
        /// The house.
        house: String,
        /// The thread: its name, id or link.
        thread: String,
    },
    /// Unpin a thread.
    Unpin {
        /// The house.
        house: String,
        /// The thread: its name, id or link.
        thread: String,
    },
}

/// A message as `thread read` and `thread post` print it: a line, or
/// with `json` the message as one JSON object.
pub(super) fn print_message(m: &ThreadMessage, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(m)?);
    } else {
        println!("{}", message_line(m));
    }
    Ok(())
}

/// A message as the CLI prints it: `[author] text`, each image it carries
/// as a link with its size and who provides it.
pub(super) fn message_line(m: &ThreadMessage) -> String {
    let mut line = format!("[{}] {}", m.author, m.text);
    for a in &m.attachments {
        let size = match (a.width, a.height) {
            (Some(w), Some(h)) => format!(", {w}×{h}"),
            _ => String::new(),
        };
        if !m.text.is_empty() {
            line.push_str("\n   ");
        }
        line.push_str(&format!(
            "🖼 {} <{}>{size} · {}",
            a.title, a.url, a.attribution
        ));
    }
    line
}

/// Runs `troupe thread …`.
pub async fn thread<F>(
    builder: Builder,
    read_only: impl FnOnce() -> F,
    args: ThreadArgs,
) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<View>>,
{
    match args.command {
        ThreadCommand::List {
            house,
            all,
            limit,
            json,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            for t in source.threads(&house, all, limit).await? {
                if json {
                    println!("{}", serde_json::to_string(&t)?);
                } else {
                    println!(
                        "{:<28} {:>5} messages  {}{}{}  {}",
                        t.label(),
                        t.messages,
                        t.last_activity.format("%Y-%m-%d %H:%M"),
                        if t.pinned { "  pinned" } else { "" },
                        if t.archived { "  archived" } else { "" },
                        t.participants.join(", ")
                    );
                }
            }
        }
        ThreadCommand::Read {
            house,
            thread,
            offset,
            limit,
            json,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            for m in source.messages(&house, &thread, offset, limit).await? {
                print_message(&m, json)?;
            }
        }
        ThreadCommand::Search {
            house,
            query,
            limit,
            json,
        } => {
            let source = Source::open(builder.home_dir(), read_only).await?;
            for hit in source.search(&house, &query.join(" "), limit).await? {
                if json {
                    println!("{}", serde_json::to_string(&hit)?);
                } else {
                    println!(
                        "{} · {} · {}: {}",
                        hit.thread_name.unwrap_or_else(|| hit.thread.to_string()),
                        hit.created_at.format("%Y-%m-%d %H:%M"),
                        hit.author,
                        hit.snippet
                    );
                }
            }
        }
        ThreadCommand::Create {
            house,
            name,
            tags,
            with,
        } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let path = format!("/houses/{}/threads", encode(&house));
                let body = json!({ "name": name, "tags": tags, "with": with, "as": "cli" });
                let answer = remote.post(&path, &body).await?;
                let t: ThreadInfo = serde_json::from_value(answer["thread"].clone())?;
                println!(
                    "opened thread `{name}` in `{house}` ({}); link {}",
                    t.id,
                    t.link()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = builder.recover(false).build().await?;
            let result = async {
                let h = runtime.house(&house).await?;
                anyhow::Ok(h.create_thread(Some(&name), &tags, "cli", &with).await?)
            }
            .await;
            runtime.shutdown().await;
            let t = result?;
            println!(
                "opened thread `{name}` in `{house}` ({}); link {}",
                t.info.id,
                t.info.link()
            );
        }
        ThreadCommand::Archive { house, thread } => {
            return archive(builder, &house, &thread, true).await
        }
        ThreadCommand::Unarchive { house, thread } => {
            return archive(builder, &house, &thread, false).await
        }
        ThreadCommand::Pin { house, thread } => return pin(builder, &house, &thread, true).await,
        ThreadCommand::Unpin { house, thread } => {
            return pin(builder, &house, &thread, false).await
        }
        ThreadCommand::Post {
            house,
            thread,
            text,
            author,
            no_wait,
            timeout,
            json,
        } => {
            if let Some(remote) = Remote::find(builder.home_dir()) {
                let code = remote
                    .post_in_thread(
                        &house,
                        &thread,
                        &text,
                        author.as_deref(),
                        no_wait,
                        Duration::from_secs(timeout),
                        json,
                    )
                    .await?;
                return Ok(ExitCode::from(code));
            }
            let runtime = builder.recover(false).build().await?;
            let result = post(
                &runtime, &house, &thread, &text, author, no_wait, timeout, json,
            )
            .await;
            runtime.shutdown().await;
            return result;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn archive(
    builder: Builder,
    house: &str,
    thread: &str,
    archived: bool,
) -> anyhow::Result<ExitCode> {
    let word = if archived { "archived" } else { "unarchived" };
    flag(builder, house, thread, Flag::Archived, archived, word).await
}

async fn pin(
    builder: Builder,
    house: &str,
    thread: &str,
    pinned: bool,
) -> anyhow::Result<ExitCode> {
    let word = if pinned { "pinned" } else { "unpinned" };
    flag(builder, house, thread, Flag::Pinned, pinned, word).await
}

/// A thread's flag `archive` and `pin` set.
#[derive(Clone, Copy)]
enum Flag {
    Archived,
    Pinned,
}

/// Sets a thread's flag, through a running server or on the home itself.
async fn flag(
    builder: Builder,
    house: &str,
    thread: &str,
    flag: Flag,
    on: bool,
    word: &str,
) -> anyhow::Result<ExitCode> {
    let done = if let Some(remote) = Remote::find(builder.home_dir()) {
        let (action, field) = match flag {
            Flag::Archived => ("archive", "archived"),
            Flag::Pinned => ("pin", "pinned"),
        };
        let path = format!(
            "/houses/{}/threads/{}/{action}",
            encode(house),
            encode(thread)
        );
        let answer = remote.post(&path, &json!({ field: on })).await?;
        answer["changed"].as_bool().unwrap_or(false)
    } else {
        let runtime = builder.recover(false).build().await?;
        let result = async {
            let t = runtime.house(house).await?.thread(thread).await?;
            anyhow::Ok(match flag {
                Flag::Archived => t.set_archived(on).await?,
                Flag::Pinned => t.set_pinned(on).await?,
            })
        }
        .await;
        runtime.shutdown().await;
        result?
    };
    if !done {
        anyhow::bail!("thread `{thread}` is {word} already");
    }
    println!("thread `{thread}` {word}");
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
async fn post(
    runtime: &crate::Runtime,
    house: &str,
    thread: &str,
    text: &str,
    author: Option<String>,
    no_wait: bool,
    timeout: u64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let h = runtime.house(house).await?;
    let author = match author {
        Some(a) => a,
        None => {
            let people: Vec<String> = h
                .members()
                .await?
                .into_iter()
                .filter(|m| m.kind == MemberKind::Human)
                .map(|m| m.handle)
                .collect();
            match people.as_slice() {
                [one] => one.clone(),
                [] => anyhow::bail!(
                    "`{house}` has no people; add one with `troupe house add {house} --human HANDLE`"
                ),
                _ => anyhow::bail!("`{house}` has several people ({}); say who posts with --as", people.join(", ")),
            }
        }
    };
    let t = h.thread(thread).await?;
    let mut events = runtime.node().thread_events();
    // The newest message before this post: what lands after it is printed.
    let before = t.read(0, 1).await?.first().map_or(0, |m| m.seq);
    let round = t.post(&author, text).await?;
    if no_wait {
        println!("posted ({round})");
        return Ok(ExitCode::SUCCESS);
    }
    let thread_id = t.info.id;
    let mut failed = false;
    // Each message once: printed as its event arrives, and at the end from
    // the store what landed without its event reaching this loop yet (a
    // message's event follows its commit).
    let mut printed = std::collections::HashSet::from([round]);
    let mut print = |m: &ThreadMessage| -> anyhow::Result<()> {
        if printed.insert(m.id) {
            print_message(m, json)?;
        }
        Ok(())
    };
    let both = async {
        let wait = async {
            loop {
                match events.recv().await {
                    // The round's answers, and what else lands in the thread
                    // meanwhile: a GIF a bot posts during its turn (a message
                    // of its own), a report of work handed to pi that ended
                    // before the round settled.
                    Ok(ThreadEvent::Posted(p)) if p.round == round || p.thread == thread_id => {
                        print(&p.message)?;
                    }
                    Ok(ThreadEvent::TurnFailed {
                        round: r,
                        bot,
                        reason,
                        ..
                    }) if r == round => {
                        failed = true;
                        print_failure(&bot, &reason, json);
                    }
                    Ok(ThreadEvent::Held {
                        round: r,
                        bot,
                        reason,
                        ..
                    }) if r == round => print_held(&bot, &reason, json),
                    Ok(ThreadEvent::RoundSettled { round: r, .. }) if r == round => {
                        return anyhow::Ok(())
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        anyhow::bail!("the node stopped before the round settled")
                    }
                }
            }
        };
        // Work the round handed to an outside executor (`delegate_task`) runs
        // in this process: it stays until that work reports, printing the
        // reports as they land here. An instance's end enqueues its report
        // for the thread in the transaction that records it, so "nothing
        // running" alone would leave before the thread posts that report.
        wait.await?;
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let inbox = Address::Thread(thread_id);
        loop {
            let inbox = inbox.clone();
            let busy = runtime
                .node()
                .store()
                .read(move |conn| {
                    let running = troupe_actors::delegation::record::running_for_threads(conn)?;
                    Ok(running > 0 || !mailbox::pending(conn, &inbox, 1)?.is_empty())
                })
                .await?;
            if !busy {
                for m in t.read_after(before, 1000).await? {
                    print(&m)?;
                }
                return anyhow::Ok(());
            }
            tokio::select! {
                event = events.recv() => match event {
                    Ok(ThreadEvent::Posted(p)) if p.thread == thread_id => print(&p.message)?,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        anyhow::bail!("the node stopped before the delegated work reported")
                    }
                },
                _ = tick.tick() => {}
            }
        }
    };
    match tokio::time::timeout(Duration::from_secs(timeout), both).await {
        Ok(r) => r.map(|()| {
            if failed {
                ExitCode::from(super::exit::FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }),
        Err(_) => anyhow::bail!(
            "the bots did not finish within {timeout} s; what they say later lands in the thread (`troupe thread read {house} {thread}`)"
        ),
    }
}

/// Says that `bot`'s turn in the round did not finish, and why: a line on
/// stderr, or with `--json` an object on stdout beside the messages.
/// A bot named in the post that was not offered a turn, and why.
pub(super) fn print_held(bot: &str, reason: &str, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::json!({"type": "held", "bot": bot, "reason": reason})
        );
    } else {
        eprintln!("troupe: `{bot}` was not offered a turn: {reason}");
    }
}

pub(super) fn print_failure(bot: &str, reason: &str, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::json!({"type": "turn_failed", "bot": bot, "reason": reason})
        );
    } else {
        eprintln!("troupe: `{bot}` did not answer: {reason}");
    }
}

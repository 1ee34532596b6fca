//! The listing commands: `bots`, `conversations`, `search`, `usage`,
//! `routines`, `tools` (read-only: see [`super::view`]), and `init`.

use std::process::ExitCode;

use troupe_runtime::home::Home;
use troupe_runtime::protocol::ActorKind;
use troupe_runtime::store::{conversations, search, usage};
use troupe_tools::table;

use super::view::View;

/// `troupe init`.
pub async fn init(home: Option<std::path::PathBuf>, force: bool) -> anyhow::Result<ExitCode> {
    let root = home.clone().map(Home::new).unwrap_or_else(Home::from_env);
    let new_home = !root.root().exists();
    // Taking the lock creates the folder.
    let lock = super::owner::lock(home, false).await?;
    let home = lock.home().clone();
    let report = troupe_runtime::config::init_home(&home, force);
    super::owner::release(lock);
    let mut report = report?;
    if new_home {
        report.created.insert(0, home.root().to_path_buf());
    }
    println!("troupe home: {}", home.root().display());
    for path in &report.created {
        println!("  created  {}", path.display());
    }
    for path in &report.kept {
        println!(
            "  kept     {} (already there; --force rewrites it)",
            path.display()
        );
    }
    for (path, old) in &report.replaced {
        println!(
            "  replaced {} (the old one is {})",
            path.display(),
            old.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `troupe bots`.
pub async fn bots(view: &View, json: bool) -> anyhow::Result<ExitCode> {
    for bot in view.bots().await? {
        if json {
            println!(
                "{}",
                serde_json::json!({"name": bot.spec.name, "title": bot.spec.title, "model": bot.spec.model, "description": bot.spec.description})
            );
            continue;
        }
        let model = if bot.spec.model.is_empty() {
            "(default model)"
        } else {
            &bot.spec.model
        };
        println!(
            "{:<16} {:<24} {model}  {}",
            bot.spec.name, bot.spec.title, bot.spec.description
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `troupe conversations`: the latest first, each with its size and its
/// title (or its first user message).
pub async fn conversations(
    view: &View,
    limit: usize,
    bot: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let bot = match bot {
        Some(name) => Some(view.bot(name).await?.id),
        None => None,
    };
    let filter = search::Filter {
        bot,
        ..search::Filter::default()
    };
    let rows = view
        .read(move |c| search::latest_conversations(c, &filter, limit))
        .await?;
    if rows.is_empty() && !json {
        println!("no conversations yet; `troupe run` or `troupe chat` starts one");
    }
    for row in rows {
        if json {
            println!(
                "{}",
                serde_json::json!({"id": row.id.to_string(), "bot": row.bot_name, "kind": row.kind.to_string(), "updated_at": row.updated_at, "messages": row.messages, "title": row.title, "first_user_message": row.first_user_message})
            );
            continue;
        }
        let about = if row.title.is_empty() {
            row.first_user_message.unwrap_or_default()
        } else {
            row.title
        };
        println!(
            "{}  {:<12} {:<12} {}  {:>5} msgs  {}",
            row.id,
            row.bot_name.as_deref().unwrap_or("?"),
            row.kind,
            row.updated_at.format("%Y-%m-%d %H:%M"),
            row.messages,
            one_line(&about, 60)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `text`'s first line, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    match first.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &first[..at]),
        None => first.to_string(),
    }
}

/// `troupe search QUERY`.
pub async fn search(
    view: &View,
    query: &str,
    limit: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let q = query.to_string();
    let hits = view
        .read(move |c| conversations::search_messages(c, &q, limit))
        .await?;
    // Read-only, this cannot index what the writer deferred; say so.
    let waiting = view
        .read(troupe_runtime::store::catch_up::unindexed_messages)
        .await?;
    if waiting > 0 {
        eprintln!(
            "troupe: {waiting} newer message(s) are not searchable yet; the process that owns \
             this home indexes them (at the latest when it stops, or at the next `troupe run`)"
        );
    }
    if hits.is_empty() && !json {
        println!("no message matches `{query}`");
    }
    for hit in hits {
        if json {
            println!(
                "{}",
                serde_json::json!({"conversation": hit.conversation.to_string(), "role": hit.role.to_string(), "created_at": hit.created_at, "snippet": hit.snippet})
            );
            continue;
        }
        println!(
            "{}  {:<9} {}  {}",
            hit.conversation,
            hit.role,
            hit.created_at.format("%Y-%m-%d %H:%M"),
            hit.snippet
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `troupe usage`.
pub async fn usage(view: &View, json: bool) -> anyhow::Result<ExitCode> {
    let rows = view.read(usage::by_bot_and_day).await?;
    let names: std::collections::HashMap<_, _> = view
        .bots()
        .await?
        .into_iter()
        .map(|b| (b.id, b.spec.name.clone()))
        .collect();
    if !json {
        println!(
            "{:<12} {:<16} {:>6} {:>10} {:>10} {:>10}",
            "day", "bot", "calls", "input", "output", "cost $"
        );
    }
    for row in rows {
        let bot = names.get(&row.bot).map(String::as_str).unwrap_or("?");
        if json {
            println!(
                "{}",
                serde_json::json!({"day": row.day.to_string(), "bot": bot, "calls": row.total.calls, "input_tokens": row.total.usage.input_tokens, "output_tokens": row.total.usage.output_tokens, "cost_usd": row.total.cost_usd})
            );
            continue;
        }
        println!(
            "{:<12} {:<16} {:>6} {:>10} {:>10} {:>10.4}",
            row.day,
            bot,
            row.total.calls,
            row.total.usage.input_tokens,
            row.total.usage.output_tokens,
            row.total.cost_usd
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `troupe routines`: every routine, when it fires next and how it last ran.
pub async fn routines(view: &View, json: bool) -> anyhow::Result<ExitCode> {
    use troupe_actors::routine::run::show;
    use troupe_actors::routine::table;

    let tz = view.config.agent.timezone;
    let rows = view
        .read(|c| {
            let out = table::list(c, None).and_then(|routines| {
                routines
                    .into_iter()
                    .map(|r| Ok((table::runs(c, r.id, 1)?.pop(), r)))
                    .collect::<Result<Vec<_>, table::RoutineError>>()
            });
            Ok(Some(out))
        })
        .await?
        .transpose()?
        .unwrap_or_default();
    if rows.is_empty() && !json {
        println!("no routines; a bot makes them with cronjob_manage");
    }
    for (last, r) in rows {
        if json {
            println!(
                "{}",
                serde_json::json!({"id": r.id.to_string(), "name": r.name, "owner": r.owner_bot, "status": r.status.to_string(), "schedule": r.schedule.text(), "next_fire_at": r.next_fire_at, "last_run": last.map(|run| serde_json::json!({"scheduled_for": run.scheduled_for, "status": run.status.to_string()}))})
            );
            continue;
        }
        let next = match r.next_fire_at {
            Some(at) => format!("next {}", show(at, tz)),
            None => "no next run".into(),
        };
        let last = match last {
            Some(run) => format!("last {} {}", show(run.scheduled_for, tz), run.status),
            None => "never ran".into(),
        };
        println!(
            "{:<16} {:<12} {:<7} {:<24} {next}; {last}",
            r.name,
            r.owner_bot,
            r.status,
            r.schedule.text()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `troupe tools`.
pub fn tools(json: bool) -> anyhow::Result<ExitCode> {
    let registry = troupe_tools::builtin();
    let mut rows = Vec::new();
    for tool in registry.iter() {
        let spec = tool.spec();
        let kinds: Vec<serde_json::Value> = ActorKind::ALL
            .iter()
            .map(|k| serde_json::json!({"kind": k.as_str(), "offer": table::offer(&spec.name, *k)}))
            .collect();
        rows.push(serde_json::json!({
            "name": spec.name,
            "exposure": spec.exposure,
            "flags": spec.flags,
            "kinds": kinds,
            "description": spec.description,
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<20} {:<10} {:<44} conv/bot/routine/subagent",
        "tool", "exposure", "flags"
    );
    for tool in registry.iter() {
        let spec = tool.spec();
        let f = &spec.flags;
        let flags: Vec<&str> = [
            (f.read_only, "read-only"),
            (f.failure_tolerant, "failure-tolerant"),
            (f.carried, "carried"),
            (f.pages_own_output, "pages-own-output"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        let offers: Vec<&str> = ActorKind::ALL
            .iter()
            .map(|k| match table::offer(&spec.name, *k) {
                table::Offer::Yes => "yes",
                table::Offer::No => "no",
                table::Offer::WithBots => "bots",
                table::Offer::WithBrowser => "browser",
            })
            .collect();
        let exposure = match spec.exposure {
            troupe_runtime::tool::Exposure::AlwaysOn => "always-on",
            troupe_runtime::tool::Exposure::Deferred => "deferred",
        };
        println!(
            "{:<20} {:<10} {:<44} {}",
            spec.name,
            exposure,
            flags.join(", "),
            offers.join("/")
        );
    }
    Ok(ExitCode::SUCCESS)
}

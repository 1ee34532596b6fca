//! `troupe demo`: a small house of bots at work, offline.
//!
//! The model is scripted (no network, no key): the main agent saves a
//! memory, delegates three tasks to subagents, messages another bot and
//! schedules a routine that fires at once. Everything goes through the real
//! runtime — actors, the durable mailbox, the store, the gate — and the demo
//! prints the transcript as the events arrive, then where the data is.
//! Then a house ([`house`]): a person and two bots in a thread, a bot that
//! opens another thread and posts there, and a bot answering a mention.

mod house;

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe_actors::events::NodeEvent;
use troupe_runtime::id::ConversationId;
use troupe_runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe_runtime::protocol::{AgentEvent, Message};

use crate::{BotSpec, Runtime};

/// The demo's scripted model: it answers by who is asking and what came last.
pub fn model() -> ScriptedProvider {
    ScriptedProvider::from_fn(|req: &ModelRequest| {
        if let Some(turn) = house::answer(req) {
            return turn;
        }
        let first = req.first_user_text();
        let last = req.last_user_text();
        // Subagents: one short answer per task.
        if let Some(task) = first.strip_prefix("Your task: ") {
            let goal = task.lines().next().unwrap_or_default();
            let answer = match goal {
                g if g.contains("venue") => "Lakeside Lodge: seats 20, free on the 12th, 480 EUR a day.",
                g if g.contains("food") => "Green Table caters vegetarian lunches at 18 EUR a head.",
                _ => "Agenda: 9:00 welcome, 9:30 roadmap, 12:00 lunch, 14:00 workshops, 17:00 wrap-up.",
            };
            return Turn::text(answer);
        }
        // The scribe bot, answering a message.
        if last.starts_with("[message from assistant") {
            return Turn::text("Invitation drafted: \"Join us at Lakeside Lodge on the 12th for our offsite — lunch is on us.\"");
        }
        // A routine run.
        if first.starts_with("[routine") || first.contains("Check the offsite RSVPs") {
            return Turn::text("RSVP check: 14 of 18 have answered yes.");
        }
        // The main agent.
        if last.starts_with("[notice: delegation]")
            && req.last_tool_result().map(|(name, _)| name).is_none()
        {
            return Turn::text(
                "The subagents are back: the venue, the caterer and the agenda are settled.",
            );
        }
        if last.starts_with("[notice: reply]")
            && req.last_tool_result().map(|(name, _)| name).is_none()
        {
            return Turn::text("The scribe drafted the invitation.");
        }
        if last.starts_with("[notice: routine]")
            && req.last_tool_result().map(|(name, _)| name).is_none()
        {
            return Turn::text("The daily RSVP routine ran.");
        }
        match req.last_tool_result().map(|(name, _)| name) {
            None => Turn::tool_call(
                "memory",
                json!({"target": "user", "action": "add", "content": "Plans a team offsite on the 12th; prefers vegetarian food."}),
            ),
            Some("memory") => Turn::tool_call(
                "delegate",
                json!({"tasks": [
                    {"goal": "Find a venue for 18 people on the 12th", "context": "Near the lake, under 500 EUR a day."},
                    {"goal": "Find vegetarian food for lunch", "context": "18 people, one lunch."},
                    {"goal": "Draft an agenda for the day", "context": "9:00 to 17:00, workshops in the afternoon."}
                ]}),
            ),
            Some("delegate") => Turn::tool_call(
                "message_agent",
                json!({"target": "scribe", "message": "Please draft a one-line invitation to the offsite at Lakeside Lodge on the 12th."}),
            ),
            Some("message_agent") => Turn::tool_call("tool_search", json!({"query": "cronjob_manage"})),
            Some("tool_search") => Turn::tool_call(
                "cronjob_manage",
                json!({"action": "create", "name": "rsvp-check", "schedule": "every day at 9am",
                       "prompt": "Check the offsite RSVPs and report how many said yes."}),
            ),
            Some("cronjob_manage") if !req.messages.iter().any(|m| matches!(m, Message::Assistant { tool_calls, .. } if tool_calls.iter().any(|c| c.arguments["action"] == "run"))) => {
                Turn::tool_call("cronjob_manage", json!({"action": "run", "job_id": "rsvp-check"}))
            }
            Some(_) => Turn::text(
                "Done: I saved your preference, sent three subagents to find a venue, food and an agenda, asked the scribe \
                 for an invitation, and scheduled a daily RSVP check (it has just run once).",
            ),
        }
    })
    .recording(false)
}

/// Runs the demo in `home` (a new folder when `None`) and prints its transcript.
pub async fn run(home: Option<PathBuf>) -> anyhow::Result<()> {
    let home = match home {
        Some(h) => h,
        None => std::env::temp_dir().join(format!(
            "troupe-demo-{}",
            ConversationId::new().as_uuid().simple()
        )),
    };
    std::fs::create_dir_all(&home)?;
    eprintln!(
        "troupe demo: working in {} (a home of its own; --home DIR chooses another)",
        home.display()
    );
    let (bus, mut events) = tokio::sync::broadcast::channel::<NodeEvent>(4096);
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(&home)
        .provider(Arc::new(model()))
        .event_bus(bus)
        .scheduler(true)
        .build()
        .await?;
    let scribe = runtime
        .spawn_bot(BotSpec::new(
            "scribe",
            "Scribe",
            "Writes short texts: invitations, notes, summaries.",
        ))
        .await?;
    let main = runtime.bot("assistant").await?;
    let mut names: HashMap<ConversationId, String> = HashMap::new();
    names.insert(main.conversation(), "assistant".into());
    names.insert(scribe.conversation(), "scribe".into());
    let mut out = std::io::stdout();
    writeln!(out, "troupe demo: a house with the main agent and a `scribe` bot, on a scripted model (offline).\n")?;
    let prompt = "Help me plan the team offsite on the 12th.";
    writeln!(out, "user → assistant: {prompt}")?;
    let _turn = main.send(prompt).await?;
    // The first turn, then one turn per notice: delegation report, the
    // scribe's reply, the routine's report.
    let wanted = ["delegation", "reply", "routine"];
    let mut seen: Vec<String> = Vec::new();
    let mut main_turns = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while main_turns < 1 + wanted.len() {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(e)) => e,
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(_)) | Err(_) => break,
        };
        let who = match names.get(&event.conversation) {
            Some(n) => n.clone(),
            None => {
                let id = event.conversation;
                let kind = runtime
                    .node()
                    .store()
                    .read(move |c| troupe_runtime::store::conversations::get_conversation(c, id))
                    .await
                    .ok()
                    .flatten()
                    .map(|row| row.kind)
                    .unwrap_or_default();
                let n = names.values().filter(|l| l.starts_with(&kind)).count() + 1;
                let label = if kind.is_empty() {
                    "agent".to_string()
                } else {
                    format!("{kind}-{n}")
                };
                names.insert(id, label.clone());
                label
            }
        };
        match &event.event {
            AgentEvent::ToolCallStarted { call } => {
                writeln!(out, "  [{who}] → {} {}", call.name, call.arguments)?;
            }
            AgentEvent::ToolCallFinished { name, result, .. } => {
                let first = result.text.lines().next().unwrap_or_default();
                writeln!(
                    out,
                    "  [{who}] {} {name}: {first}",
                    if result.is_error() { "✗" } else { "✓" }
                )?;
            }
            AgentEvent::Notice { topic, text } => {
                seen.push(topic.clone());
                writeln!(out, "\n  [{who}] ✉ notice ({topic}):")?;
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    writeln!(out, "      {line}")?;
                }
            }
            AgentEvent::TurnFinished { text, .. } => {
                if !text.is_empty() {
                    writeln!(out, "  [{who}] says: {text}")?;
                }
                if event.conversation == main.conversation() {
                    main_turns += 1;
                }
            }
            _ => {}
        }
    }
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !seen.iter().any(|s| s == w))
        .collect();
    if missing.is_empty() {
        house::run(&runtime, &mut out).await?;
    }
    writeln!(out, "\nEverything above is in {}:", home.display())?;
    writeln!(out, "  troupe.db          conversations, messages (searchable), the mailbox, delegations, routines, usage")?;
    writeln!(out, "  memory/USER.md     the memory the assistant saved")?;
    writeln!(out, "  config.toml        the configuration (commented)")?;
    writeln!(
        out,
        "Try: troupe --home {} conversations   |   troupe --home {} search venue   |   troupe --home {} thread read team offsite",
        home.display(),
        home.display(),
        home.display()
    )?;
    runtime.shutdown().await;
    if !missing.is_empty() {
        anyhow::bail!(
            "the demo did not see every notice it expected (missing: {})",
            missing.join(", ")
        );
    }
    Ok(())
}

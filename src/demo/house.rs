//! The demo's house: a person and two bots in a thread, a bot that opens a
//! thread and posts into it, and a bot that answers another's @mention.

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use troupe_runtime::model::{ModelRequest, Turn};
use troupe_runtime::protocol::house::ListenMode;

use crate::{Runtime, ThreadEvent};

/// The house bots' answers, or `None` when the request is not a turn in a
/// house thread.
pub fn answer(req: &ModelRequest) -> Option<Turn> {
    // The offer stays the latest user message until the turn ends (tool
    // results come back as tool messages).
    let offer = req.messages.iter().rev().find_map(|m| match m {
        troupe_runtime::protocol::Message::User { .. } => Some(m.text()),
        _ => None,
    })?;
    if !offer.starts_with("[thread `") {
        return None;
    }
    if offer.contains("as `scribe`") {
        return Some(Turn::text(
            "Invitation: \"Join us at Lakeside Lodge on the 12th — buses leave at 8:30, lunch is on us.\"",
        ));
    }
    Some(match req.last_tool_result().map(|(name, _)| name) {
        None => Turn::tool_call(
            "create_thread",
            json!({"name": "offsite-logistics", "tags": ["offsite"]}),
        ),
        Some("create_thread") => Turn::tool_call(
            "post_to_thread",
            json!({"thread": "offsite-logistics", "text": "Transport: one bus for 18 people on the 12th, leaving 8:30 from the office."}),
        ),
        Some(_) => Turn::text(
            "The venue is Lakeside Lodge, lunch by Green Table. I opened #offsite-logistics for transport. \
             @scribe, could you draft the invitation?",
        ),
    })
}

/// Builds the house and runs one round in it, printing what lands.
pub async fn run(runtime: &Runtime, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n— a house: the person `ada` and the bots `assistant` and `scribe` in a thread —\n"
    )?;
    let team = runtime.create_house("team").await?;
    team.add_human("ada", Some("Ada")).await?;
    team.add_bot("assistant", ListenMode::All).await?;
    team.add_bot("scribe", ListenMode::Mentions).await?;
    let people = ["ada".to_string(), "assistant".into(), "scribe".into()];
    let offsite = team
        .create_thread(Some("offsite"), &[], "ada", &people)
        .await?;
    let mut events = runtime.node().thread_events();
    let text = "Where do we stand on the offsite?";
    let round = offsite.post("ada", text).await?;
    let mut logistics_posted = false;
    let mut settled = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !(settled && logistics_posted) {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(e)) => e,
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(_)) | Err(_) => anyhow::bail!("the house's round did not finish in 30 s"),
        };
        match event {
            ThreadEvent::Posted(p) => {
                let thread = if p.thread == offsite.info.id {
                    "offsite".to_string()
                } else {
                    logistics_posted = true;
                    "offsite-logistics".to_string()
                };
                let via = if p.message.via.is_some() {
                    " (from #offsite)"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "  #{thread} [{}{via}] {}",
                    p.message.author, p.message.text
                )?;
            }
            ThreadEvent::Offered { bot, thread, .. } if thread == offsite.info.id => {
                writeln!(out, "  #offsite   → the director offers `{bot}` a turn")?;
            }
            ThreadEvent::RoundSettled { round: r, .. } if r == round => settled = true,
            _ => {}
        }
    }
    let threads = team
        .threads(troupe_runtime::protocol::house::ThreadFilter {
            limit: 10,
            ..Default::default()
        })
        .await?;
    let names: Vec<String> = threads.iter().map(|t| t.label()).collect();
    writeln!(
        out,
        "\n  house `team` now has the threads: {}",
        names.join(", ")
    )?;
    Ok(())
}

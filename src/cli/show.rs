//! `troupe show CONVERSATION`: one conversation's transcript, as stored —
//! every message with its tool calls and results, oldest first.

use std::process::ExitCode;

use serde_json::json;
use troupe_runtime::id::ConversationId;
use troupe_runtime::store::search::{self, ConversationSummary, Line};
use troupe_runtime::store::{conversations, StoreError};

use super::view::View;

/// What a transcript is read from.
struct Transcript {
    summary: ConversationSummary,
    continues: Option<ConversationId>,
    lines: Vec<Line>,
}

/// `troupe show`.
pub async fn show(view: &View, conversation: &str, json: bool) -> anyhow::Result<ExitCode> {
    let id = super::conversation_id(conversation)?;
    let transcript = view
        .read(move |c| {
            let Some(summary) = search::conversation_summary(c, id)? else {
                return Ok(None);
            };
            let continues =
                conversations::get_conversation(c, id)?.and_then(|r| r.previous_segment);
            let lines = search::read_messages(c, id, &[], 0, usize::MAX)?;
            Ok::<_, StoreError>(Some(Transcript {
                summary,
                continues,
                lines,
            }))
        })
        .await?;
    let Some(transcript) = transcript else {
        anyhow::bail!(
            "no conversation {id} in this home; `troupe conversations` lists the ones there are \
             (another home? say `--home DIR`)"
        );
    };
    if json {
        for line in &transcript.lines {
            println!("{}", line_json(line));
        }
    } else {
        print!("{}", render(&transcript));
    }
    Ok(ExitCode::SUCCESS)
}

fn line_json(line: &Line) -> serde_json::Value {
    json!({
        "seq": line.seq,
        "id": line.id.to_string(),
        "role": line.role,
        "text": line.text,
        "tools": line.tools,
        "created_at": line.created_at.to_rfc3339(),
    })
}

fn render(t: &Transcript) -> String {
    use std::fmt::Write as _;
    let s = &t.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  {}  {}  {} messages  created {}, updated {}",
        s.id,
        s.bot_name.as_deref().unwrap_or("?"),
        s.kind,
        s.messages,
        s.created_at.format("%Y-%m-%d %H:%M"),
        s.updated_at.format("%Y-%m-%d %H:%M"),
    );
    if !s.title.is_empty() {
        let _ = writeln!(out, "{}", s.title);
    }
    if let Some(previous) = t.continues {
        let _ = writeln!(
            out,
            "(continues {previous} after a compaction: `troupe show {previous}` has what came before)"
        );
    }
    for line in &t.lines {
        let head = match line.role.as_str() {
            "tool" => format!("tool {}", line.tools),
            role => role.to_string(),
        };
        let _ = writeln!(out, "\n[{}] {head}", line.created_at.format("%H:%M:%S"));
        for text in line.text.lines() {
            let _ = writeln!(out, "  {text}");
        }
        if line.role == "assistant" {
            for call in line.tools.lines() {
                let _ = writeln!(out, "  → {call}");
            }
        }
    }
    out
}

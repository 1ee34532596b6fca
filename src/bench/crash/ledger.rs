//! The crash harness's check of `ledger_append`'s side effects against the
//! calls and results the store holds.
//!
//! - `tools_run_twice`: a call id in the ledger more than once;
//! - `tools_missing`: a call whose stored result is a success (not
//!   "outcome unknown") with no run in the ledger;
//! - `calls_missing`: a run in the ledger of a call the store does not
//!   hold — a tool run before its call was committed. A record a kill cut
//!   off ([`super::records`]) counts too unless it is the beginning of the
//!   record of a call the store holds;
//! - `results_missing` / `results_duplicated`: a stored call without its
//!   result (but a routine run's, which is closed, not resumed) or with two.
//!
//! When `tools_missing` or `calls_missing` is not zero, `tools_detail`
//! names each case: the ledger line and the worker that wrote it (the kill
//! it ran before), the call id, and the store's rows of its conversation,
//! so a failure says what happened.

use std::collections::{HashMap, HashSet};

use serde_json::json;
use troupe_runtime::protocol::{Message, ToolStatus};
use troupe_runtime::rusqlite::Connection;

use super::model::LEDGER_TOOL;
use super::records;
use super::verify::Row;
use super::Files;

/// A `ledger_append` call the store holds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    /// Its conversation.
    pub conversation: String,
    /// Its `note` argument.
    pub note: String,
}

impl Call {
    /// The beginning of the ledger record its run writes (all but the
    /// worker's number).
    fn record(&self, id: &str) -> String {
        format!("{id}\t{}\t{}\t", self.conversation, self.note)
    }
}

/// What the ledger says ran, against the calls the store holds.
#[derive(Debug, Default)]
pub(super) struct Runs {
    /// Runs per call id: whole records, and cut-off ones whose id is whole.
    pub per_call: HashMap<String, usize>,
    /// The records of runs the store holds no call for.
    pub unheld: Vec<String>,
    /// Records a kill cut off.
    pub torn: usize,
}

/// Reads the ledger's whole `records` and its cut-off `torn` ones against
/// the stored `calls` (by id).
pub(super) fn runs(
    records: &[Vec<String>],
    torn: &[String],
    calls: &HashMap<String, Call>,
) -> Runs {
    let mut out = Runs {
        torn: torn.len(),
        ..Runs::default()
    };
    for record in records {
        let Some(id) = record.first() else {
            continue;
        };
        *out.per_call.entry(id.clone()).or_default() += 1;
        if record.len() != 4 || !calls.contains_key(id) {
            out.unheld.push(record.join("\t"));
        }
    }
    for fragment in torn {
        // The id is whole once its tab was written: the call began to run.
        if let Some((id, _)) = fragment.split_once('\t') {
            *out.per_call.entry(id.to_string()).or_default() += 1;
        }
        let held = calls.iter().any(|(id, call)| {
            let record = call.record(id);
            record.starts_with(fragment.as_str()) || fragment.starts_with(&record)
        });
        if !held {
            out.unheld.push(fragment.clone());
        }
    }
    out
}

/// Side effects against the calls and results the store holds; adds the
/// counts to `out`.
pub(super) fn check(
    db: &Connection,
    files: &Files,
    rows: &[Row],
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut stmt = db.prepare("SELECT id FROM conversations WHERE kind = 'routine_run'")?;
    let routine_runs = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<HashSet<_>, _>>()?;
    let mut calls: HashMap<String, Call> = HashMap::new();
    // An interrupted routine run is closed, not resumed: its last calls
    // keep no result, and their outcome is unknown.
    let mut closed_unanswered: HashSet<String> = HashSet::new();
    // Per call id: whether each of its results is a success, and where.
    let mut results: HashMap<String, Vec<bool>> = HashMap::new();
    let mut result_in: HashMap<String, String> = HashMap::new();
    for row in rows {
        match &row.message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls.iter().filter(|c| c.name == LEDGER_TOOL) {
                    if routine_runs.contains(&row.conversation) {
                        closed_unanswered.insert(call.id.clone());
                    }
                    let note = call.arguments["note"].as_str().unwrap_or_default();
                    calls.insert(
                        call.id.clone(),
                        Call {
                            conversation: row.conversation.clone(),
                            note: note.to_string(),
                        },
                    );
                }
            }
            Message::Tool {
                call_id,
                name,
                result,
            } if name == LEDGER_TOOL => {
                let unknown =
                    result.data.get("outcome").and_then(|o| o.as_str()) == Some("unknown");
                results
                    .entry(call_id.clone())
                    .or_default()
                    .push(result.status == ToolStatus::Ok && !unknown);
                result_in.insert(call_id.clone(), row.conversation.clone());
            }
            _ => {}
        }
    }
    let records = records::read(&files.ledger);
    let runs = runs(&records, &records::torn(&files.ledger), &calls);
    let run = |id: &str| runs.per_call.get(id).copied().unwrap_or(0);
    let unknown = results.values().filter(|r| r.iter().all(|ok| !ok)).count();
    let not_run: Vec<&String> = results
        .iter()
        .filter(|(id, r)| r.contains(&true) && run(id) == 0)
        .map(|(id, _)| id)
        .collect();
    out.insert("tool_calls".into(), json!(calls.len()));
    out.insert(
        "tools_run".into(),
        json!(runs.per_call.values().sum::<usize>()),
    );
    out.insert("ledger_records_torn".into(), json!(runs.torn));
    out.insert("outcome_unknown".into(), json!(unknown));
    out.insert(
        "tools_run_twice".into(),
        json!(runs.per_call.values().filter(|n| **n > 1).count()),
    );
    out.insert("tools_missing".into(), json!(not_run.len()));
    out.insert("calls_missing".into(), json!(runs.unheld.len()));
    out.insert(
        "results_missing".into(),
        json!(calls
            .keys()
            .filter(|id| !results.contains_key(*id) && !closed_unanswered.contains(*id))
            .count()),
    );
    out.insert(
        "results_duplicated".into(),
        json!(results.values().filter(|r| r.len() > 1).count()),
    );
    if !runs.unheld.is_empty() || !not_run.is_empty() {
        let unheld: Vec<_> = runs
            .unheld
            .iter()
            .map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                let conversation = fields.get(1).copied().unwrap_or_default();
                json!({
                    "ledger_line": line,
                    "call_id": fields.first(),
                    "worker": fields.get(3),
                    "stored": conversation_rows(rows, conversation),
                    "ledger": ledger_of(&records, conversation),
                })
            })
            .collect();
        let not_run: Vec<_> = not_run
            .iter()
            .map(|id| {
                let conversation = result_in.get(*id).map(String::as_str).unwrap_or_default();
                json!({
                    "call_id": id,
                    "conversation": conversation,
                    "stored": conversation_rows(rows, conversation),
                    "ledger": ledger_of(&records, conversation),
                })
            })
            .collect();
        out.insert(
            "tools_detail".into(),
            json!({"runs_without_their_call": unheld, "results_without_their_run": not_run}),
        );
    }
    Ok(())
}

/// The store's rows of `conversation`, one short line each.
fn conversation_rows(rows: &[Row], conversation: &str) -> Vec<String> {
    let clip = |text: &str| text.chars().take(100).collect::<String>();
    rows.iter()
        .filter(|r| r.conversation == conversation)
        .map(|r| match &r.message {
            Message::User { content } => format!("{} user: {}", r.id, clip(content)),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
                format!(
                    "{} assistant: {} [calls {}]",
                    r.id,
                    clip(content),
                    ids.join(" ")
                )
            }
            Message::Tool {
                call_id, result, ..
            } => format!(
                "{} result of {call_id}: {:?} {}",
                r.id,
                result.status,
                clip(&result.text)
            ),
        })
        .collect()
}

/// The ledger's records of `conversation`.
fn ledger_of(records: &[Vec<String>], conversation: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.get(1).map(String::as_str) == Some(conversation))
        .map(|r| r.join("\t"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::records::{append_synced, read, seal, torn};
    use super::*;
    use std::io::Write as _;

    fn record(id: &str, conversation: &str, worker: u64) -> String {
        format!("{id}\t{conversation}\t{id}\t{worker}\n")
    }

    /// The one failure of the crash test (seed 7): worker 4 killed inside
    /// its ledger write, in the call id; worker 5's first run after it.
    #[test]
    fn a_record_cut_off_in_its_id_hides_nothing_once_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger");
        let calls: HashMap<String, Call> = [("La-0", "c1"), ("Lb-1", "c1"), ("Lc-0", "c2")]
            .into_iter()
            .map(|(id, conversation)| {
                let call = Call {
                    conversation: conversation.into(),
                    note: id.into(),
                };
                (id.to_string(), call)
            })
            .collect();
        let killed = |ledger: &std::path::Path| {
            append_synced(ledger, &record("La-0", "c1", 4)).unwrap();
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(ledger)
                .unwrap();
            file.write_all(&record("Lb-1", "c1", 4).as_bytes()[..3])
                .unwrap();
        };

        // Unsealed, as before: the next run is glued to the fragment.
        killed(&ledger);
        append_synced(&ledger, &record("Lc-0", "c2", 5)).unwrap();
        let glued = runs(&read(&ledger), &torn(&ledger), &calls);
        assert_eq!(glued.unheld, vec!["Lb-Lc-0\tc2\tLc-0\t5"]);
        assert!(!glued.per_call.contains_key("Lc-0"));

        // Sealed by the next worker before it writes: nothing is missing.
        std::fs::remove_file(&ledger).unwrap();
        killed(&ledger);
        seal(&ledger).unwrap();
        append_synced(&ledger, &record("Lc-0", "c2", 5)).unwrap();
        let sealed = runs(&read(&ledger), &torn(&ledger), &calls);
        assert_eq!(sealed.unheld, Vec::<String>::new());
        assert_eq!(sealed.torn, 1);
        assert_eq!(sealed.per_call.get("Lc-0"), Some(&1));
        assert_eq!(sealed.per_call.get("La-0"), Some(&1));
    }

    #[test]
    fn a_cut_off_record_no_stored_call_begins_is_a_run_without_its_call() {
        let calls: HashMap<String, Call> = [(
            "La-0".to_string(),
            Call {
                conversation: "c1".into(),
                note: "La-0".into(),
            },
        )]
        .into_iter()
        .collect();
        let fragments = vec![
            "La-0\tc1\tLa".to_string(),
            "La-0\tc1\tLa-0\t3".to_string(),
            "Lz-0\tc1".to_string(),
            "Lq".to_string(),
        ];
        let found = runs(&[], &fragments, &calls);
        assert_eq!(found.unheld, vec!["Lz-0\tc1", "Lq"]);
        // Cut off after the id's tab: a run of that call, twice here.
        assert_eq!(found.per_call.get("La-0"), Some(&2));
        assert_eq!(found.per_call.get("Lz-0"), Some(&1));
        assert_eq!(found.torn, 4);
    }
}

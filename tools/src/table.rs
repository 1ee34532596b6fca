//! Who has which tool: the one table that decides, for each kind of actor,
//! which tools it is offered before a bot's own list narrows them.
//!
//! Conversation is the main agent talking with the user; Bot is a bot's
//! conversation; RoutineRun is one run of a routine; Subagent is a task of a
//! delegation. A tool not in the table (a custom tool of the Rust API, an MCP
//! tool) is offered to every kind.

use troupe_runtime::protocol::ActorKind;

/// Whether one kind of actor is offered a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    /// Offered.
    Yes,
    /// Never offered.
    No,
    /// Offered only when the home has at least one bot (`message_agent`).
    WithBots,
    /// Offered only where a browser was found or configured
    /// (`browser_exec`; the tool itself checks).
    WithBrowser,
}

/// One row: a tool and its offer to conversation, bot, routine run, subagent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    /// The tool.
    pub tool: &'static str,
    /// Offer to the main agent's conversation.
    pub conversation: Offer,
    /// Offer to a bot (then narrowed by the bot's own list).
    pub bot: Offer,
    /// Offer to a routine run.
    pub routine_run: Offer,
    /// Offer to a subagent.
    pub subagent: Offer,
}

use Offer::{No, WithBots, WithBrowser, Yes};

const fn row(
    tool: &'static str,
    conversation: Offer,
    bot: Offer,
    routine_run: Offer,
    subagent: Offer,
) -> Row {
    Row {
        tool,
        conversation,
        bot,
        routine_run,
        subagent,
    }
}

/// The table, in the order the tools are registered.
pub const TABLE: &[Row] = &[
    row("read_file", Yes, Yes, Yes, Yes),
    row("write_file", Yes, Yes, Yes, Yes),
    row("edit_file", Yes, Yes, Yes, Yes),
    row("find_files", Yes, Yes, Yes, Yes),
    row("run_command", Yes, Yes, Yes, Yes),
    row("web_search", Yes, Yes, Yes, Yes),
    row("web_fetch", Yes, Yes, Yes, Yes),
    row(
        "browser_exec",
        WithBrowser,
        WithBrowser,
        WithBrowser,
        WithBrowser,
    ),
    row("send_gif", Yes, Yes, No, No),
    row("memory", Yes, Yes, Yes, No),
    row("ask_user", Yes, Yes, No, No),
    row("delegate", Yes, Yes, Yes, No),
    row("skill_manage", Yes, Yes, Yes, Yes),
    row("use_skill", Yes, Yes, Yes, Yes),
    row("conversation_search", Yes, Yes, Yes, Yes),
    row("delegation_search", Yes, Yes, Yes, No),
    row("executor_accounts", Yes, Yes, Yes, No),
    row("plan", Yes, Yes, Yes, Yes),
    row("cronjob_manage", Yes, Yes, No, No),
    row("message_agent", WithBots, WithBots, No, No),
    row("bot_create", Yes, No, No, No),
    // The house tools: offered only in a house thread (or, `update_self`,
    // to a bot allowed to rewrite itself), which routines and subagents are not.
    row("read_thread", Yes, Yes, No, No),
    row("ask_thread", Yes, Yes, No, No),
    row("search_threads", Yes, Yes, No, No),
    row("list_threads", Yes, Yes, No, No),
    row("list_thread_participants", Yes, Yes, No, No),
    row("post_to_thread", Yes, Yes, No, No),
    row("create_thread", Yes, Yes, No, No),
    row("archive_thread", Yes, Yes, No, No),
    row("add_thread_participant", Yes, Yes, No, No),
    row("remove_thread_participant", Yes, Yes, No, No),
    row("create_agent", Yes, Yes, No, No),
    row("list_house_members", Yes, Yes, No, No),
    row("update_self", Yes, Yes, No, No),
    // The environment tools: offered only in a house thread, like the
    // house tools (`create_environment` only while it has no environment).
    row("create_environment", Yes, Yes, No, No),
    row("list_sandboxes", Yes, Yes, No, No),
    row("delegate_task", Yes, Yes, No, No),
    // The house files: offered only in a house thread, like the house tools.
    row("search_files", Yes, Yes, No, No),
    row("list_files", Yes, Yes, No, No),
    row("delete_file", Yes, Yes, No, No),
    row("troupe_docs", Yes, Yes, Yes, Yes),
    row("tool_search", Yes, Yes, Yes, Yes),
];

/// The table's row for `tool`, if it has one.
pub fn row_of(tool: &str) -> Option<&'static Row> {
    // Asked for every tool of every new conversation: one hash of the name
    // (Fx: a few instructions for a short name), not a walk of the rows.
    static ROWS: std::sync::OnceLock<rustc_hash::FxHashMap<&'static str, &'static Row>> =
        std::sync::OnceLock::new();
    ROWS.get_or_init(|| TABLE.iter().map(|r| (r.tool, r)).collect())
        .get(tool)
        .copied()
}

/// The offer of `tool` to `kind`.
pub fn offer(tool: &str, kind: ActorKind) -> Offer {
    match row_of(tool) {
        None => Yes,
        Some(r) => match kind {
            ActorKind::Conversation => r.conversation,
            ActorKind::Bot => r.bot,
            ActorKind::RoutineRun => r.routine_run,
            ActorKind::Subagent => r.subagent,
        },
    }
}

/// Whether `kind` is offered `tool`, given whether the home has a bot.
pub fn is_offered(tool: &str, kind: ActorKind, home_has_bots: bool) -> bool {
    match offer(tool, kind) {
        Yes => true,
        No => false,
        WithBots => home_has_bots,
        WithBrowser => true,
    }
}

/// A bot's own narrowing: its `tools` list (all when empty) minus its `deny` list.
pub fn allowed_by_lists(tool: &str, allow: &[String], deny: &[String]) -> bool {
    let listed = |list: &[String]| list.iter().any(|p| p == tool || glob_match(p, tool));
    (allow.is_empty() || listed(allow)) && !listed(deny)
}

/// `*` matches any run of characters (for `mcp__github__*`).
fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            name.starts_with(head) && {
                let tail = &name[head.len()..];
                (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob_match(rest, &tail[i..]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_by_its_name_and_names_are_unique() {
        let mut names: Vec<&str> = TABLE.iter().map(|r| r.tool).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len(), "a tool has two rows");
        for row in TABLE {
            let found = row_of(row.tool).expect(row.tool);
            assert_eq!(found.tool, row.tool);
            assert_eq!(
                ActorKind::ALL.map(|kind| offer(found.tool, kind)),
                ActorKind::ALL.map(|kind| match kind {
                    ActorKind::Conversation => row.conversation,
                    ActorKind::Bot => row.bot,
                    ActorKind::RoutineRun => row.routine_run,
                    ActorKind::Subagent => row.subagent,
                }),
                "{}",
                row.tool
            );
        }
        assert!(row_of("no_such_tool").is_none());
        assert!(row_of("").is_none());
    }

    #[test]
    fn subagents_and_routine_runs_are_withheld_what_the_table_says() {
        for tool in [
            "memory",
            "ask_user",
            "delegate",
            "delegation_search",
            "executor_accounts",
            "cronjob_manage",
            "message_agent",
            "bot_create",
        ] {
            assert!(!is_offered(tool, ActorKind::Subagent, true), "{tool}");
        }
        for tool in ["ask_user", "cronjob_manage", "message_agent", "bot_create"] {
            assert!(!is_offered(tool, ActorKind::RoutineRun, true), "{tool}");
        }
        assert!(is_offered("delegate", ActorKind::RoutineRun, true));
        assert!(is_offered("plan", ActorKind::Subagent, false));
        assert!(!is_offered("bot_create", ActorKind::Bot, true));
        assert!(!is_offered("message_agent", ActorKind::Conversation, false));
        assert!(is_offered("message_agent", ActorKind::Conversation, true));
        assert!(
            is_offered("mcp__fs__read", ActorKind::Subagent, false),
            "tools outside the table go to all"
        );
    }

    #[test]
    fn a_bots_lists_narrow_its_tools() {
        let allow = vec!["read_file".to_string(), "mcp__gh__*".to_string()];
        assert!(allowed_by_lists("read_file", &allow, &[]));
        assert!(allowed_by_lists("mcp__gh__create_issue", &allow, &[]));
        assert!(!allowed_by_lists("run_command", &allow, &[]));
        assert!(allowed_by_lists("run_command", &[], &[]));
        assert!(!allowed_by_lists(
            "run_command",
            &[],
            &["run_command".to_string()]
        ));
        assert!(
            !allowed_by_lists("mcp__gh__x", &allow, &["mcp__gh__*".to_string()]),
            "deny beats allow"
        );
    }
}

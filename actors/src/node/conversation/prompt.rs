//! The system prompt: the bot's mission, a frozen snapshot of its memory and
//! where it works.
//!
//! It is built once when a conversation starts and kept unchanged for the
//! conversation's life, so every model call shares the same prefix and the
//! provider's prompt cache holds. Memory edits made during the conversation
//! show from the next one.

/// What the system prompt is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptParts {
    /// The bot's mission.
    pub mission: String,
    /// The shared user profile, as loaded (or its blocked notice).
    pub user_profile: String,
    /// The agent's own notes, as loaded (or its blocked notice).
    pub notes: String,
    /// The working folder.
    pub cwd: String,
    /// The date the conversation started (UTC, `YYYY-MM-DD`: [`today`]).
    pub date: String,
    /// Other agents of the home, `name: description` (for `message_agent`).
    pub roster: Vec<String>,
}

/// Builds the system prompt.
pub fn system_prompt(parts: &PromptParts) -> String {
    let mut out = parts.mission.trim().to_string();
    out.push_str(&format!(
        "\n\n# Where you are\nWorking folder: {}\nDate: {}",
        parts.cwd, parts.date
    ));
    if !parts.user_profile.trim().is_empty() {
        out.push_str("\n\n# About the user (memory: user)\n");
        out.push_str(parts.user_profile.trim());
    }
    if !parts.notes.trim().is_empty() {
        out.push_str("\n\n# Your notes (memory: memory)\n");
        out.push_str(parts.notes.trim());
    }
    if !parts.roster.is_empty() {
        out.push_str("\n\n# Other agents you can message\n");
        out.push_str(&parts.roster.join("\n"));
    }
    out
}

/// Today's date (UTC) as the prompt shows it, `YYYY-MM-DD`: printed field
/// by field, which costs less than `NaiveDate`'s `Display` (every new
/// conversation prints it).
pub(crate) fn today() -> String {
    use chrono::Datelike;
    let date = chrono::Utc::now().date_naive();
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_prints_as_a_naive_date_does() {
        let before = chrono::Utc::now().date_naive().to_string();
        let printed = today();
        let after = chrono::Utc::now().date_naive().to_string();
        assert!(printed == before || printed == after, "{printed}");
    }

    #[test]
    fn empty_sections_are_left_out() {
        let parts = PromptParts {
            mission: "Be useful.".into(),
            cwd: "/w".into(),
            date: "2026-11-30".into(),
            notes: "- likes tea".into(),
            ..PromptParts::default()
        };
        assert_eq!(
            system_prompt(&parts),
            "Be useful.\n\n# Where you are\nWorking folder: /w\nDate: 2026-11-30\n\n# Your notes (memory: memory)\n- likes tea"
        );
    }
}

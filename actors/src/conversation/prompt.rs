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
    /// The date the conversation started, in the user's time zone.
    pub date: String,
    /// Other agents of the home, `name: description` (for `message_agent`).
    pub roster: Vec<String>,
}

/// Keeps one copy of each distinct system prompt: the conversations of a
/// bot started the same day with the same memory share theirs.
#[derive(Debug, Default)]
pub struct Prompts {
    known: parking_lot::Mutex<std::collections::HashMap<u64, std::sync::Weak<str>>>,
}

impl Prompts {
    /// The shared copy of `prompt`.
    pub fn intern(&self, prompt: String) -> std::sync::Arc<str> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        prompt.hash(&mut h);
        let key = h.finish();
        let mut known = self.known.lock();
        if let Some(shared) = known.get(&key).and_then(std::sync::Weak::upgrade) {
            if *shared == *prompt {
                return shared;
            }
        }
        // Forget prompts nobody holds any more before adding one.
        if known.len() >= 64 {
            known.retain(|_, weak| weak.strong_count() > 0);
        }
        let shared: std::sync::Arc<str> = prompt.into();
        known.insert(key, std::sync::Arc::downgrade(&shared));
        shared
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_prompts_share_one_copy() {
        let prompts = Prompts::default();
        let a = prompts.intern("Be useful.".to_string());
        let b = prompts.intern("Be useful.".to_string());
        let c = prompts.intern("Be brief.".to_string());
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert!(!std::sync::Arc::ptr_eq(&a, &c));
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

//! The house: a tenant of people and bots talking in threads.
//!
//! This module holds the rules of names and `@mentions`, and names what
//! the house tools share with the actors: the [`Seat`] and [`HouseScope`] a
//! bot's conversation carries in its services, [`HouseServices`] (the
//! handle through which the house tools reach the actors) — defined with
//! the tools' services ([`crate::tool::services`]), whose context holds
//! them typed. The records
//! and the durable messages of a thread are wire types, in
//! [`crate::protocol::house`]; the tables live in [`crate::store::house`];
//! the thread actors and their directors in the actors crate.

pub use crate::tool::services::houses::{AgentDraft, HouseServices, Houses, SelfUpdate};
pub use crate::tool::services::{HouseScope, Seat};

/// The house every home has: the owner and their bots. A home written
/// before houses existed becomes this house when its store migrates.
pub const DEFAULT_HOUSE: &str = "home";

/// The human member every home starts with.
pub const OWNER: &str = "owner";

/// The `@handles` a text mentions, lower-cased, in order, once each.
pub fn mentions(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i] == '@' && (i == 0 || !is_handle_char(chars[i - 1]));
        if starts {
            let mut j = i + 1;
            while j < chars.len() && is_handle_char(chars[j]) {
                j += 1;
            }
            // A trailing `.` or `-` ends a sentence, not a handle.
            let mut end = j;
            while end > i + 1 && matches!(chars[end - 1], '.' | '-') {
                end -= 1;
            }
            if end > i + 1 {
                let handle: String = chars[i + 1..end].iter().collect::<String>().to_lowercase();
                if !found.contains(&handle) {
                    found.push(handle);
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    found
}

fn is_handle_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Checks a handle or a house or thread name: 1–64 characters, letters,
/// digits, `_`, `-`, `.`, not starting with a symbol.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= 64
        && name.chars().all(is_handle_char)
        && name.chars().next().is_some_and(char::is_alphanumeric);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a valid {what}: use 1–64 letters, digits, `_`, `-` or `.`, starting with a letter or digit."
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_found_once_each_and_lower_cased() {
        assert_eq!(
            mentions("hi @Alice and @bob-2, ask @alice. Mail a@b.c"),
            vec!["alice", "bob-2"]
        );
        assert!(mentions("no mentions @ all").is_empty());
        assert_eq!(mentions("@scout."), vec!["scout"]);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("handle", "ada").is_ok());
        assert!(check_name("handle", "launch-plans.v2").is_ok());
        assert!(check_name("handle", "").is_err());
        assert!(check_name("handle", "-x").is_err());
        assert!(check_name("handle", "a b").is_err());
        assert!(check_name("handle", &"a".repeat(65)).is_err());
    }
}

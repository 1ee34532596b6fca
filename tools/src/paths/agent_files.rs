//! The agents' own files, which only their tools write.
//!
//! Memory (`memory/USER.md`, `memory/MEMORY.md`) is read into every
//! conversation's system prompt, and a skill's `SKILL.md` is followed as
//! instructions: text written there steers every later turn. The `memory`
//! and `skill_manage` tools scan what they write for injected instructions
//! and invisible characters, keep limits and versions; `write_file` and
//! `edit_file` would go around all of that. So the file tools refuse the
//! home's `memory/` and `skills/` folders and every bot's own folder under
//! `bots/<name>/`, judged on the resolved path (links, `..` and relative
//! paths included), and say which tool to use instead.

use std::path::{Path, PathBuf};

use troupe_runtime::home::{Home, MAIN_AGENT};

use super::resolve;

/// Which tool writes a refused area, and what the area is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// What the area is, for the refusal (`the agent's memory`).
    pub what: String,
    /// The tools that write it, formatted (`` `memory` ``).
    pub tools: &'static str,
}

const MEMORY: &str = "`memory`";
const SKILLS: &str = "`skill_manage`";
const BOT_FOLDER: &str = "`memory` (its notes) and `skill_manage` (its skills)";

/// Which tool owns `real` (a resolved path), if an agent's own files
/// hold it.
pub fn owner(home: &Home, real: &Path) -> Option<Owner> {
    for (area, what, tools) in areas(home) {
        if real.starts_with(&area) {
            return Some(Owner { what, tools });
        }
    }
    None
}

/// The areas, most specific first, each resolved as the kernel would.
fn areas(home: &Home) -> Vec<(PathBuf, String, &'static str)> {
    let real = |p: PathBuf| resolve(&p).unwrap_or(p);
    let mut out = vec![
        (
            real(home.memory_dir(MAIN_AGENT)),
            "the agent's memory (`memory/`: USER.md, MEMORY.md)".to_string(),
            MEMORY,
        ),
        (
            real(home.skills_dir(MAIN_AGENT)),
            "the skill library (`skills/`)".to_string(),
            SKILLS,
        ),
    ];
    let bots = home.bots_dir();
    // A bot's folder may itself be a link: resolve each one's areas.
    if let Ok(entries) = std::fs::read_dir(&bots) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            out.push((
                real(home.memory_dir(&name)),
                format!("bot `{name}`'s memory (`bots/{name}/memory/`)"),
                MEMORY,
            ));
            out.push((
                real(home.skills_dir(&name)),
                format!("bot `{name}`'s skills (`bots/{name}/skills/`)"),
                SKILLS,
            ));
            out.push((
                real(home.agent_dir(&name)),
                format!("bot `{name}`'s own folder (`bots/{name}/`)"),
                BOT_FOLDER,
            ));
        }
    }
    out.push((
        real(bots),
        "the bots' own folders (`bots/`)".to_string(),
        BOT_FOLDER,
    ));
    out
}

//! `use_skill`: loads one of the agent's skills into the conversation.
//!
//! A bot loads its own skills and the library's (the main agent's, in the
//! home's `skills/`) that its definition lists ([`LibrarySkills`]); its own
//! skill of the same name wins. The tool is on offer only when the agent
//! has a skill to load; its description is
//! the skill index (every name, descriptions cut at 60 characters), sized to
//! 1% of the model's window so a large library never crowds the context.
//! Loaded skills are remembered per conversation and come back after a
//! compaction ([`SkillsCarried`]), capped per skill and in all, because the
//! procedure is still being followed after its result was summarized away.

use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{Carry, ToolContext, ToolSpec};

use crate::skills::{self, SkillSummary};

/// A description in the index is cut at this many characters.
pub const DESCRIPTION_CHARS: usize = 60;
/// Characters per token, for the estimates.
pub const CHARS_PER_TOKEN: usize = 4;
/// A carried skill is cut at this many tokens.
pub const CARRIED_TOKENS_EACH: usize = 5_000;
/// All carried skills together are cut at this many tokens.
pub const CARRIED_TOKENS_TOTAL: usize = 25_000;

const TRUNCATED: &str = "\n[… truncated; call use_skill again to read it whole]";

/// The arguments of `use_skill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseSkillParams {
    /// The skill's name, from the list in this tool's description.
    pub name: String,
    /// What the skill works on this time (a file, a topic); echoed back.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// A skill loaded in a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InUse {
    /// Its name.
    pub name: String,
    /// Its instructions as loaded.
    pub instructions: String,
}

/// The skills a conversation has loaded, oldest first (kept in its services).
#[derive(Debug, Default)]
pub struct SkillsInUse {
    skills: Mutex<Vec<InUse>>,
}

impl SkillsInUse {
    /// Records a loaded skill; loading one again moves it to the end.
    pub fn add(&self, name: &str, instructions: &str) {
        let mut skills = self.skills.lock();
        skills.retain(|s| s.name != name);
        skills.push(InUse {
            name: name.to_string(),
            instructions: instructions.to_string(),
        });
    }

    /// The loaded skills, oldest first.
    pub fn list(&self) -> Vec<InUse> {
        self.skills.lock().clone()
    }
}

pub use troupe_runtime::tool::services::LibrarySkills;

fn library(ctx: &ToolContext) -> Vec<String> {
    ctx.services
        .library_skills()
        .map(|l| l.0.clone())
        .unwrap_or_default()
}

const BASE_DESCRIPTION: &str = "Loads one of your skills (a saved procedure) and answers with its instructions, its folder and its files. Load the skill whose description fits the task before you start it; follow its instructions. `arguments`: what it works on this time.";

/// The skill index for a window of `context_window` tokens: one line per
/// skill, within 1% of the window (descriptions cut at 60 characters, then
/// shorter, then left out; every name is always kept).
pub fn index(skills: &[SkillSummary], context_window: u64) -> String {
    let budget = usize::try_from(context_window / 100)
        .unwrap_or(usize::MAX)
        .saturating_mul(CHARS_PER_TOKEN);
    let render = |width: usize| -> String {
        skills
            .iter()
            .map(|s| {
                if width == 0 {
                    format!("- {}", s.name)
                } else {
                    format!("- {}: {}", s.name, cut(&s.description, width))
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for width in [DESCRIPTION_CHARS, 40, 20] {
        let text = render(width);
        if text.chars().count() <= budget {
            return text;
        }
    }
    render(0)
}

fn cut(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let kept: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(TRUNCATED.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(TRUNCATED);
    out
}

/// The text carried for `skills`: each cut at 5,000 tokens, all at 25,000.
pub fn carried_text(skills: &[InUse]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let each = CARRIED_TOKENS_EACH * CHARS_PER_TOKEN;
    let mut left = CARRIED_TOKENS_TOTAL * CHARS_PER_TOKEN;
    let mut out =
        String::from("Skills in use (loaded with use_skill earlier in this conversation):");
    for skill in skills {
        let header = format!("\n\n## {}\n", skill.name);
        let room = left.saturating_sub(header.chars().count());
        if room <= TRUNCATED.chars().count() {
            out.push_str(
                "\n\n[… more skills were in use; load them again with use_skill if needed]",
            );
            break;
        }
        let body = truncate_chars(&skill.instructions, each.min(room));
        left = room.saturating_sub(body.chars().count());
        out.push_str(&header);
        out.push_str(&body);
    }
    Some(out)
}

/// Offered when the agent has a skill to load, its description the skill index sized to
/// the model's window.
fn with_skill_index(ctx: &ToolContext, spec: &ToolSpec) -> Option<ToolSpec> {
    let skills = skills::list_usable(&ctx.home, &ctx.agent, &library(ctx));
    if skills.is_empty() {
        return None;
    }
    let mut spec = spec.clone();
    spec.description = format!(
        "{BASE_DESCRIPTION}\n\nSkills:\n{}",
        index(&skills, ctx.context_window)
    );
    Some(spec)
}

/// Loads one of the agent's skills; the model reads [`BASE_DESCRIPTION`] and the skill
/// index ([`with_skill_index`]).
#[tool(description = BASE_DESCRIPTION, offered_as = with_skill_index, carrying = SkillsCarried)]
pub async fn use_skill(params: UseSkillParams, ctx: &ToolContext) -> ToolResult {
    let library = library(ctx);
    let skill = match skills::load_usable(&ctx.home, &ctx.agent, &library, &params.name) {
        Ok(s) => s,
        Err(e) => {
            let names: Vec<String> = skills::list_usable(&ctx.home, &ctx.agent, &library)
                .into_iter()
                .map(|s| s.name)
                .collect();
            return ToolResult::error(format!(
                "{e}. Skills available: {}.",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ));
        }
    };
    ctx.services
        .get_or_insert_with(SkillsInUse::default)
        .add(&skill.summary.name, &skill.instructions);
    let mut text = format!(
        "Skill `{}` loaded.\nFolder: {}\nFiles: {}\n",
        skill.summary.name,
        skill.summary.dir.display(),
        skill.files.join(", ")
    );
    if let Some(arguments) = &params.arguments {
        text.push_str(&format!("Arguments: {arguments}\n"));
    }
    text.push_str("Read its other files with read_file when the instructions call for them.\n\n");
    text.push_str(&skill.instructions);
    ToolResult::ok_with(
        text,
        serde_json::json!({
            "name": skill.summary.name,
            "description": skill.summary.description,
            "dir": skill.summary.dir,
            "files": skill.files,
            "arguments": params.arguments,
            "instructions": skill.instructions,
        }),
    )
}

/// What `use_skill` carries through a compaction: the skills in use, cut
/// per skill and in all.
#[derive(Debug, Clone, Copy)]
pub struct SkillsCarried;

impl Carry for SkillsCarried {
    fn carried(&self, ctx: &ToolContext) -> Option<String> {
        let state = ctx.services.get::<SkillsInUse>()?;
        carried_text(&state.list())
    }

    /// The skills in use outlive a compaction as a call in the kept
    /// history, not only as text in the summary: a summary is a user
    /// message nothing restores from, so after a restart the next
    /// compaction would have dropped them.
    fn carried_call(&self, ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        let skills = ctx.services.get::<SkillsInUse>()?.list();
        let text = carried_text(&skills)?;
        let last = skills.last().map(|s| s.name.clone()).unwrap_or_default();
        let carried: Vec<serde_json::Value> = skills
            .iter()
            .map(|s| serde_json::json!({"name": s.name, "instructions": s.instructions}))
            .collect();
        Some((
            serde_json::json!({ "name": last }),
            ToolResult::ok_with(text, serde_json::json!({ "carried": carried })),
        ))
    }

    fn restore(&self, ctx: &ToolContext, args: &serde_json::Value, result: &ToolResult) {
        if result.is_error() {
            return;
        }
        // A compaction's carried call: every skill that was in use, in order.
        if let Some(carried) = result.data["carried"].as_array() {
            let in_use = ctx.services.get_or_insert_with(SkillsInUse::default);
            for skill in carried {
                if let (Some(name), Some(instructions)) =
                    (skill["name"].as_str(), skill["instructions"].as_str())
                {
                    in_use.add(name, instructions);
                }
            }
            return;
        }
        let name = result.data["name"]
            .as_str()
            .or_else(|| args["name"].as_str())
            .map(str::to_string);
        let Some(name) = name else {
            return;
        };
        let instructions = match result.data["instructions"].as_str() {
            Some(text) => text.to_string(),
            None => match skills::load_usable(&ctx.home, &ctx.agent, &library(ctx), &name) {
                Ok(skill) => skill.instructions,
                Err(e) => {
                    tracing::debug!(skill = %name, error = %e, "skill not restored");
                    return;
                }
            },
        };
        ctx.services
            .get_or_insert_with(SkillsInUse::default)
            .add(&name, &instructions);
    }
}

#[cfg(test)]
#[path = "use_skill_tests.rs"]
mod tests;

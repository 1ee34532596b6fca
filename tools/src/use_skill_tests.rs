use super::*;
use troupe_runtime::tool::Tool as _;

use pretty_assertions::assert_eq;
use serde_json::json;
use std::path::PathBuf;
use troupe_runtime::home::Home;

fn setup() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf());
    (dir, ctx)
}

fn add_skill(ctx: &ToolContext, name: &str, description: &str, body: &str) {
    let dir = ctx.home.skills_dir(&ctx.agent).join(name);
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("references/notes.md"), "n").unwrap();
}

fn summary(name: &str, description: &str) -> SkillSummary {
    SkillSummary {
        name: name.into(),
        description: description.into(),
        dir: PathBuf::from("/x"),
    }
}

#[test]
fn not_on_offer_without_skills() {
    let (_d, ctx) = setup();
    assert_eq!(use_skill::tool().available(&ctx), None);
}

#[test]
fn the_description_lists_every_skill_cut_at_60() {
    let (_d, ctx) = setup();
    add_skill(&ctx, "short", "Makes tea", "boil");
    add_skill(&ctx, "long", &"d".repeat(80), "x");
    let spec = use_skill::tool().available(&ctx).unwrap();
    let list = spec.description.split("\n\nSkills:\n").nth(1).unwrap();
    assert_eq!(
        list,
        format!("- long: {}…\n- short: Makes tea", "d".repeat(59))
    );
    assert!(spec.flags.carried);
}

#[test]
fn the_index_shrinks_to_fit_one_percent_and_keeps_every_name() {
    let skills: Vec<SkillSummary> = (0..50)
        .map(|i| {
            summary(
                &format!("skill-{i:02}"),
                &"a long description of it ".repeat(4),
            )
        })
        .collect();
    // Roomy window: full 60-character descriptions.
    let roomy = index(&skills, 1_000_000);
    assert!(
        roomy.lines().all(|l| l.chars().count() <= 2 + 8 + 2 + 60),
        "{roomy}"
    );
    assert!(roomy.chars().count() <= 10_000 * 4);
    // 50 skills × ~72 chars ≈ 3,600 chars: a 40,000-token window (1,600 chars)
    // forces shorter descriptions, a 10,000-token one (400 chars) names only.
    let tight = index(&skills, 40_000);
    assert!(tight.chars().count() <= 1_600, "{}", tight.chars().count());
    assert!(tight.contains(": a long"), "{tight}");
    let names_only = index(&skills, 10_000);
    assert_eq!(names_only.lines().count(), 50);
    assert!(names_only.lines().all(|l| !l.contains(':')), "{names_only}");
    assert!(names_only.contains("- skill-49"));
}

#[tokio::test]
async fn loading_answers_instructions_folder_and_files_and_is_carried() {
    let (_d, ctx) = setup();
    add_skill(&ctx, "tea", "Makes tea", "1. boil water\n2. steep");
    let tool = use_skill::tool();
    assert_eq!(tool.carried(&ctx), None);
    let r = tool
        .call(
            json!({"name": "tea", "arguments": "green tea for two"}),
            &ctx,
        )
        .await;
    assert!(!r.is_error(), "{}", r.text);
    let dir = ctx
        .home
        .skills_dir(troupe_runtime::home::MAIN_AGENT)
        .join("tea");
    assert_eq!(
        r.text,
        format!(
            "Skill `tea` loaded.\nFolder: {}\nFiles: SKILL.md, references/notes.md\nArguments: green tea for two\nRead its other files with read_file when the instructions call for them.\n\n1. boil water\n2. steep",
            dir.display()
        )
    );
    assert_eq!(
        tool.carried(&ctx).unwrap(),
        "Skills in use (loaded with use_skill earlier in this conversation):\n\n## tea\n1. boil water\n2. steep"
    );
    let r = tool.call(json!({"name": "coffee"}), &ctx).await;
    assert_eq!(r.text, "no skill named \"coffee\". Skills available: tea.");
}

#[test]
fn carried_text_is_capped_per_skill_and_in_all() {
    let big: Vec<InUse> = (0..8)
        .map(|i| InUse {
            name: format!("s{i}"),
            instructions: "x".repeat(30_000),
        })
        .collect();
    let text = carried_text(&big).unwrap();
    assert!(text.chars().count() <= CARRIED_TOKENS_TOTAL * CHARS_PER_TOKEN + 200);
    assert!(text.contains("## s0\n"));
    assert!(text.contains("[… truncated; call use_skill again to read it whole]"));
    let first = text
        .split("## s0\n")
        .nth(1)
        .unwrap()
        .split("\n\n## ")
        .next()
        .unwrap();
    assert_eq!(first.chars().count(), CARRIED_TOKENS_EACH * CHARS_PER_TOKEN);
    assert!(
        text.ends_with("load them again with use_skill if needed]"),
        "{}",
        &text[text.len() - 200..]
    );
}

#[tokio::test]
async fn restore_re_adds_a_past_call() {
    let (_d, ctx) = setup();
    add_skill(&ctx, "tea", "Makes tea", "boil");
    let tool = use_skill::tool();
    let r = tool.call(json!({"name": "tea"}), &ctx).await;
    let fresh = ToolContext::standalone(ctx.home.clone(), ctx.cwd.clone());
    tool.restore(&fresh, &json!({"name": "tea"}), &r);
    assert_eq!(tool.carried(&fresh), tool.carried(&ctx));
    let other = ToolContext::standalone(ctx.home.clone(), ctx.cwd.clone());
    tool.restore(&other, &json!({"name": "tea"}), &ToolResult::error("no"));
    assert_eq!(tool.carried(&other), None);
}

#[tokio::test]
async fn the_skills_in_use_are_carried_as_a_call_a_new_process_restores() {
    let (_d, ctx) = setup();
    add_skill(&ctx, "tea", "Makes tea", "boil");
    add_skill(&ctx, "cake", "Bakes", "bake");
    let tool = use_skill::tool();
    assert_eq!(tool.carried_call(&ctx), None);
    tool.call(json!({"name": "tea"}), &ctx).await;
    tool.call(json!({"name": "cake"}), &ctx).await;
    let (args, result) = tool.carried_call(&ctx).unwrap();
    assert_eq!(args, json!({"name": "cake"}));
    assert_eq!(Some(result.text.clone()), tool.carried(&ctx));
    // Only the carried call is left in the history: both come back, in order.
    let fresh = ToolContext::standalone(ctx.home.clone(), ctx.cwd.clone());
    tool.restore(&fresh, &args, &result);
    assert_eq!(tool.carried(&fresh), tool.carried(&ctx));
}

/// A bot's context in the same home as `main` (the main agent's).
fn bot_ctx(main: &ToolContext, library: &[&str]) -> ToolContext {
    let mut ctx = main.clone();
    ctx.agent = "scout".into();
    ctx.services = troupe_runtime::tool::Services::default();
    ctx.services.set_library_skills(LibrarySkills(
        library.iter().map(|s| s.to_string()).collect(),
    ));
    ctx
}

#[tokio::test]
async fn a_bot_loads_the_library_skills_its_definition_lists_and_no_others() {
    let (_d, main) = setup();
    add_skill(&main, "brew", "Makes tea", "boil the water");
    add_skill(&main, "secret", "Not for bots", "hidden");
    let bot = bot_ctx(&main, &["brew", "missing-one"]);
    add_skill(&bot, "scout-own", "Its own", "look around");
    let tool = use_skill::tool();
    let spec = tool.available(&bot).unwrap();
    let list = spec.description.split("\n\nSkills:\n").nth(1).unwrap();
    assert_eq!(list, "- brew: Makes tea\n- scout-own: Its own");
    let loaded = tool.call(json!({"name": "brew"}), &bot).await;
    assert!(!loaded.is_error(), "{}", loaded.text);
    assert!(loaded.text.contains("boil the water"));
    assert_eq!(
        loaded.data["dir"],
        json!(main.home.skills_dir(&main.agent).join("brew"))
    );
    assert!(tool.carried(&bot).unwrap().contains("## brew"));
    let refused = tool.call(json!({"name": "secret"}), &bot).await;
    assert!(refused.is_error());
    assert!(
        refused.text.ends_with("Skills available: brew, scout-own."),
        "{}",
        refused.text
    );
    // Without the list, the bot has only its own.
    let unlisted = bot_ctx(&main, &[]);
    assert!(tool
        .call(json!({"name": "brew"}), &unlisted)
        .await
        .is_error());
}

#[tokio::test]
async fn a_bots_own_skill_wins_over_the_library_one_of_the_same_name() {
    let (_d, main) = setup();
    add_skill(&main, "brew", "Makes tea", "library way");
    let bot = bot_ctx(&main, &["brew"]);
    add_skill(&bot, "brew", "Makes coffee", "own way");
    let tool = use_skill::tool();
    let spec = tool.available(&bot).unwrap();
    assert!(
        spec.description.ends_with("- brew: Makes coffee"),
        "{}",
        spec.description
    );
    let loaded = tool.call(json!({"name": "brew"}), &bot).await;
    assert!(loaded.text.contains("own way"), "{}", loaded.text);
}

use super::*;

use pretty_assertions::assert_eq;

#[test]
fn frontmatter_parses_quoted_and_folded_values() {
    let doc = parse_skill_md(
        "---\nname: \"pdf-report\"\nversion: 2\ndescription: >\n  Builds a PDF\n  report\n---\n\n# Steps\n1. go\n",
    )
    .unwrap();
    assert_eq!(
        doc,
        SkillDoc {
            name: "pdf-report".into(),
            description: "Builds a PDF report".into(),
            body: "# Steps\n1. go".into(),
        }
    );
}

#[test]
fn frontmatter_errors_say_what_is_missing() {
    assert!(matches!(
        parse_skill_md("# no header"),
        Err(SkillError::Frontmatter(_))
    ));
    let err = parse_skill_md("---\nname: x\n---\nbody").unwrap_err();
    assert_eq!(err, SkillError::Frontmatter("no `description`".into()));
    let err = parse_skill_md("---\nname: x\ndescription: y\n").unwrap_err();
    assert!(err.to_string().contains("not closed"), "{err}");
}

#[test]
fn names_are_lowercase_digits_dash_underscore() {
    for ok in ["a", "pdf-report", "x_1"] {
        assert_eq!(validate_name(ok), Ok(()));
    }
    for bad in ["", "A", "a b", "../x", ".hidden", "é", &"a".repeat(65)] {
        assert!(validate_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn file_paths_stay_inside_the_allowed_folders() {
    assert_eq!(
        check_file_path("references/api.md", false).unwrap(),
        PathBuf::from("references/api.md")
    );
    assert_eq!(
        check_file_path("SKILL.md", true).unwrap(),
        PathBuf::from("SKILL.md")
    );
    for bad in [
        "SKILL.md",
        "../x/references/a",
        "references/../../etc/passwd",
        "/etc/passwd",
        "other/a.md",
        "references",
        "scripts/.hidden",
    ] {
        assert!(check_file_path(bad, false).is_err(), "{bad}");
    }
}

#[test]
fn listing_skips_hidden_and_mismatched_folders() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let skills = home.skills_dir(troupe_runtime::home::MAIN_AGENT);
    for (folder, name) in [
        ("good", "good"),
        ("wrong", "other"),
        (".versions", ".versions"),
    ] {
        std::fs::create_dir_all(skills.join(folder)).unwrap();
        std::fs::write(
            skills.join(folder).join(SKILL_FILE),
            format!("---\nname: {name}\ndescription: d\n---\nbody"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(skills.join("good/scripts")).unwrap();
    std::fs::write(skills.join("good/scripts/run.sh"), "echo").unwrap();
    let listed: Vec<String> = list(&home, troupe_runtime::home::MAIN_AGENT)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(listed, vec!["good".to_string()]);
    let skill = load(&home, troupe_runtime::home::MAIN_AGENT, "good").unwrap();
    assert_eq!(
        skill.files,
        vec!["SKILL.md".to_string(), "scripts/run.sh".to_string()]
    );
    assert_eq!(skill.instructions, "body");
}

#[test]
fn a_kept_listing_follows_every_change_to_the_skills() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let agent = troupe_runtime::home::MAIN_AGENT;
    let skills = home.skills_dir(agent);
    let write = |folder: &str, name: &str, description: &str| {
        std::fs::create_dir_all(skills.join(folder)).unwrap();
        std::fs::write(
            skills.join(folder).join(SKILL_FILE),
            format!("---\nname: {name}\ndescription: {description}\n---\nbody"),
        )
        .unwrap();
    };
    // Kept at once: the test's files have not had time to settle.
    let kept = crate::stamp::Kept::settling(std::time::Duration::ZERO);
    let listed = || -> Vec<(String, String)> {
        list_kept(&kept, &home, agent)
            .into_iter()
            .map(|s| (s.name, s.description))
            .collect()
    };
    let pair = |name: &str, description: &str| (name.to_string(), description.to_string());
    assert_eq!(listed(), vec![], "no folder yet");
    write("tea", "tea", "Brews tea.");
    assert_eq!(listed(), vec![pair("tea", "Brews tea.")]);
    assert_eq!(listed(), vec![pair("tea", "Brews tea.")], "kept");
    // Edited in place (not renamed over), a new folder, a mismatched
    // name fixed, a folder removed: each seen by the next listing.
    std::fs::write(
        skills.join("tea").join(SKILL_FILE),
        "---\nname: tea\ndescription: Brews green tea.\n---\nbody",
    )
    .unwrap();
    assert_eq!(listed(), vec![pair("tea", "Brews green tea.")]);
    write("coffee", "other", "Brews coffee.");
    assert_eq!(listed(), vec![pair("tea", "Brews green tea.")]);
    write("coffee", "coffee", "Brews coffee.");
    assert_eq!(
        listed(),
        vec![
            pair("coffee", "Brews coffee."),
            pair("tea", "Brews green tea.")
        ]
    );
    std::fs::remove_dir_all(skills.join("tea")).unwrap();
    assert_eq!(listed(), vec![pair("coffee", "Brews coffee.")]);
}

use pretty_assertions::assert_eq;

use super::*;
use crate::trust::inspect::Limits;

fn never(_: &Invocation, _: &Env) -> bool {
    false
}

fn is_ls(inv: &Invocation, _: &Env) -> bool {
    inv.program == "ls"
}

#[test]
fn builtin_rules_load_with_their_examples_checked() {
    let set = RuleSet::builtin().unwrap();
    set.check_examples().unwrap();
    assert!(set.rules().len() > 20);
    assert!(set.rules().iter().all(|r| !r.matches.is_empty()));
}

#[test]
fn a_rule_whose_match_example_fails_is_a_load_error() {
    let rule =
        Rule::invocation("never", Tier::Dangerous, "never matches", never).matching(&["rm -rf x"]);
    assert_eq!(
        RuleSet::new(vec![rule]).unwrap_err(),
        RuleError::Example {
            rule: "never".into(),
            example: "rm -rf x".into(),
            should_match: true,
        }
    );
}

#[test]
fn a_rule_that_catches_its_near_miss_is_a_load_error() {
    let rule = Rule::invocation("ls", Tier::Dangerous, "lists", is_ls)
        .matching(&["ls"])
        .passing(&["echo x; ls -l"]);
    let err = RuleSet::new(vec![rule]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rule `ls`: the example `echo x; ls -l` should pass but does not; fix the rule or its example"
    );
}

#[test]
fn a_rule_with_an_unparsable_example_or_a_duplicate_id_is_a_load_error() {
    let rule = Rule::invocation("ls", Tier::Dangerous, "lists", is_ls).matching(&["ls 'x"]);
    assert!(matches!(
        RuleSet::new(vec![rule]),
        Err(RuleError::Unparsable { .. })
    ));
    let a = Rule::invocation("ls", Tier::Dangerous, "lists", is_ls).matching(&["ls"]);
    assert_eq!(
        RuleSet::new(vec![a.clone(), a]).unwrap_err(),
        RuleError::Duplicate("ls".into())
    );
}

#[test]
fn text_rules_match_the_program_text() {
    let rule = Rule::text("curl-post", Tier::Dangerous, "posts", r"^curl .*-X ?POST")
        .unwrap()
        .matching(&["curl -X POST http://x", "sudo curl -XPOST x"])
        .passing(&["curl http://x", "echo curl -X POST"]);
    RuleSet::new(vec![rule]).unwrap();
    assert!(matches!(
        Rule::text("bad", Tier::Dangerous, "x", "("),
        Err(RuleError::Pattern { .. })
    ));
}

fn invocations(text: &str) -> Vec<Invocation> {
    analyse(text, &Env::example(), &Limits::default())
        .unwrap()
        .invocations
}

#[test]
fn user_patterns_are_whole_text_globs_or_regexes() {
    let list = PatternList::new(&[
        "git push*".to_string(),
        "re:^docker (rm|rmi)\\b".to_string(),
        "tool:web_*".to_string(),
    ])
    .unwrap();
    let first = |t: &str| {
        invocations(t)
            .iter()
            .find_map(|i| list.invocation_match(i).map(str::to_string))
    };
    assert_eq!(first("git push --force origin"), Some("git push*".into()));
    assert_eq!(first("cd x && sudo git push"), Some("git push*".into()));
    assert_eq!(first("git status"), None);
    assert_eq!(first("echo git push"), None);
    assert_eq!(
        first("docker rmi img"),
        Some("re:^docker (rm|rmi)\\b".into())
    );
    assert_eq!(first("docker ps"), None);
    assert_eq!(list.tool_match("web_fetch"), Some("tool:web_*"));
    assert_eq!(list.tool_match("read_file"), None);
    assert!(matches!(
        PatternList::new(&["re:(".to_string()]),
        Err(RuleError::Pattern { .. })
    ));
}

use pretty_assertions::assert_eq;

use super::*;

fn programs(text: &str) -> Vec<Vec<String>> {
    parse(text, 8)
        .unwrap()
        .commands
        .iter()
        .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
        .collect()
}

#[test]
fn splits_on_every_operator_and_removes_quotes() {
    assert_eq!(
        programs("a 'b c' \"d\"e; f && g || h | i & j\nk"),
        vec![
            vec!["a", "b c", "de"],
            vec!["f"],
            vec!["g"],
            vec!["h"],
            vec!["i"],
            vec!["j"],
            vec!["k"],
        ]
    );
}

#[test]
fn escapes_and_ansi_quotes_are_applied() {
    assert_eq!(programs(r"\rm -r\f x"), vec![vec!["rm", "-rf", "x"]]);
    assert_eq!(programs(r"$'\x72m' -rf /"), vec![vec!["rm", "-rf", "/"]]);
}

#[test]
fn substitutions_are_parsed_as_commands_one_level_deeper() {
    let parsed = parse("echo $(rm -rf x) `ls -l` \"$(id)\" <(cat y)", 8).unwrap();
    let texts: Vec<(String, u32)> = parsed
        .commands
        .iter()
        .map(|c| (c.words[0].text.clone(), c.depth))
        .collect();
    assert_eq!(
        texts,
        vec![
            ("rm".to_string(), 1),
            ("ls".to_string(), 1),
            ("id".to_string(), 1),
            ("cat".to_string(), 1),
            ("echo".to_string(), 0),
        ]
    );
    let echo = parsed.commands.last().unwrap();
    assert!(echo.words[1].dynamic);
    assert_eq!(echo.words[1].text, "$(rm -rf x)");
}

#[test]
fn single_quotes_hide_substitutions() {
    assert_eq!(
        programs("echo '$(rm -rf /)'"),
        vec![vec!["echo", "$(rm -rf /)"]]
    );
}

#[test]
fn control_structures_expose_their_commands() {
    assert_eq!(
        programs("if true; then rm x; fi; for f in a b; do echo $f; done; while false; do :; done"),
        vec![
            vec!["true"],
            vec!["rm", "x"],
            vec!["echo", "$f"],
            vec!["false"],
            vec![":"],
        ]
    );
    assert_eq!(
        programs("case $1 in a|b) rm a ;; (c) echo c ;; esac; ls"),
        vec![vec!["rm", "a"], vec!["echo", "c"], vec!["ls"]]
    );
}

#[test]
fn subshells_and_groups_nest() {
    let parsed = parse("(cd x && rm y) ; { echo z; }", 8).unwrap();
    assert_eq!(parsed.commands.len(), 3);
    assert_eq!(parsed.commands[1].words[0].text, "rm");
    assert_eq!(parsed.commands[1].depth, 1);
}

#[test]
fn redirections_are_kept_with_their_kind() {
    let parsed = parse("cmd 2>&1 >out.txt >>log <in &>all", 8).unwrap();
    let kinds: Vec<(RedirectKind, String)> = parsed.commands[0]
        .redirects
        .iter()
        .map(|r| (r.kind, r.target.text.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (RedirectKind::Duplicate, "1".to_string()),
            (RedirectKind::Write, "out.txt".to_string()),
            (RedirectKind::Append, "log".to_string()),
            (RedirectKind::Read, "in".to_string()),
            (RedirectKind::Write, "all".to_string()),
        ]
    );
}

#[test]
fn here_documents_are_read_and_expanding_ones_scanned() {
    let parsed = parse("bash <<EOF\nrm -rf x\n$(id)\nEOF\necho done", 8).unwrap();
    let bash = parsed
        .commands
        .iter()
        .find(|c| c.words[0].text == "bash")
        .unwrap();
    assert_eq!(bash.stdin_text.as_deref(), Some("rm -rf x\n$(id)\n"));
    assert!(parsed.commands.iter().any(|c| c.words[0].text == "id"));
    assert!(parsed.commands.iter().any(|c| c.words[0].text == "echo"));

    let quoted = parse("cat <<'EOF'\n$(id)\nEOF\n", 8).unwrap();
    assert_eq!(
        quoted.commands.len(),
        1,
        "a quoted here-document does not expand"
    );
}

#[test]
fn pipes_link_commands() {
    let parsed = parse("curl x | sh", 8).unwrap();
    assert_eq!(parsed.commands[1].piped_from, Some(0));
}

#[test]
fn fork_bombs_are_seen_as_self_calling_forking_functions() {
    let parsed = parse(":(){ :|:& };:", 8).unwrap();
    assert_eq!(
        parsed.functions,
        vec![FunctionDef {
            name: ":".into(),
            calls_itself: true,
            forks: true
        }]
    );
}

#[test]
fn what_cannot_be_followed_is_an_error() {
    assert_eq!(
        parse("echo 'oops", 8),
        Err(ParseError::Unclosed("single quote"))
    );
    assert_eq!(
        parse("echo \"oops", 8),
        Err(ParseError::Unclosed("double quote"))
    );
    assert_eq!(
        parse("echo $(ls", 8),
        Err(ParseError::Unclosed("parenthesis"))
    );
    assert_eq!(
        parse("cat <<EOF\nno end", 8),
        Err(ParseError::HereDoc("EOF".into()))
    );
    assert_eq!(parse("a )", 8), Err(ParseError::Unexpected(")".into())));
    let deep = format!("{}x{}", "$(".repeat(20), ")".repeat(20));
    assert_eq!(parse(&deep, 8), Err(ParseError::TooDeep(8)));
}

#[test]
fn array_assignments_and_comments_are_data() {
    assert_eq!(
        programs("arr=(a b c) # rm -rf /\nls"),
        vec![vec!["arr=(a b c)"], vec!["ls"]]
    );
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use pretty_assertions::assert_eq;

use super::*;

/// A home in a fresh temporary folder (kept alive by the returned guard).
fn temp_home() -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    (dir, home)
}

/// A home whose `config.toml` holds `text`.
fn home_with(text: &str) -> (tempfile::TempDir, Home) {
    let (dir, home) = temp_home();
    std::fs::create_dir_all(home.root()).unwrap();
    std::fs::write(home.config_file(), text).unwrap();
    (dir, home)
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// An environment holding exactly `vars`.
fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

fn overrides(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn load_err(home: &Home, env: &dyn Fn(&str) -> Option<String>, flags: &[(&str, &str)]) -> String {
    Config::load(home, env, &overrides(flags))
        .unwrap_err()
        .to_string()
}

/// Every value written out, so a new field must be added here.
fn documented_defaults() -> Config {
    let no_budget = Budget {
        tokens: None,
        cost_usd: None,
        tool_calls: None,
        wall_time_secs: None,
    };
    Config {
        agent: Agent {
            model: "openai:gpt-4o-mini".to_owned(),
            working_dir: None,
            max_steps_per_turn: 50,
            tool_timeout_secs: 120,
            spill_limit_chars: 30_000,
            repeated_failure_limit: 3,
            timezone: chrono_tz::Tz::UTC,
        },
        budgets: Budgets {
            per_turn: no_budget.clone(),
            per_bot_day: no_budget.clone(),
            per_delegation: no_budget,
        },
        compaction: Compaction {
            threshold: 0.8,
            keep_recent_messages: 12,
        },
        trust: Trust {
            mode: TrustMode::Ask,
            deny: vec![],
            allow: vec![],
        },
        sandbox: crate::sandbox::SandboxSettings {
            mode: crate::sandbox::SandboxMode::Auto,
            network: true,
            allow_addresses: vec![],
            helper: None,
        },
        delegation: Delegation {
            max_depth: 1,
            max_children: 10,
            max_concurrent_per_bot: 10,
            max_concurrent_per_node: 64,
            child_timeout_secs: 600,
        },
        messaging: Messaging {
            max_message_chars: 16_000,
            loop_max_exchanges: 10,
            loop_window_secs: 600,
            loop_cooldown_secs: 600,
        },
        routines: Routines {
            catch_up: CatchUp::RunOnce,
            lease_secs: 60,
        },
        review: Review {
            enabled: true,
            every_n_turns: 5,
        },
        providers: Providers {
            max_concurrent_requests: 8,
            connect_timeout_secs: 10,
            first_byte_timeout_secs: 120,
            chunk_timeout_secs: 90,
            max_retries: 4,
        },
        store: Store {
            synchronous: Synchronous::Normal,
        },
        log: Log {
            filter: "warn".to_owned(),
            json: false,
            file: String::new(),
        },
        router: Router { idle_secs: 600 },
        limits: Limits {
            max_user_message_bytes: 262_144,
        },
        tools: Tools {
            command_output_cap: 67_108_864,
        },
        web: crate::config::Web {
            allow_private_addresses: false,
            allow_addresses: vec![],
            tavily_url: "https://api.tavily.com/search".to_owned(),
            brave_url: "https://api.search.brave.com/res/v1/web/search".to_owned(),
            duckduckgo_url: "https://html.duckduckgo.com/html/".to_owned(),
            giphy_url: "https://api.giphy.com/v1/gifs/search".to_owned(),
            klipy_url: "https://api.klipy.com/v2/search".to_owned(),
            timeout_secs: 30,
        },
        browser: crate::config::Browser {
            chrome: None,
            idle_s: 300,
        },
        files: Files {
            max_file_bytes: 10_485_760,
            house_quota_bytes: 1_073_741_824,
        },
        server: crate::config::Server {
            listen: "127.0.0.1:7878".to_owned(),
            auth: "tokens".to_owned(),
            requests_per_second: 50.0,
            burst: 200,
            max_body_bytes: 16_777_216,
            request_timeout_secs: 60,
            header_timeout_secs: 10,
            max_connections: 1024,
            max_connections_per_address: 128,
            allowed_hosts: vec![],
        },
        environments: crate::environment::EnvironmentSettings::default(),
        telemetry: super::Telemetry {
            metrics: true,
            otlp_endpoint: String::new(),
            service_name: "troupe".to_owned(),
        },
        executors: Default::default(),
        cluster: Default::default(),
    }
}

/// Dotted paths of every leaf of a table.
fn leaf_keys(table: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => leaf_keys(inner, &path, out),
            _ => out.push(path),
        }
    }
}

#[test]
fn defaults_are_the_documented_values() {
    assert_eq!(Config::default(), documented_defaults());
}

#[test]
fn a_missing_file_gives_the_defaults() {
    let (_dir, home) = temp_home();
    let config = Config::load(&home, &no_env, &[]).unwrap();
    assert_eq!(config, Config::default());
    assert!(!home.root().exists(), "loading must not create the home");
}

#[test]
fn key_list_matches_the_structs() {
    let mut full = documented_defaults();
    full.agent.working_dir = Some(PathBuf::from("/w"));
    full.environments.helper = Some(PathBuf::from("/troupe"));
    full.environments.disk_files = Some(1);
    full.browser.chrome = Some(PathBuf::from("/usr/bin/chromium"));
    full.cluster.name = Some("acme".into());
    full.cluster.node_name = Some("a".into());
    full.cluster.listen = Some("127.0.0.1:7900".into());
    full.cluster.cookie_file = Some(PathBuf::from("/c"));
    full.cluster.tls_cert = Some(PathBuf::from("/n.pem"));
    full.cluster.tls_key = Some(PathBuf::from("/n.key"));
    full.cluster.tls_ca = Some(PathBuf::from("/ca.pem"));
    for budget in [
        &mut full.budgets.per_turn,
        &mut full.budgets.per_bot_day,
        &mut full.budgets.per_delegation,
    ] {
        *budget = Budget {
            tokens: Some(1),
            cost_usd: Some(1.0),
            tool_calls: Some(1),
            wall_time_secs: Some(1),
        };
    }
    let table = toml::Table::try_from(&full).unwrap();
    let mut keys = Vec::new();
    leaf_keys(&table, "", &mut keys);
    let from_structs: BTreeSet<String> = keys.into_iter().collect();
    let listed: BTreeSet<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
    assert_eq!(listed, from_structs);
    assert_eq!(KEYS.len(), listed.len(), "KEYS lists a key twice");
}

#[test]
fn file_then_env_then_flags() {
    let (_dir, home) = home_with(
        "[agent]\nmodel = \"file:model\"\nmax_steps_per_turn = 7\ntool_timeout_secs = 30\n\n[log]\nfilter = \"warn\"\n",
    );
    let env = env_of(&[
        ("TROUPE_MODEL", "short:model"),
        ("TROUPE_AGENT__MODEL", "long:model"),
        ("TROUPE_AGENT__MAX_STEPS_PER_TURN", "9"),
        ("TROUPE_LOG", "debug"),
        ("TROUPE_REVIEW__ENABLED", "false"),
        ("TROUPE_TRUST__DENY", "[\"shell:rm *\"]"),
        ("TROUPE_BUDGETS__PER_TURN__COST_USD", "0.5"),
        ("TROUPE_AGENT__TIMEZONE", "Europe/Paris"),
    ]);
    let flags = overrides(&[("agent.model", "flag:model"), ("log.json", "true")]);
    let config = Config::load(&home, &env, &flags).unwrap();

    let mut expected = Config::default();
    expected.agent.model = "flag:model".to_owned();
    expected.agent.max_steps_per_turn = 9;
    expected.agent.tool_timeout_secs = 30;
    expected.agent.timezone = chrono_tz::Tz::Europe__Paris;
    expected.log.filter = "debug".to_owned();
    expected.log.json = true;
    expected.review.enabled = false;
    expected.trust.deny = vec!["shell:rm *".to_owned()];
    expected.budgets.per_turn.cost_usd = Some(0.5);
    assert_eq!(config, expected);

    // Without the flag, the long variable wins over the short one.
    let config = Config::load(&home, &env, &[]).unwrap();
    assert_eq!(config.agent.model, "long:model");
    // Without either variable, the file's value stands.
    let config = Config::load(&home, &env_of(&[("TROUPE_MODEL", "short:model")]), &[]).unwrap();
    assert_eq!(config.agent.model, "short:model");
    let config = Config::load(&home, &no_env, &[]).unwrap();
    assert_eq!(config.agent.model, "file:model");
    // An empty variable counts as unset.
    let config = Config::load(&home, &env_of(&[("TROUPE_AGENT__MODEL", "")]), &[]).unwrap();
    assert_eq!(config.agent.model, "file:model");
}

#[test]
fn every_key_is_looked_up_in_the_environment() {
    let asked = std::cell::RefCell::new(Vec::new());
    let env = |name: &str| {
        asked.borrow_mut().push(name.to_owned());
        None
    };
    Config::load(&Home::new("/nonexistent/troupe"), &env, &[]).unwrap();
    let asked = asked.into_inner();
    assert_eq!(asked.len(), KEYS.len() + SHORT_ENV.len());
    assert!(asked.contains(&"TROUPE_BUDGETS__PER_DELEGATION__WALL_TIME_SECS".to_owned()));
    assert!(asked.contains(&"TROUPE_LOG__FILTER".to_owned()));
}

#[test]
fn a_value_that_only_fits_as_text_is_kept_as_text() {
    let flags = overrides(&[("agent.model", "2024"), ("agent.timezone", "\"UTC\"")]);
    let config = Config::load(&Home::new("/nonexistent/troupe"), &no_env, &flags).unwrap();
    assert_eq!(config.agent.model, "2024");
    assert_eq!(config.agent.timezone, chrono_tz::Tz::UTC);
}

#[test]
fn malformed_toml_names_line_and_column() {
    let (_dir, home) = home_with("[agent]\nmax_steps_per_turn = 5\nmodel = \n");
    let err = Config::load(&home, &no_env, &[]).unwrap_err();
    let ConfigError::File { path, position, .. } = &err else {
        panic!("expected a file error, got {err:?}");
    };
    assert_eq!(path, &home.config_file());
    assert_eq!(*position, Some((3, 9)));
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3:9: invalid TOML: string values must be quoted, expected literal string",
            home.config_file().display()
        )
    );
}

#[test]
fn unknown_key_names_the_key_and_the_accepted_ones() {
    let (_dir, home) = home_with("# mine\n[agent]\nmodle = \"x\"\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:3:1: unknown key `modle` in [agent]; expected one of model, working_dir, \
             max_steps_per_turn, tool_timeout_secs, spill_limit_chars, repeated_failure_limit, timezone",
            home.config_file().display()
        )
    );
}

#[test]
fn unknown_key_in_a_nested_table() {
    let (_dir, home) = home_with("[budgets.per_turn]\ntoken = 5\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:2:1: unknown key `token` in [budgets.per_turn]; expected one of tokens, cost_usd, tool_calls, wall_time_secs",
            home.config_file().display()
        )
    );
}

#[test]
fn a_key_outside_its_section_says_where_it_belongs() {
    let (_dir, home) = home_with("max_retries = 2\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:1:1: unknown section or key `max_retries` at the top level; expected one of agent, budgets, \
             compaction, trust, sandbox, delegation, messaging, routines, review, providers, store, log, router, limits, tools, web, browser, files, server, environments, telemetry, executors, cluster \
             (`max_retries` belongs in [providers])",
            home.config_file().display()
        )
    );
}

#[test]
fn wrong_type_names_the_key_and_the_expected_type() {
    let (_dir, home) = home_with("[agent]\nmax_steps_per_turn = \"lots\"\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:2:22: `max_steps_per_turn` in [agent] expects an integer, found a string \"lots\"",
            home.config_file().display()
        )
    );
}

#[test]
fn out_of_range_integer_says_the_range() {
    let (_dir, home) = home_with("[review]\nevery_n_turns = -1\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:2:17: `every_n_turns` in [review] expects an integer from 0 to 4294967295, found the integer -1",
            home.config_file().display()
        )
    );
}

#[test]
fn a_section_that_is_not_a_table() {
    let (_dir, home) = home_with("log = \"debug\"\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:1:7: `log` expects a table, found a string \"debug\"",
            home.config_file().display()
        )
    );
}

#[test]
fn bad_enum_value_lists_the_accepted_values() {
    let (_dir, home) = home_with("[trust]\nmode = \"maybe\"\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:2:8: `mode` in [trust] must be one of \"ask\", \"auto\"; found \"maybe\"",
            home.config_file().display()
        )
    );
    let err = load_err(
        &Home::new("/nonexistent/troupe"),
        &env_of(&[("TROUPE_ROUTINES__CATCH_UP", "always")]),
        &[],
    );
    assert_eq!(
        err,
        "environment variable TROUPE_ROUTINES__CATCH_UP: `catch_up` in [routines] must be one of \"skip\", \"run_once\"; found \"always\""
    );
}

#[test]
fn bad_timezone_is_refused() {
    let (_dir, home) = home_with("[agent]\ntimezone = \"Mars/Olympus\"\n");
    assert_eq!(
        load_err(&home, &no_env, &[]),
        format!(
            "{}:2:12: `timezone` in [agent]: unknown timezone `Mars/Olympus`; expected an IANA name such as \"UTC\" or \"Europe/Paris\"",
            home.config_file().display()
        )
    );
    let err = load_err(
        &Home::new("/nonexistent/troupe"),
        &no_env,
        &[("agent.timezone", "CEST")],
    );
    assert!(
        err.starts_with("command-line setting `agent.timezone`: "),
        "{err}"
    );
}

#[test]
fn bad_threshold_and_log_filter_are_refused() {
    let nowhere = Home::new("/nonexistent/troupe");
    assert_eq!(
        load_err(&nowhere, &no_env, &[("compaction.threshold", "1.5")]),
        "command-line setting `compaction.threshold`: `threshold` in [compaction]: 1.5 is out of range; expected a number above 0 and at most 1, such as 0.8"
    );
    let err = load_err(
        &nowhere,
        &env_of(&[("TROUPE_LOG", "info,troupe=loud")]),
        &[],
    );
    assert!(
        err.starts_with("environment variable TROUPE_LOG: `filter` in [log]: `info,troupe=loud` is not a log filter"),
        "{err}"
    );
}

/// Found by the `config` fuzz target: a directive with a space before it
/// and a multi-byte character made `tracing_subscriber` panic while the
/// filter was checked, so `TROUPE_LOG=" é=debug"` crashed troupe at start.
#[test]
fn a_log_filter_with_spaces_and_accents_is_checked_without_a_crash() {
    let nowhere = Home::new("/nonexistent/troupe");
    for filter in [
        " \u{e9}=debug",
        "info, caf\u{e9}=trace",
        "  info ,troupe_runtime=debug ",
    ] {
        let config = Config::load(&nowhere, &env_of(&[("TROUPE_LOG", filter)]), &[]).unwrap();
        assert_eq!(config.log.filter, filter);
    }
    let err = load_err(&nowhere, &env_of(&[("TROUPE_LOG", " \u{e9}=loud")]), &[]);
    assert!(
        err.starts_with("environment variable TROUPE_LOG: `filter` in [log]: ` \u{e9}=loud` is not a log filter"),
        "{err}"
    );
}

#[test]
fn env_and_flag_errors_name_their_source() {
    let nowhere = Home::new("/nonexistent/troupe");
    assert_eq!(
        load_err(
            &nowhere,
            &env_of(&[("TROUPE_AGENT__MAX_STEPS_PER_TURN", "lots")]),
            &[]
        ),
        "environment variable TROUPE_AGENT__MAX_STEPS_PER_TURN: `max_steps_per_turn` in [agent] expects an integer, found a string \"lots\""
    );
    assert_eq!(
        load_err(&nowhere, &no_env, &[("agent.modle", "x")]),
        "command-line setting `agent.modle`: unknown key `modle` in [agent]; expected one of model, working_dir, \
         max_steps_per_turn, tool_timeout_secs, spill_limit_chars, repeated_failure_limit, timezone"
    );
    assert_eq!(
        load_err(&nowhere, &no_env, &[("model", "x")]),
        "command-line setting `model`: `model` is not a key; write it as section.key, such as agent.model"
    );
}

#[test]
fn init_writes_then_keeps_then_forces_aside() {
    let (_dir, home) = temp_home();
    let report = init_home(&home, false).unwrap();
    let root = home.root();
    assert_eq!(
        report,
        InitReport {
            created: vec![
                root.to_owned(),
                root.join("memory"),
                root.join("skills"),
                root.join("bots"),
                root.join("spill"),
                root.join("commands"),
                home.config_file(),
                home.models_file(),
            ],
            kept: vec![],
            replaced: vec![],
        }
    );
    assert_eq!(
        std::fs::read_to_string(home.config_file()).unwrap(),
        DEFAULT_CONFIG
    );
    assert_eq!(
        std::fs::read_to_string(home.models_file()).unwrap(),
        MODELS_EXAMPLE
    );

    std::fs::write(home.config_file(), "[agent]\nmodel = \"mine\"\n").unwrap();
    let report = init_home(&home, false).unwrap();
    assert_eq!(
        report,
        InitReport {
            created: vec![],
            kept: vec![home.config_file(), home.models_file()],
            replaced: vec![],
        }
    );
    assert_eq!(
        std::fs::read_to_string(home.config_file()).unwrap(),
        "[agent]\nmodel = \"mine\"\n"
    );

    let report = init_home(&home, true).unwrap();
    let aside = root.join("config.toml.bak");
    assert_eq!(
        report.replaced,
        vec![
            (home.config_file(), aside.clone()),
            (home.models_file(), root.join("models.toml.bak")),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(aside).unwrap(),
        "[agent]\nmodel = \"mine\"\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.config_file()).unwrap(),
        DEFAULT_CONFIG
    );
}

#[test]
fn ensure_home_creates_only_a_missing_home() {
    let (_dir, home) = temp_home();
    let report = ensure_home(&home).unwrap().unwrap();
    assert!(report.created.contains(&home.config_file()));
    assert_eq!(ensure_home(&home).unwrap(), None);
}

#[test]
fn a_home_cut_short_while_being_created_is_completed_on_the_next_start() {
    // The first start wrote config.toml (edited since) and died before
    // models.toml and the folders; a temp file of the cut write is left.
    let (_dir, home) = home_with("[agent]\nmodel = \"mine\"\n");
    std::fs::write(home.root().join(".models.toml.999.tmp"), "# half").unwrap();
    let report = ensure_home(&home).unwrap().unwrap();
    assert!(report.created.contains(&home.models_file()));
    assert!(report
        .created
        .contains(&home.memory_dir(crate::home::MAIN_AGENT)));
    assert_eq!(report.kept, vec![home.config_file()]);
    assert_eq!(
        std::fs::read_to_string(home.config_file()).unwrap(),
        "[agent]\nmodel = \"mine\"\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.models_file()).unwrap(),
        MODELS_EXAMPLE
    );
    // No temporary file of ours is left beside them.
    let mut names: Vec<String> = std::fs::read_dir(home.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    names.sort();
    assert_eq!(names, vec![".models.toml.999.tmp".to_string()]);
    assert_eq!(ensure_home(&home).unwrap(), None, "complete now");
}

#[test]
fn nothing_is_overwritten_after_an_error() {
    let bad = "[agent]\nmodel = = \"x\"\n";
    let (_dir, home) = home_with(bad);
    assert!(Config::load(&home, &no_env, &[]).is_err());
    let completed = ensure_home(&home).unwrap().unwrap();
    assert!(completed.kept.contains(&home.config_file()));
    let report = init_home(&home, false).unwrap();
    assert!(report.kept.contains(&home.config_file()));
    assert!(Config::load(&home, &no_env, &[]).is_err());
    assert_eq!(std::fs::read(home.config_file()).unwrap(), bad.as_bytes());
}

#[test]
fn default_template_parses_to_the_defaults() {
    let path = PathBuf::from("config.toml");
    assert_eq!(
        Config::from_file_text(&path, DEFAULT_CONFIG).unwrap(),
        Config::default()
    );
    // Uncommenting every default (`#key = value`, not the `# key = example`
    // lines of optional keys) changes nothing either.
    let uncommented: String = DEFAULT_CONFIG
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest) if rest.starts_with(|c: char| c.is_ascii_lowercase()) => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(uncommented, DEFAULT_CONFIG);
    assert_eq!(
        Config::from_file_text(&path, &uncommented).unwrap(),
        Config::default()
    );
}

/// The dotted keys a commented file mentions: `#key = …` or `# key = …`
/// under a `[section]` header.
fn keys_in_template(text: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.to_owned();
        } else if let Some(rest) = line.strip_prefix('#') {
            if let Some((key, _)) = rest.trim_start().split_once(" = ") {
                if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !section.is_empty() {
                    keys.insert(format!("{section}.{key}"));
                }
            }
        }
    }
    keys
}

#[test]
fn default_template_shows_every_key() {
    let listed: BTreeSet<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
    assert_eq!(keys_in_template(DEFAULT_CONFIG), listed);
}

#[test]
fn docs_describe_every_key() {
    let docs = include_str!("../../../docs/configuration.md");
    let mut missing = Vec::new();
    for key in KEYS {
        let (section, name) = key.rsplit_once('.').unwrap();
        let heading = format!("## `[{section}]`");
        let Some(start) = docs.find(&heading) else {
            missing.push((*key).to_owned());
            continue;
        };
        let body = &docs[start + heading.len()..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        if !body.contains(&format!("| `{name}` |")) {
            missing.push((*key).to_owned());
        }
        if !docs.contains(&env_var(key)) {
            missing.push(env_var(key));
        }
    }
    assert_eq!(missing, Vec::<String>::new());
}

#[test]
fn the_models_example_is_all_comments() {
    let table: toml::Table = MODELS_EXAMPLE.parse().unwrap();
    assert!(table.is_empty());
    let uncommented: String = MODELS_EXAMPLE
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .filter(|l| {
            l.starts_with("[models.")
                || (l.starts_with(|c: char| c.is_ascii_lowercase()) && l.contains(" = "))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let table: toml::Table = uncommented.parse().unwrap();
    let models = table["models"].as_table().unwrap();
    assert_eq!(
        models.keys().cloned().collect::<Vec<_>>(),
        ["deep", "fast", "local"]
    );
    assert_eq!(models["fast"]["prices"]["input"].as_float(), Some(0.15));
}

#[test]
fn the_default_file_left_unparsed_layers_as_it_would_parsed() {
    // `from_layers` does not parse the commented defaults as written; the
    // same text with one more comment is parsed. Both must layer alike.
    let path = PathBuf::from("config.toml");
    let parsed = format!("{DEFAULT_CONFIG}\n# edited\n");
    let env = env_of(&[
        ("TROUPE_MODEL", "anthropic:claude-sonnet-4-5"),
        ("TROUPE_SANDBOX__MODE", "off"),
    ]);
    let flags = overrides(&[
        ("agent.max_steps_per_turn", "7"),
        ("budgets.per_turn.tokens", "1000"),
    ]);
    for (env, flags) in [
        (&no_env as &dyn Fn(&str) -> Option<String>, &[][..]),
        (&env, &flags[..]),
    ] {
        assert_eq!(
            Config::from_layers(&path, Some(DEFAULT_CONFIG), env, flags).unwrap(),
            Config::from_layers(&path, Some(&parsed), env, flags).unwrap(),
        );
    }
    assert_eq!(
        crate::model::ModelsConfig::parse(MODELS_EXAMPLE, &path).unwrap(),
        crate::model::ModelsConfig::default()
    );
}

#[test]
fn empty_default_files_left_by_a_power_loss_read_as_the_defaults() {
    // The default files are not flushed to disk: a power loss may leave
    // them linked but empty, which must start as the defaults.
    let (_dir, home) = home_with("");
    std::fs::write(home.models_file(), "").unwrap();
    assert_eq!(
        Config::load(&home, &no_env, &[]).unwrap(),
        Config::load(&Home::new("/nonexistent/troupe-home"), &no_env, &[]).unwrap()
    );
    assert_eq!(
        crate::model::ModelsConfig::load(&home.models_file()).unwrap(),
        crate::model::ModelsConfig::default()
    );
    assert_eq!(
        ensure_home(&home).unwrap().map(|r| r.kept),
        Some(vec![home.config_file(), home.models_file()])
    );
}

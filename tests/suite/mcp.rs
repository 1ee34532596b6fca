//! MCP servers against real servers: the reference servers from npm
//! (`tests/mcp/package.json`, installed by `.ci/run` with `npm ci`) and a
//! tiny stdio server of our own (`tests/mcp/fixture.mjs`) for what they
//! cannot do on cue (hang, die, change their tools).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use troupe::actors::mcp::McpServers;
use troupe::runtime::model::{ModelRequest, Turn};
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::{AgentEvent, BotSpec, Runtime, TurnOutcome};

use super::support::{ask, check_invariants, script, wait_for, TestHome, WAIT};

fn mcp_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// A reference server's entry point, installed by `npm ci --prefix tests/mcp`.
fn reference(package: &str) -> String {
    let path = mcp_dir().join(format!(
        "node_modules/@modelcontextprotocol/{package}/dist/index.js"
    ));
    assert!(
        path.exists(),
        "{} is missing: install the MCP reference servers with `npm ci --prefix tests/mcp`",
        path.display()
    );
    path.display().to_string()
}

fn everything() -> String {
    reference("server-everything")
}

fn filesystem() -> String {
    reference("server-filesystem")
}

fn fixture(extra: serde_json::Value) -> serde_json::Value {
    let mut server = json!({
        "command": "node",
        "args": [mcp_dir().join("fixture.mjs").display().to_string()],
        "alwaysLoad": true
    });
    for (k, v) in extra.as_object().unwrap() {
        server[k] = v.clone();
    }
    server
}

fn write_config(home: &TestHome, servers: serde_json::Value) {
    std::fs::write(
        home.path().join("mcp.json"),
        serde_json::to_string_pretty(&json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
}

/// The results of every tool call the model was sent, in order.
fn tool_results(requests: &[ModelRequest]) -> Vec<(String, ToolResult)> {
    let last = requests.last().expect("a request");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } => Some((name.clone(), result.clone())),
            _ => None,
        })
        .collect()
}

fn servers(runtime: &Runtime) -> McpServers {
    runtime.node().mcp_servers().cloned().unwrap()
}

#[tokio::test]
async fn reference_servers_are_found_through_tool_search_and_called() {
    let home = TestHome::new();
    std::fs::write(home.path().join("note.txt"), "hello from the filesystem").unwrap();
    write_config(
        &home,
        json!({
            // `${VAR:-default}` expands: the variable is not set.
            "everything": {"command": "${TROUPE_TEST_NO_SUCH_VAR:-node}", "args": [everything(), "stdio"]},
            "fs": {"command": "node", "args": [filesystem(), home.path().display().to_string()]}
        }),
    );
    let note = home.path().join("note.txt").display().to_string();
    let model = script(vec![
        Turn::tool_call("tool_search", json!({"query": "mcp__everything__echo"})),
        Turn::tool_call("mcp__everything__echo", json!({"message": "hi there"})),
        Turn::tool_call("tool_search", json!({"query": "mcp__fs__read_text_file"})),
        Turn::tool_call("mcp__fs__read_text_file", json!({"path": note})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let mcp = servers(&runtime);
    assert_eq!(
        mcp.servers()
            .iter()
            .map(|s| s.status().state)
            .collect::<Vec<_>>(),
        vec!["idle", "idle"],
        "nothing connects before it is used"
    );
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "use the servers").await;
    assert_eq!(report.outcome, TurnOutcome::Finished, "{report:?}");
    let requests = model.requests();
    check_invariants(&requests);
    let search = requests[0]
        .tools
        .iter()
        .find(|t| t.name == "tool_search")
        .expect("tool_search is offered while servers wait");
    assert!(
        search.description.contains("mcp:everything"),
        "{}",
        search.description
    );
    let results = tool_results(&requests);
    assert_eq!(
        results[0].1.data["loaded"],
        json!(["mcp__everything__echo"])
    );
    let echo = &results[1].1;
    assert!(!echo.is_error(), "{echo:?}");
    assert!(
        echo.text.starts_with(
            "<untrusted_tool_result source=\"mcp:everything\" tool=\"echo\">\nEcho: hi there"
        ),
        "{}",
        echo.text
    );
    assert!(requests[2]
        .tools
        .iter()
        .any(|t| t.name == "mcp__everything__echo"));
    let read = &results[3].1;
    assert!(read.text.contains("hello from the filesystem"), "{read:?}");
    assert_eq!(mcp.get("fs").unwrap().status().state, "ready");
    runtime.shutdown().await;
}

#[tokio::test]
async fn both_lifecycles_connect_the_2025_handshake_and_the_stateless_2026_one() {
    let home = TestHome::new();
    write_config(
        &home,
        json!({
            "legacy": fixture(json!({})),
            "modern": fixture(json!({"env": {"FIXTURE_MODERN": "1"}})),
        }),
    );
    let model = script(vec![
        Turn::tool_call("mcp__legacy__echo", json!({"text": "old"})),
        Turn::tool_call("mcp__modern__echo", json!({"text": "new"})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let mcp = servers(&runtime);
    let protocol = |name: &str| mcp.get(name).unwrap().status().protocol;
    assert_eq!(protocol("legacy"), "2025-11-25");
    assert_eq!(protocol("modern"), "2026-07-28");
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "echo both").await;
    let results = tool_results(&model.requests());
    assert!(results[0].1.text.contains("old"), "{:?}", results[0].1);
    assert!(results[1].1.text.contains("new"), "{:?}", results[1].1);
    runtime.shutdown().await;
}

#[tokio::test]
async fn an_untrusted_server_asks_even_in_auto_mode_but_not_for_read_only_tools() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({"trust": "untrusted"}))}));
    let model = script(vec![
        Turn::tool_call("mcp__fx__write_note", json!({"text": "x"})),
        Turn::tool_call("mcp__fx__echo", json!({"text": "read-only runs"})),
        Turn::text("done"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .set("trust.mode", "auto")
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let mut turn = bot.send("note it").await.unwrap();
    let (request_id, reason) = wait_for(&mut turn, |e| match e {
        AgentEvent::ApprovalRequested {
            request_id, reason, ..
        } => Some((request_id.clone(), reason.clone())),
        _ => None,
    })
    .await;
    assert!(reason.contains("marked untrusted"), "{reason}");
    assert!(runtime.node().answer(&request_id, Some(json!("deny"))));
    let report = tokio::time::timeout(WAIT, turn.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.outcome, TurnOutcome::Finished, "{report:?}");
    let results = tool_results(&model.requests());
    assert!(results[0].1.is_error());
    assert!(
        results[0].1.text.contains("the user refused it"),
        "{:?}",
        results[0].1
    );
    assert!(
        results[1].1.text.contains("read-only runs"),
        "{:?}",
        results[1].1
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_killed_mid_call_is_restarted_and_the_next_call_works() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({}))}));
    let model = script(vec![
        Turn::tool_call("mcp__fx__pid", json!({})),
        Turn::tool_call("mcp__fx__die", json!({})),
        Turn::tool_call("mcp__fx__pid", json!({})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "go").await;
    let results = tool_results(&model.requests());
    let died = &results[1].1;
    assert!(died.is_error(), "{died:?}");
    assert!(
        died.text.contains("on the MCP server `fx` failed"),
        "{}",
        died.text
    );
    let (before, after) = (&results[0].1, &results[2].1);
    assert!(!after.is_error(), "{after:?}");
    assert_ne!(before.text, after.text, "a new process answers");
    let status = servers(&runtime).get("fx").unwrap().status();
    assert_eq!((status.state.as_str(), status.restarts), ("ready", 1));
    runtime.shutdown().await;
}

#[tokio::test]
async fn tools_list_changed_brings_the_new_tool_to_the_next_model_call() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({}))}));
    let model = script(vec![
        Turn::tool_call("mcp__fx__add_tool", json!({"name": "fresh"})),
        Turn::text("added"),
        Turn::tool_call("mcp__fx__fresh", json!({})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let mcp = servers(&runtime);
    let slot = Arc::clone(mcp.get("fx").unwrap());
    assert!(!slot.status().tools.contains(&"mcp__fx__fresh".to_string()));
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "add a tool").await;
    let mut changes = slot.watch();
    tokio::time::timeout(WAIT, async {
        while !slot.status().tools.contains(&"mcp__fx__fresh".to_string()) {
            changes.changed().await.unwrap();
        }
    })
    .await
    .expect("the server's new tool list arrives");
    let report = ask(&bot, "use it").await;
    assert_eq!(report.text, "done");
    let requests = model.requests();
    assert!(requests[2].tools.iter().any(|t| t.name == "mcp__fx__fresh"));
    let results = tool_results(&requests);
    assert!(
        results.last().unwrap().1.text.contains("ran fresh"),
        "{results:?}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_stopped_turn_cancels_the_call_on_the_server() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({}))}));
    let model = script(vec![
        Turn::tool_call("mcp__fx__hang", json!({})),
        Turn::tool_call("mcp__fx__cancelled", json!({})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let mut turn = bot.send("hang").await.unwrap();
    wait_for(&mut turn, |e| match e {
        AgentEvent::ToolCallStarted { call } if call.name == "mcp__fx__hang" => Some(()),
        _ => None,
    })
    .await;
    bot.stop().await.unwrap();
    let report = tokio::time::timeout(WAIT, turn.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.outcome, TurnOutcome::Stopped);
    ask(&bot, "what was cancelled?").await;
    let results = tool_results(&model.requests());
    let cancelled = &results.last().unwrap().1;
    assert!(!cancelled.is_error(), "{cancelled:?}");
    assert!(
        !cancelled.text.contains("[]"),
        "the server was told: {}",
        cancelled.text
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_with_an_error_naming_it() {
    let home = TestHome::new();
    write_config(
        &home,
        json!({
            "slow": fixture(json!({"timeout": 1})),
            "mute": fixture(json!({"env": {"FIXTURE_SILENT": "1"}, "connectTimeout": 1, "alwaysLoad": false})),
        }),
    );
    let model = script(vec![
        Turn::tool_call("mcp__slow__hang", json!({})),
        Turn::tool_call("tool_search", json!({"query": "anything"})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "go").await;
    let results = tool_results(&model.requests());
    let hang = &results[0].1;
    assert!(hang.is_error());
    assert!(
        hang.text
            .contains("the MCP server `slow` did not answer the call of `hang` within 1 s"),
        "{}",
        hang.text
    );
    let search = &results[1].1;
    assert!(
        search
            .text
            .contains("the MCP server `mute` did not finish its handshake within 1 s"),
        "{}",
        search.text
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_bot_gets_only_the_servers_it_names() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({}))}));
    let model = script(vec![
        Turn::tool_call("mcp__fx__echo", json!({"text": "from scout"})),
        Turn::text("refused"),
        Turn::tool_call("mcp__fx__echo", json!({"text": "from finder"})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let scout = runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Finds things."))
        .await
        .unwrap();
    ask(&scout, "echo").await;
    let mut spec = BotSpec::new("finder", "Finder", "Finds more.");
    spec.mcp_servers = vec!["fx".into()];
    let finder = runtime.spawn_bot(spec).await.unwrap();
    ask(&finder, "echo").await;
    let requests = model.requests();
    assert!(!requests[0]
        .tools
        .iter()
        .any(|t| t.name.starts_with("mcp__")));
    let scout_result = tool_results(&requests[..2])[0].1.clone();
    assert!(scout_result.is_error());
    assert!(
        scout_result.text.contains("not available to this agent"),
        "{}",
        scout_result.text
    );
    let finder_result = tool_results(&requests)[0].1.clone();
    assert!(
        finder_result.text.contains("from finder"),
        "{finder_result:?}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn streamable_http_on_loopback() {
    let home = TestHome::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut server = tokio::process::Command::new("node")
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = server.stderr.take().unwrap();
    tokio::time::timeout(WAIT, async {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("listening on port") {
                return;
            }
        }
        panic!("the server ended before it listened");
    })
    .await
    .expect("the HTTP server starts");
    write_config(
        &home,
        json!({"web": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp"), "alwaysLoad": true}}),
    );
    let model = script(vec![
        Turn::tool_call("mcp__web__get-sum", json!({"a": 2, "b": 3})),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "add").await;
    let results = tool_results(&model.requests());
    assert!(!results[0].1.is_error(), "{:?}", results[0].1);
    assert!(results[0].1.text.contains('5'), "{}", results[0].1.text);
    runtime.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test]
async fn an_oversized_result_is_spilled_like_any_other() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({}))}));
    let long = "x".repeat(40_000);
    let model = script(vec![
        Turn::tool_call("mcp__fx__echo", json!({ "text": long })),
        Turn::text("done"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "echo a lot").await;
    let result = tool_results(&model.requests())[0].1.clone();
    let path = result.data["spill_path"].as_str().expect("spilled");
    let spilled = std::fs::read_to_string(path).unwrap();
    assert!(spilled.starts_with("<untrusted_tool_result source=\"mcp:fx\""));
    assert!(spilled.contains(&"x".repeat(40_000)));
    assert!(result.text.len() < 35_000, "{}", result.text.len());
    runtime.shutdown().await;
}

#[test]
fn mcp_list_names_a_malformed_server_and_still_lists_the_others() {
    use super::cli::{text, troupe};
    let home = TestHome::new();
    write_config(
        &home,
        json!({
            "fx": fixture(json!({"args": ["${TROUPE_TEST_NO_SUCH_VAR:-".to_string() + &mcp_dir().join("fixture.mjs").display().to_string() + "}"]})),
            "bad": {"command": "node", "trust": "sometimes"}
        }),
    );
    let out = troupe(&home, &["mcp", "list", "--json"]);
    assert!(!out.status.success(), "a bad server fails the listing");
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["name"], "fx");
    assert_eq!(lines[0]["state"], "ready", "{:?}", lines[0]);
    assert!(lines[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "mcp__fx__echo" && t["read_only"] == true));
    assert_eq!(lines[1]["state"], "invalid");
    let error = lines[1]["error"].as_str().unwrap();
    let file = home.path().join("mcp.json").display().to_string();
    assert!(
        error.starts_with(&format!(
            "{file}: server `bad`: `trust`: `sometimes` is not a trust level"
        )),
        "{error}"
    );
    let test = troupe(&home, &["mcp", "test", "nope"]);
    assert!(!test.status.success());
    assert!(
        text(&test.stderr).contains("there is no MCP server named `nope`"),
        "{}",
        text(&test.stderr)
    );
}

#[tokio::test]
async fn a_server_that_keeps_dying_is_reported_by_name_at_once() {
    let home = TestHome::new();
    write_config(&home, json!({"fx": fixture(json!({}))}));
    let mut turns: Vec<Turn> = (0..6)
        .map(|_| Turn::tool_call("mcp__fx__die", json!({})))
        .collect();
    turns.push(Turn::text("done"));
    let model = script(turns);
    let runtime = home
        .builder(Arc::clone(&model))
        .settings(|s| s.repeat_limit = 100)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "go").await;
    let results = tool_results(&model.requests());
    let last = &results.last().unwrap().1;
    assert!(last.is_error());
    assert!(
        last.text
            .contains("the MCP server `fx` keeps failing (5 failures within a minute"),
        "{}",
        last.text
    );
    assert_eq!(
        servers(&runtime).get("fx").unwrap().status().state,
        "failed"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn stopping_the_runtime_kills_the_servers_whole_process_group() {
    let home = TestHome::new();
    let pidfile = home.path().join("grandchild.pid");
    let fixture_path = mcp_dir().join("fixture.mjs").display().to_string();
    write_config(
        &home,
        json!({"fx": {
            "command": "sh",
            "args": ["-c", format!("sleep 1000 & echo $! > '{}'; exec node '{fixture_path}'", pidfile.display())],
            "alwaysLoad": true
        }}),
    );
    let runtime = home.builder(script(vec![])).build().await.unwrap();
    assert_eq!(servers(&runtime).get("fx").unwrap().status().state, "ready");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| !stat.rsplit(") ").next().unwrap_or("").starts_with('Z'))
            .unwrap_or(false)
    };
    assert!(alive(), "the server's own child runs");
    runtime.shutdown().await;
    tokio::time::timeout(WAIT, async {
        while alive() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the server's child was killed with its group");
}

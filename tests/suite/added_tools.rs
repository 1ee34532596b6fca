//! Tools added to a running runtime: for every bot or for one, offered
//! from the next model call, removable, and refused under a taken name.

use std::sync::Arc;

use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::{BotSpec, FnTool, RuntimeError, ToolContext};

use super::support::TestHome;

/// Arguments of `shout`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    /// What to shout.
    text: String,
}

fn tool(name: &str) -> Arc<dyn troupe::Tool> {
    Arc::new(FnTool::from_fn(
        name.to_string(),
        "Shout a text.",
        |p: Shout, _: ToolContext| async move { p.text.to_uppercase() },
    ))
}

/// The names of the tools the last request of `bot` offered.
fn offered(model: &ScriptedProvider, bot: &str) -> Vec<String> {
    let requests = model.bot(bot).unwrap().requests();
    let last = requests.last().expect("a request");
    last.tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test]
async fn tools_added_while_running_reach_every_bot_or_one_and_go_again() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::per_bot(
        "added".into(),
        vec![
            (
                "scout".into(),
                vec![
                    Turn::text("before"),
                    Turn::tool_call("shout", serde_json::json!({"text": "hi"})),
                    Turn::text("shouted").expecting("HI"),
                    Turn::text("after removal"),
                ],
            ),
            ("other".into(), vec![Turn::text("one"), Turn::text("two")]),
        ],
    ));
    let rt = home.builder(Arc::clone(&model)).build().await.unwrap();
    let scout = rt
        .spawn_bot(BotSpec::new("scout", "Scout", "Shouts."))
        .await
        .unwrap();
    let other = rt
        .spawn_bot(BotSpec::new("other", "Other", "Waits."))
        .await
        .unwrap();
    assert_eq!(
        scout.send("go").await.unwrap().result().await.unwrap().text,
        "before"
    );
    assert!(!offered(&model, "scout").contains(&"shout".to_string()));

    scout.add_tool(tool("shout")).unwrap();
    rt.add_tool(tool("whisper")).unwrap();
    let report = scout
        .send("shout hi")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(report.text, "shouted");
    let seen = offered(&model, "scout");
    assert!(
        seen.contains(&"shout".into()) && seen.contains(&"whisper".into()),
        "{seen:?}"
    );
    other.send("go").await.unwrap().result().await.unwrap();
    let seen = offered(&model, "other");
    assert!(
        !seen.contains(&"shout".into()) && seen.contains(&"whisper".into()),
        "{seen:?}"
    );

    // Taken names are refused, saying what to do.
    for taken in ["read_file", "whisper"] {
        let refused = rt.add_tool(tool(taken)).unwrap_err();
        assert!(matches!(refused, RuntimeError::Tool(_)), "{refused:?}");
        assert!(refused.to_string().contains("remove it first"), "{refused}");
    }
    assert!(matches!(
        rt.add_tool_for("nobody", tool("yell")),
        Err(RuntimeError::Node(_))
    ));

    assert!(rt.remove_tool("shout"));
    assert!(!rt.remove_tool("read_file"), "only added tools are removed");
    scout.send("again").await.unwrap().result().await.unwrap();
    let seen = offered(&model, "scout");
    assert!(
        !seen.contains(&"shout".into()) && seen.contains(&"whisper".into()),
        "{seen:?}"
    );
    rt.shutdown().await;
}

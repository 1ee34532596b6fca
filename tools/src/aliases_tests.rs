//! Every alias a tool documents works through the dispatcher — the schema
//! check included — not only inside the tool.

use std::collections::HashSet;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe_runtime::home::Home;
use troupe_runtime::protocol::{ToolCall, ToolResult};
use troupe_runtime::tool::dispatch::{DispatchSettings, Dispatcher, OpenGate};
use troupe_runtime::tool::ToolContext;

/// The aliases a text documents: "`x` is accepted too" and "(alias `x`)".
fn documented(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (marker, before) in [("` is accepted too", true), ("alias `", false)] {
        let mut rest = text;
        while let Some(at) = rest.find(marker) {
            let name = if before {
                rest[..at].rsplit('`').next().unwrap_or_default()
            } else {
                rest[at + marker.len()..]
                    .split('`')
                    .next()
                    .unwrap_or_default()
            };
            found.push(name.to_string());
            rest = &rest[at + marker.len()..];
        }
    }
    found
}

#[test]
fn every_documented_top_level_alias_is_declared_for_the_dispatcher() {
    let mut checked = 0;
    for tool in super::builtin().iter() {
        let spec = tool.spec();
        let declared: Vec<(&str, &str)> = spec
            .aliases
            .iter()
            .map(|a| (a.alias.as_str(), a.argument.as_str()))
            .collect();
        // A tool without parameters has no properties.
        let empty = serde_json::Map::new();
        let properties = spec.parameters["properties"].as_object().unwrap_or(&empty);
        for (argument, schema) in properties {
            let text = schema["description"].as_str().unwrap_or_default();
            for alias in documented(text) {
                assert!(
                    declared.contains(&(alias.as_str(), argument.as_str())),
                    "{}: `{alias}` is documented for `{argument}` but not declared with ToolSpec::alias",
                    spec.name
                );
                checked += 1;
            }
        }
        for alias in documented(&spec.description) {
            assert!(
                declared.iter().any(|(a, _)| *a == alias),
                "{}: its description promises `{alias}`",
                spec.name
            );
        }
        for (alias, argument) in &declared {
            assert!(
                properties.contains_key(*argument),
                "{}: `{alias}` stands for `{argument}`, which the schema lacks",
                spec.name
            );
        }
    }
    assert!(
        checked > 0,
        "no documented alias was found: the scan is broken"
    );
}

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    dispatcher: Dispatcher,
    visible: HashSet<String>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf());
    let registry = super::builtin();
    let visible = registry.iter().map(|t| t.spec().name.clone()).collect();
    Fixture {
        _dir: dir,
        ctx,
        dispatcher: Dispatcher::new(
            Arc::new(registry),
            Arc::new(OpenGate),
            DispatchSettings::default(),
        ),
        visible,
    }
}

async fn dispatch(f: &Fixture, name: &str, arguments: Value) -> ToolResult {
    let call = ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments,
    };
    f.dispatcher.run_one(&call, &f.visible, &f.ctx).await
}

#[tokio::test]
async fn no_declared_alias_is_refused_by_the_schema_check() {
    let f = fixture();
    for tool in super::builtin().iter() {
        for alias in &tool.spec().aliases {
            let result = dispatch(&f, &tool.spec().name, json!({ alias.alias.clone(): "x" })).await;
            assert!(
                !result.text.contains("unknown argument"),
                "{}: {}",
                tool.spec().name,
                result.text
            );
        }
    }
}

#[tokio::test]
async fn memory_new_text_works_at_the_top_level_and_in_operations_through_the_dispatcher() {
    let f = fixture();
    let profile = || std::fs::read_to_string(f.ctx.home.user_profile()).unwrap_or_default();
    let added = dispatch(
        &f,
        "memory",
        json!({"target": "user", "action": "add", "content": "Likes coffee in the morning."}),
    )
    .await;
    assert!(!added.is_error(), "{}", added.text);
    let replaced = dispatch(
        &f,
        "memory",
        json!({"target": "user", "action": "replace", "old_text": "coffee", "new_text": "Likes green tea in the morning."}),
    )
    .await;
    assert!(!replaced.is_error(), "{}", replaced.text);
    assert_eq!(profile().trim(), "Likes green tea in the morning.");
    let in_operations = dispatch(
        &f,
        "memory",
        json!({"target": "user", "operations": [{"action": "replace", "old_text": "green tea", "new_text": "Likes mint tea."}]}),
    )
    .await;
    assert!(!in_operations.is_error(), "{}", in_operations.text);
    assert_eq!(profile().trim(), "Likes mint tea.");
    let both = dispatch(
        &f,
        "memory",
        json!({"target": "user", "action": "add", "content": "a", "new_text": "b"}),
    )
    .await;
    assert!(both.is_error());
    assert!(
        both.text
            .contains("`new_text` is another name for `content`"),
        "{}",
        both.text
    );
}

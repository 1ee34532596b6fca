use pretty_assertions::assert_eq;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolStatus;

use super::*;
use troupe_runtime::tool::{Tool, ToolContext};

async fn call(args: serde_json::Value) -> ToolResult {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf());
    troupe_docs::tool().call(args, &ctx).await
}

#[test]
fn every_page_of_docs_is_shipped() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    on_disk.sort();
    let mut shipped: Vec<String> = PAGES.iter().map(|(n, _)| (*n).to_owned()).collect();
    shipped.sort();
    assert_eq!(shipped, on_disk, "add the new page to troupe_docs::PAGES");
}

#[tokio::test]
async fn without_a_path_the_index_lists_every_page() {
    let result = call(serde_json::json!({})).await;
    assert_eq!(result.status, ToolStatus::Ok);
    assert!(
        result.text.starts_with("# troupe documentation\n"),
        "{}",
        result.text
    );
    for (name, _) in PAGES {
        assert!(result.text.contains(&format!("- `{name}` — ")), "{name}");
    }
    assert!(
        result.text.contains(
            "- `configuration.md` — Configuration: troupe reads its settings from three layers;"
        ),
        "{}",
        result.text
    );
}

#[tokio::test]
async fn a_page_is_read_and_an_unknown_one_answers_with_the_index() {
    let result = call(serde_json::json!({"path": "docs/Configuration"})).await;
    assert!(
        result.text.starts_with("docs/configuration.md (lines 1–"),
        "{}",
        result.text
    );
    assert!(result.text.contains("## `[web]`"));
    let unknown = call(serde_json::json!({"path": "nope.md"})).await;
    assert_eq!(unknown.status, ToolStatus::Ok);
    assert!(unknown
        .text
        .starts_with("There is no page `nope.md`. # troupe documentation"));
}

#[tokio::test]
async fn a_heading_or_an_offset_picks_where_to_start_and_long_pages_go_on() {
    let at = call(serde_json::json!({"path": "configuration.md#web"})).await;
    let first = at.text.lines().nth(2).unwrap();
    assert_eq!(first, "## `[web]`");
    let text = PAGES.iter().find(|(n, _)| *n == "tools.md").unwrap().1;
    let total = text.lines().count();
    assert!(total > PAGE_LINES, "tools.md is long enough to page");
    let page = call(serde_json::json!({"path": "tools.md"})).await;
    let next = page.data["next_offset"].as_u64().unwrap();
    assert!(page.text.ends_with(&format!(
        "[more below: call troupe_docs with path \"tools.md\" and offset {next}]"
    )));
    let rest = call(serde_json::json!({"path": "tools.md", "offset": next})).await;
    let expected = text.lines().nth(next as usize - 1).unwrap();
    assert_eq!(rest.text.lines().nth(2).unwrap(), expected);
}

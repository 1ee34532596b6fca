//! The house files tools on a real store, seated in a house.

use std::sync::Arc;

use serde_json::json;
use troupe_runtime::home::Home;
use troupe_runtime::house::{HouseScope, Seat};
use troupe_runtime::id::{HouseId, ThreadId};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files::FileLimits;
use troupe_runtime::store::{house, Store};
use troupe_runtime::tool::{Tool, ToolContext};

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    acme: ToolContext,
    beta: ToolContext,
    outside: ToolContext,
}

/// The built-in tool `name` as the registry holds it: the house's meaning
/// in a house, the machine's outside.
fn builtin(name: &str) -> Arc<dyn Tool> {
    crate::builtin().get(name).unwrap()
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (a, b): (HouseId, HouseId) = store
        .write(|tx| {
            Ok((
                house::create_house(tx, "acme")?.id,
                house::create_house(tx, "beta")?.id,
            ))
        })
        .await
        .unwrap();
    let ctx = |h: Option<HouseId>| {
        let mut ctx =
            ToolContext::standalone(Home::new(dir.path().join("home")), dir.path().into());
        ctx.agent = "assistant".into();
        ctx.services.node().set_store(store.clone());
        ctx.services.node().set_file_limits(FileLimits {
            max_file_bytes: 8192,
            house_quota_bytes: 64 * 1024,
        });
        // As the node opens a seated conversation: its seat, and the
        // scope of the house it works for (neither is the home's own).
        if let Some(house) = h {
            ctx.services.set_seat(Seat {
                house,
                thread: ThreadId::new(),
            });
            ctx.services
                .set_house_scope(HouseScope { house, home: false });
        }
        ctx
    };
    Fixture {
        acme: ctx(Some(a)),
        beta: ctx(Some(b)),
        outside: ctx(None),
        _dir: dir,
    }
}

async fn call(tool: &dyn Tool, ctx: &ToolContext, args: serde_json::Value) -> ToolResult {
    tool.call(args, ctx).await
}

#[tokio::test]
async fn read_and_write_mean_the_house_files_only_in_a_house() {
    let f = fixture().await;
    let (read, write) = (builtin("read_file"), builtin("write_file"));
    let seated = read.available(&f.acme).unwrap();
    assert!(
        seated.description.contains("house's shared files"),
        "{}",
        seated.description
    );
    assert!(seated.parameters.to_string().contains("version"));
    let local = read.available(&f.outside).unwrap();
    assert!(!local.description.contains("house"));
    assert!(write
        .available(&f.acme)
        .unwrap()
        .parameters
        .to_string()
        .contains("files"));
    for tool in [
        &search_files::search_files::tool() as &dyn Tool,
        &list_files::list_files::tool(),
        &delete_file::delete_file::tool(),
    ] {
        assert!(tool.available(&f.outside).is_none());
        assert!(tool.available(&f.acme).is_some());
    }
    // Outside a house, write_file is still the local tool: it takes `path`.
    let r = call(
        &*write,
        &f.outside,
        json!({"files": [{"path": "a", "content": "b"}]}),
    )
    .await;
    assert!(r.is_error() && r.text.contains("path"), "{}", r.text);
}

#[tokio::test]
async fn a_bot_writes_reads_old_versions_and_chunks_and_another_house_sees_nothing() {
    let f = fixture().await;
    let (read, write) = (builtin("read_file"), builtin("write_file"));
    let r = call(&*write, &f.acme, json!({"files": [{"path": "plans/a.md", "content": "alpha v1"}, {"path": "plans/b.md", "content": "beta v1"}], "message": "two plans"})).await;
    assert!(!r.is_error(), "{}", r.text);
    assert!(
        r.text.starts_with("Wrote 2 files as version 1"),
        "{}",
        r.text
    );
    let long: String = (0..200)
        .map(|i| format!("row {i:03} of the ledger\n"))
        .collect();
    call(&*write, &f.acme, json!({"files": [{"path": "plans/a.md", "content": "alpha v2"}, {"path": "ledger.txt", "content": long}]})).await;
    let old = call(&*read, &f.acme, json!({"path": "plans/a.md", "version": 1})).await;
    assert!(
        old.text.contains("version 1; the newest is version 2") && old.text.ends_with("alpha v1"),
        "{}",
        old.text
    );
    // A version past the newest is an error naming the newest, not the newest.
    let future = call(&*read, &f.acme, json!({"path": "plans/a.md", "version": 7})).await;
    assert!(
        future.is_error()
            && future.text.contains("no version 7")
            && future.text.contains("the newest is 2"),
        "{}",
        future.text
    );
    let middle = call(
        &*read,
        &f.acme,
        json!({"path": "ledger.txt", "offset": 2200, "length": 44}),
    )
    .await;
    assert!(
        middle.text.contains("characters 2200–2244 of 4400"),
        "{}",
        middle.text
    );
    assert!(
        middle.text.contains("row 100 of the ledger"),
        "{}",
        middle.text
    );
    assert!(middle.text.contains("offset=2244"), "{}", middle.text);
    // Indexed after the write: what a search would wait for.
    let store = f.acme.services.store().unwrap();
    troupe_runtime::store::house_files::catch_up(&store, HouseScope::of(&f.acme).unwrap().house)
        .await
        .unwrap();
    let list = call(
        &list_files::list_files::tool(),
        &f.acme,
        json!({"folder": "plans"}),
    )
    .await;
    assert!(
        list.text.contains("plans/a.md — version 2") && list.text.contains("indexed"),
        "{}",
        list.text
    );
    // House beta sees none of it, by any tool.
    let none = call(&*read, &f.beta, json!({"path": "plans/a.md"})).await;
    assert!(
        none.is_error() && none.text.contains("no file `plans/a.md`"),
        "{}",
        none.text
    );
    assert!(call(&list_files::list_files::tool(), &f.beta, json!({}))
        .await
        .text
        .contains("no files"));
    assert!(call(
        &search_files::search_files::tool(),
        &f.beta,
        json!({"query": "ledger"})
    )
    .await
    .text
    .starts_with("No house file"));
    let gone = call(
        &delete_file::delete_file::tool(),
        &f.beta,
        json!({"files": [{"path": "plans/a.md", "version": 2}]}),
    )
    .await;
    assert!(
        gone.is_error() && gone.text.contains("does not exist"),
        "{}",
        gone.text
    );
}

#[tokio::test]
async fn a_stale_delete_is_refused_whole() {
    let f = fixture().await;
    let write = builtin("write_file");
    call(
        &*write,
        &f.acme,
        json!({"files": [{"path": "a.md", "content": "a1"}, {"path": "b.md", "content": "b1"}]}),
    )
    .await;
    call(
        &*write,
        &f.acme,
        json!({"files": [{"path": "a.md", "content": "a2"}]}),
    )
    .await;
    let refused = call(
        &delete_file::delete_file::tool(),
        &f.acme,
        json!({"files": [{"path": "a.md", "version": 1}, {"path": "b.md", "version": 1}]}),
    )
    .await;
    assert!(
        refused.is_error() && refused.text.contains("nothing was deleted"),
        "{}",
        refused.text
    );
    let list = call(&list_files::list_files::tool(), &f.acme, json!({})).await;
    assert!(
        list.text.contains("a.md") && list.text.contains("b.md"),
        "{}",
        list.text
    );
    let ok = call(&delete_file::delete_file::tool(), &f.acme, json!({"files": [{"path": "a.md", "version": 2}, {"path": "b.md", "version": 1}], "message": "tidy"})).await;
    assert!(!ok.is_error(), "{}", ok.text);
    assert!(call(&list_files::list_files::tool(), &f.acme, json!({}))
        .await
        .text
        .contains("no files"));
}

#[tokio::test]
async fn limits_and_bad_paths_are_refused_whole_with_what_to_do() {
    let f = fixture().await;
    let write = builtin("write_file");
    for (files, says) in [
        (
            json!([{"path": "ok.md", "content": "x"}, {"path": "../../etc/passwd", "content": "x"}]),
            "`.` and `..` segments",
        ),
        (
            json!([{"path": "ok.md", "content": "x"}, {"path": "a\u{202E}txt.exe", "content": "x"}]),
            "invisible character U+202E",
        ),
        (
            json!([{"path": "ok.md", "content": "x"}, {"path": "/abs.md", "content": "x"}]),
            "absolute",
        ),
        (
            json!([{"path": "big.md", "content": "x".repeat(9000)}]),
            "over the limit of 8192 bytes per file ([files] max_file_bytes)",
        ),
    ] {
        let r = call(&*write, &f.acme, json!({"files": files})).await;
        assert!(r.is_error() && r.text.contains(says), "{}", r.text);
    }
    for i in 0..8 {
        let r = call(
            &*write,
            &f.acme,
            json!({"files": [{"path": format!("f{i}"), "content": "y".repeat(8000)}]}),
        )
        .await;
        assert!(!r.is_error(), "{}", r.text);
    }
    let over = call(
        &*write,
        &f.acme,
        json!({"files": [{"path": "g1", "content": "z".repeat(3000)}]}),
    )
    .await;
    assert!(
        over.is_error()
            && over
                .text
                .contains("over its quota of 65536 bytes ([files] house_quota_bytes)"),
        "{}",
        over.text
    );
    let list = call(&list_files::list_files::tool(), &f.acme, json!({})).await;
    assert!(
        !list.text.contains("ok.md") && !list.text.contains("g1"),
        "{}",
        list.text
    );
}

#[tokio::test]
async fn search_finds_text_inside_a_docx_and_a_pdf_with_citations_read_file_opens() {
    let f = fixture().await;
    let dir = tempfile::tempdir().unwrap();
    let docx = std::fs::read(crate::documents::tests::docx(dir.path())).unwrap();
    let pdf = crate::documents::tests::pdf(&["Cover page", "The vault code is MARIGOLD"]);
    let store = f.acme.services.store().unwrap();
    let house = HouseScope::of(&f.acme).unwrap().house;
    let files = vec![
        prepare("reports/q3.docx", docx),
        prepare("memo.pdf", pdf),
        prepare("logo.bin", vec![0, 159, 146, 150]),
    ];
    troupe_runtime::store::house_files::write_files(
        &store,
        house,
        "ada",
        "upload",
        files,
        FileLimits::default(),
    )
    .await
    .unwrap();
    let search = search_files::search_files::tool();
    let hit = call(&search, &f.acme, json!({"query": "engineers"})).await;
    assert!(
        hit.text.starts_with("[1] reports/q3.docx#1, version 1"),
        "{}",
        hit.text
    );
    let hit = call(&search, &f.acme, json!({"query": "marigold"})).await;
    assert!(
        hit.text.starts_with("[1] memo.pdf#1, version 1"),
        "{}",
        hit.text
    );
    let opened = call(
        &*builtin("read_file"),
        &f.acme,
        json!({"path": "memo.pdf#1"}),
    )
    .await;
    assert!(
        opened.text.contains("chunk 1") && opened.text.contains("MARIGOLD"),
        "{}",
        opened.text
    );
    let list = call(&list_files::list_files::tool(), &f.acme, json!({})).await;
    assert!(
        list.text
            .contains("logo.bin — version 1, 4 bytes, binary, not indexable"),
        "{}",
        list.text
    );
    let bin = call(&*builtin("read_file"), &f.acme, json!({"path": "logo.bin"})).await;
    assert!(
        bin.is_error() && bin.text.contains("binary"),
        "{}",
        bin.text
    );
}

#[test]
fn html_is_read_as_its_visible_text() {
    let text = strip_html("<html><head><style>p{}</style><script>var x=1;</script></head><body><h1>Plan</h1><p>Ship &amp; tell</p></body></html>");
    assert_eq!(text, "Plan\nShip & tell\n");
}

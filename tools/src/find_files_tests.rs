use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe_runtime::home::Home;

use super::*;
use troupe_runtime::tool::Tool as _;

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    cwd: PathBuf,
}

/// A small tree with hidden, ignored and node_modules files.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("work");
    for (path, content) in [
        ("src/a.rs", "fn alpha() {}\nlet x = 1;\n// TODO one\n"),
        ("src/b.rs", "TODO two\nTODO three\n"),
        ("docs/readme.md", "nothing\ntodo lower\n"),
        (".hidden/h.rs", "TODO hidden\n"),
        ("node_modules/m.js", "TODO nm\n"),
        ("build/out.rs", "TODO built\n"),
        (".gitignore", "build/\n"),
        ("data.bin", "TODO\0binary\n"),
    ] {
        let path = cwd.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let ctx = ToolContext::standalone(Home::new(root.join(".troupe")), cwd.clone());
    Fixture {
        _dir: dir,
        ctx,
        cwd,
    }
}

async fn find(f: &Fixture, args: serde_json::Value) -> ToolResult {
    find_files::tool().call(args, &f.ctx).await
}

#[tokio::test]
async fn content_matches_come_in_path_order_skipping_hidden_ignored_and_binary() {
    let f = fixture();
    let result = find(&f, json!({"pattern": "TODO"})).await;
    assert!(!result.is_error(), "{}", result.text);
    assert_eq!(
        result.text,
        "src/a.rs:3:// TODO one\nsrc/b.rs:1:TODO two\nsrc/b.rs:2:TODO three"
    );
    let folded = find(
        &f,
        json!({"pattern": "todo", "ignore_case": true, "file_glob": "*.md"}),
    )
    .await;
    assert_eq!(folded.text, "docs/readme.md:2:todo lower");
}

#[tokio::test]
async fn files_only_and_count_modes() {
    let f = fixture();
    let files = find(&f, json!({"pattern": "TODO", "output_mode": "files_only"})).await;
    assert_eq!(files.text, "src/a.rs\nsrc/b.rs");
    let count = find(&f, json!({"pattern": "TODO", "output_mode": "count"})).await;
    assert_eq!(count.text, "src/a.rs:1\nsrc/b.rs:2");
}

#[tokio::test]
async fn context_lines_use_dashes_and_groups_are_separated() {
    let f = fixture();
    std::fs::write(
        f.cwd.join("ctx.txt"),
        "l1\nl2\nMATCH\nl4\nl5\nl6\nl7\nMATCH\nl9\n",
    )
    .unwrap();
    let result = find(
        &f,
        json!({"pattern": "MATCH", "context": 1, "path": "ctx.txt"}),
    )
    .await;
    assert_eq!(
        result.text,
        "ctx.txt-2-l2\nctx.txt:3:MATCH\nctx.txt-4-l4\n--\nctx.txt-7-l7\nctx.txt:8:MATCH\nctx.txt-9-l9"
    );
    let wide = find(
        &f,
        json!({"pattern": "MATCH", "context": 50, "path": "ctx.txt", "limit": 1}),
    )
    .await;
    assert_eq!(
        wide.text,
        "ctx.txt-1-l1\nctx.txt-2-l2\nctx.txt:3:MATCH\nctx.txt-4-l4\nctx.txt-5-l5\nctx.txt-6-l6\nctx.txt-7-l7\n[more results: call again with offset=1]"
    );
}

#[tokio::test]
async fn file_names_match_a_glob() {
    let f = fixture();
    let result = find(&f, json!({"pattern": "*.rs", "target": "files"})).await;
    assert_eq!(result.text, "src/a.rs\nsrc/b.rs");
    let nested = find(&f, json!({"pattern": "src/*.rs", "target": "files"})).await;
    assert_eq!(nested.text, "src/a.rs\nsrc/b.rs");
    let none = find(&f, json!({"pattern": "*.zig", "target": "files"})).await;
    assert!(!none.is_error());
    assert_eq!(none.text, "No matches for `*.zig` in `.`.");
}

#[tokio::test]
async fn a_path_inside_a_hidden_or_ignored_folder_is_searched() {
    let f = fixture();
    for (path, expected) in [
        (".hidden", ".hidden/h.rs:1:TODO hidden"),
        ("node_modules", "node_modules/m.js:1:TODO nm"),
        ("build", "build/out.rs:1:TODO built"),
    ] {
        let result = find(&f, json!({"pattern": "TODO", "path": path})).await;
        assert_eq!(result.text, expected, "{path}");
    }
}

#[tokio::test]
async fn results_page_with_limit_and_offset() {
    let f = fixture();
    let first = find(&f, json!({"pattern": "TODO", "limit": 2})).await;
    assert_eq!(
        first.text,
        "src/a.rs:3:// TODO one\nsrc/b.rs:1:TODO two\n[more results: call again with offset=2]"
    );
    assert_eq!(first.data["more"], true);
    let second = find(&f, json!({"pattern": "TODO", "limit": 2, "offset": 2})).await;
    assert_eq!(second.text, "src/b.rs:2:TODO three");
    let past = find(&f, json!({"pattern": "TODO", "offset": 10})).await;
    assert_eq!(past.text, "No more results for `TODO` in `.`.");
}

#[tokio::test]
async fn an_invalid_regex_is_an_error_with_the_reason() {
    let f = fixture();
    let result = find(&f, json!({"pattern": "(unclosed"})).await;
    assert!(result.is_error());
    assert!(
        result.text.starts_with("invalid regex `(unclosed`: ")
            && result.text.contains("unclosed group"),
        "{}",
        result.text
    );
}

#[test]
fn a_search_past_its_deadline_says_it_stopped_early() {
    let f = fixture();
    let search = Search {
        home: f.ctx.home.clone(),
        cwd: f.cwd.clone(),
        refused: Vec::new(),
        deadline: Instant::now(),
    };
    let params: FindFilesParams = serde_json::from_value(json!({"pattern": "TODO"})).unwrap();
    let result = search.run(&f.cwd, ".", &params);
    assert_eq!(
        result.text,
        "No matches for `TODO` in `.`.\n[stopped early after 60 s: the results are incomplete; search a narrower path]"
    );
    assert_eq!(result.data["stopped_early"], true);
}

#[tokio::test]
async fn files_that_can_hold_keys_are_never_searched() {
    let f = fixture();
    std::fs::create_dir_all(f.ctx.home.root()).unwrap();
    std::fs::write(f.ctx.home.models_file(), "api_key = \"TODO-secret\"\n").unwrap();
    std::fs::write(f.ctx.home.config_file(), "# TODO setting\n").unwrap();
    let home = f.ctx.home.root().display().to_string();
    let result = find(&f, json!({"pattern": "TODO", "path": home})).await;
    assert_eq!(
        result.text,
        format!("{}:1:# TODO setting", f.ctx.home.config_file().display())
    );
}

/// A minimal Word document whose body is `paragraphs`.
fn write_docx(path: &std::path::Path, paragraphs: &[&str]) {
    use std::io::Write;
    let body: String = paragraphs
        .iter()
        .map(|p| format!("<w:p><w:r><w:t>{p}</w:t></w:r></w:p>"))
        .collect();
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    let file = std::fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default();
    zip.start_file("[Content_Types].xml", options).unwrap();
    zip.write_all(br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#)
        .unwrap();
    zip.start_file("word/document.xml", options).unwrap();
    zip.write_all(document.as_bytes()).unwrap();
    zip.finish().unwrap();
}

#[tokio::test]
async fn documents_are_searched_through_their_text_under_their_own_path() {
    let f = fixture();
    write_docx(
        &f.cwd.join("docs/report.docx"),
        &["Quarterly report", "The TODO list is long", "Nothing else"],
    );
    let result = find(&f, json!({"pattern": "TODO list", "path": "docs"})).await;
    assert!(!result.is_error(), "{}", result.text);
    assert_eq!(result.text, "docs/report.docx:3:The TODO list is long");
    let files = find(
        &f,
        json!({"pattern": "Quarterly", "output_mode": "files_only"}),
    )
    .await;
    assert_eq!(files.text, "docs/report.docx");
    let cache = f.ctx.home.documents_dir();
    assert!(
        std::fs::read_dir(&cache).unwrap().count() > 0,
        "converted once into the home's cache"
    );
}

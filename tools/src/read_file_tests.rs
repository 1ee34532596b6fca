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

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let ctx = ToolContext::standalone(Home::new(root.join(".troupe")), cwd.clone());
    Fixture {
        _dir: dir,
        ctx,
        cwd,
    }
}

async fn read(f: &Fixture, args: serde_json::Value) -> ToolResult {
    read_file::tool().call(args, &f.ctx).await
}

fn lines(n: usize, body: impl Fn(usize) -> String) -> String {
    (1..=n).map(|i| format!("{}\n", body(i))).collect()
}

#[tokio::test]
async fn lines_are_numbered_like_cat_n_and_crlf_is_hidden() {
    let f = fixture();
    std::fs::write(f.cwd.join("a.txt"), "alpha\r\nbeta\n\ngamma").unwrap();
    let result = read(&f, json!({"path": "a.txt"})).await;
    assert!(!result.is_error());
    assert_eq!(
        result.text,
        "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n"
    );
    assert_eq!(result.data["total_lines"], 4);
}

#[tokio::test]
async fn a_page_holds_2000_lines_and_says_where_to_go_on() {
    let f = fixture();
    std::fs::write(f.cwd.join("long.txt"), lines(3000, |i| format!("l{i}"))).unwrap();
    let first = read(&f, json!({"path": "long.txt"})).await;
    let expected_body = lines(2000, |i| format!("{i:>6}\tl{i}"));
    assert_eq!(
        first.text,
        format!("{expected_body}… 1000 more lines (showing lines 1–2000 of 3000); call again with offset=2001.")
    );
    let rest = read(&f, json!({"path": "long.txt", "offset": 2001})).await;
    assert_eq!(
        rest.text,
        (2001..=3000)
            .map(|i| format!("{i:>6}\tl{i}\n"))
            .collect::<String>()
    );
    let window = read(&f, json!({"path": "long.txt", "offset": 10, "limit": 3})).await;
    assert_eq!(
        window.text,
        "    10\tl10\n    11\tl11\n    12\tl12\n… 2988 more lines (showing lines 10–12 of 3000); call again with offset=13."
    );
    let clamped = read(&f, json!({"path": "long.txt", "limit": 5000})).await;
    assert_eq!(clamped.text, first.text);
}

#[tokio::test]
async fn a_page_holds_at_most_100000_characters_to_the_character() {
    let f = fixture();
    // Each numbered line is 6 + 1 + 92 + 1 = 100 characters: 1000 fill the page exactly.
    std::fs::write(f.cwd.join("exact.txt"), lines(1500, |_| "x".repeat(92))).unwrap();
    let exact = read(&f, json!({"path": "exact.txt"})).await;
    let (body, note) = exact.text.rsplit_once('\n').unwrap();
    assert_eq!(body.chars().count() + 1, MAX_CHARS);
    assert_eq!(
        note,
        "… 500 more lines (showing lines 1–1000 of 1500); call again with offset=1001."
    );
    // One character more per line: 990 lines (99,990 characters) fit, not 991.
    std::fs::write(f.cwd.join("over.txt"), lines(1500, |_| "x".repeat(93))).unwrap();
    let over = read(&f, json!({"path": "over.txt"})).await;
    let (body, note) = over.text.rsplit_once('\n').unwrap();
    assert_eq!(body.chars().count() + 1, 99_990);
    assert_eq!(
        note,
        "… 510 more lines (showing lines 1–990 of 1500); call again with offset=991."
    );
}

#[tokio::test]
async fn long_lines_are_cut_with_a_marker() {
    let f = fixture();
    std::fs::write(
        f.cwd.join("wide.txt"),
        format!("{}\nshort\n", "y".repeat(5000)),
    )
    .unwrap();
    let result = read(&f, json!({"path": "wide.txt"})).await;
    assert_eq!(
        result.text,
        format!(
            "     1\t{} … [line cut at 2000 characters; it has 5000 bytes]\n     2\tshort\n",
            "y".repeat(2000)
        )
    );
}

#[tokio::test]
async fn empty_files_and_offsets_past_the_end_say_so() {
    let f = fixture();
    std::fs::write(f.cwd.join("empty.txt"), "").unwrap();
    let empty = read(&f, json!({"path": "empty.txt"})).await;
    assert!(!empty.is_error());
    assert_eq!(empty.text, "`empty.txt` is empty.");
    std::fs::write(f.cwd.join("three.txt"), "1\n2\n3\n").unwrap();
    let past = read(&f, json!({"path": "three.txt", "offset": 9})).await;
    assert!(past.is_error());
    assert_eq!(
        past.text,
        "`three.txt` has 3 lines; offset 9 is past its end. Call again with an offset from 1 to 3."
    );
}

#[tokio::test]
async fn binary_files_and_documents_are_errors() {
    let f = fixture();
    std::fs::write(f.cwd.join("bin.dat"), b"ab\0cd").unwrap();
    let binary = read(&f, json!({"path": "bin.dat"})).await;
    assert!(binary.is_error());
    assert_eq!(
        binary.text,
        "`bin.dat` is a binary file (5 bytes), not text; read_file shows text files and images"
    );
    std::fs::write(f.cwd.join("doc.PDF"), b"%PDF-1.7\n\0\x01").unwrap();
    let doc = read(&f, json!({"path": "doc.PDF"})).await;
    assert!(doc.is_error());
    assert!(
        doc.text.contains("could not be read as a PDF"),
        "{}",
        doc.text
    );
    let missing = read(&f, json!({"path": "nope.txt"})).await;
    assert!(missing.is_error());
    let folder = read(&f, json!({"path": "."})).await;
    assert_eq!(
        folder.text,
        "`.` is a folder, not a file; use find_files with target \"files\" to list it"
    );
}

#[tokio::test]
async fn images_are_attached_for_models_that_see_them() {
    let f = fixture();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR rest".to_vec();
    std::fs::write(f.cwd.join("pic.png"), &png).unwrap();
    let blind = read(&f, json!({"path": "pic.png"})).await;
    assert!(!blind.is_error());
    assert_eq!(
        blind.text,
        "`pic.png` is a PNG image (21 bytes). This model cannot see images, so its content is not shown; ask the user what it shows if that matters."
    );
    assert_eq!(
        blind.data,
        json!({"image": {"media_type": "image/png", "path": f.cwd.join("pic.png")}})
    );
    f.ctx
        .services
        .set_model_traits(ModelTraits { sees_images: true });
    let seen = read(&f, json!({"path": "pic.png"})).await;
    assert_eq!(
        seen.text,
        "`pic.png` is a PNG image (21 bytes), attached for you to see."
    );
    assert_eq!(
        seen.data,
        json!({"image": {
            "media_type": "image/png",
            "path": f.cwd.join("pic.png"),
            "bytes": base64::engine::general_purpose::STANDARD.encode(&png),
        }})
    );
}

#[tokio::test]
async fn a_read_is_recorded_in_the_ledger() {
    let f = fixture();
    std::fs::write(f.cwd.join("a.txt"), "content\n").unwrap();
    let ledger = ReadLedger::of(&f.ctx.services);
    assert!(ledger
        .stamp(f.ctx.conversation, &f.cwd.join("a.txt"))
        .is_none());
    read(&f, json!({"path": "a.txt", "limit": 1})).await;
    let stamp = ledger
        .stamp(f.ctx.conversation, &f.cwd.join("a.txt"))
        .unwrap();
    assert!(stamp.same_content(&FileStamp::of(b"content\n", None)));
}

#[test]
fn the_spec_pages_its_own_output_and_is_read_only() {
    let spec = read_file::tool().spec().clone();
    assert!(spec.flags.read_only && spec.flags.pages_own_output);
    assert_eq!(spec.parameters["required"], json!(["path"]));
    assert_eq!(spec.parameters["additionalProperties"], false);
}

#[tokio::test]
async fn the_model_keys_and_the_database_are_not_read_by_any_name() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    let home = f.ctx.home.root().to_path_buf();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("models.toml"), "api_key = \"s3cret\"").unwrap();
    std::fs::write(home.join("troupe.db"), "SQLite format 3\0").unwrap();
    symlink(home.join("models.toml"), f.cwd.join("soft.json")).unwrap();
    std::fs::hard_link(home.join("models.toml"), f.cwd.join("hard.json")).unwrap();
    std::fs::hard_link(home.join("troupe.db"), f.cwd.join("copy.db")).unwrap();
    let abs = home.display().to_string();
    for path in [
        format!("{abs}/models.toml"),
        "~/.troupe/models.toml".into(),
        "../.troupe/./models.toml".into(),
        "soft.json".into(),
        "hard.json".into(),
        format!("{abs}/troupe.db"),
        "copy.db".into(),
    ] {
        let result = read(&f, json!({"path": path})).await;
        assert!(
            result.is_error() && result.text.contains("so the file tools do not read it"),
            "{path}: {}",
            result.text
        );
        assert!(!result.text.contains("s3cret"), "{path}");
    }
    // Settings stay readable.
    std::fs::write(home.join("config.toml"), "[trust]\n").unwrap();
    let config = read(&f, json!({"path": "~/.troupe/config.toml"})).await;
    assert!(!config.is_error(), "{}", config.text);
}

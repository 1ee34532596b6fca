//! Fuzz targets for the tools' parsers of outside input: the document
//! converters (a file the user or a model hands over) and path confinement
//! (a path a model writes).
//!
//! The converters run *unguarded*: `read_file` catches a converter's panic
//! and reports a corrupt file, but a panic is still a bug of ours and the
//! catch does not stop a stack overflow or an abort, so the targets call
//! them without the catch. The PDF and spreadsheet targets are the
//! exception: their parsing is done by `pdf-extract`/`lopdf` and `calamine`,
//! whose panics we cannot fix, so they run through the same guard as
//! `read_file` and must not abort, hang or run out of memory. The `xls`
//! target first runs troupe's own layout of the workbook, unguarded.
//!
//! Raw tests replay `src/__fuzz__/NAME/corpus/` then feed random bytes;
//! `_edits` tests edit the seeds (for zip packages, one part's XML); see
//! `docs/testing.md`.

use std::path::{Component, Path, PathBuf};

use bolero::check;
use troupe_fuzzing::Seeds;
use troupe_runtime::home::Home;

use crate::documents::{self, Format};
use crate::paths::{confine_in, refusal, resolve, Access};

fn seeds(name: &str, tokens: &[&[u8]]) -> Seeds {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__");
    Seeds::load(dir.join(name).join("corpus"), tokens)
}

/// A converter run as `read_file` runs it, without its panic guard.
fn convert(format: Format, data: &[u8]) {
    let path = Path::new("fuzz.document");
    let _ = documents::convert_unguarded(path, format, data);
}

fn docx(data: &[u8]) {
    convert(Format::Docx, data);
}

fn pptx(data: &[u8]) {
    convert(Format::Pptx, data);
}

fn odt(data: &[u8]) {
    convert(Format::Odt, data);
}

fn epub(data: &[u8]) {
    convert(Format::Epub, data);
}

fn rtf(data: &[u8]) {
    convert(Format::Rtf, data);
}

/// HTML as EPUB chapters hold it (XHTML).
fn xhtml(data: &[u8]) {
    let _ = documents::xhtml_to_markdown(data);
}

/// Through `read_file`'s guard: the parsing is a dependency's.
fn pdf(data: &[u8]) {
    let _ = documents::convert_bytes(Path::new("fuzz.pdf"), Format::Pdf, data);
}

/// Through `read_file`'s guard: the parsing is calamine's.
fn xlsx(data: &[u8]) {
    let _ = documents::convert_bytes(Path::new("fuzz.xlsx"), Format::Spreadsheet, data);
}

/// An `.ods`: measured by troupe (unguarded: that part is ours), then
/// through `read_file`'s guard, as calamine parses it — when it is small:
/// a workbook the guard lets through may still lay out millions of cells,
/// seconds apiece in a debug build, which would starve the one-second run
/// (`documents_tests.rs` converts the large ones).
fn ods(data: &[u8]) {
    if documents::measure_ods(data).is_some_and(|cells| cells <= 100_000) {
        let _ = documents::convert_bytes(Path::new("fuzz.ods"), Format::Spreadsheet, data);
    }
}

/// An `.xls`: laid out again by troupe (unguarded: that part is ours), then
/// through `read_file`'s guard, as calamine parses the result.
fn xls(data: &[u8]) {
    documents::lay_out_xls_twice(data);
    let _ = documents::convert_bytes(Path::new("fuzz.xls"), Format::Spreadsheet, data);
}

/// A home and a working folder with the links a model may meet: into the
/// home, out to a system folder, a loop, a dangling one.
struct Place {
    _dir: tempfile::TempDir,
    home: Home,
    user_home: PathBuf,
    cwd: PathBuf,
}

fn place() -> &'static Place {
    static PLACE: std::sync::OnceLock<Place> = std::sync::OnceLock::new();
    PLACE.get_or_init(|| {
        use std::os::unix::fs::symlink;
        let make = || -> std::io::Result<Place> {
            let dir = tempfile::tempdir()?;
            let root = std::fs::canonicalize(dir.path())?;
            let home = Home::new(root.join(".troupe"));
            std::fs::create_dir_all(home.root().join("memory"))?;
            std::fs::write(home.config_file(), "")?;
            std::fs::write(home.models_file(), "")?;
            let cwd = root.join("work");
            std::fs::create_dir_all(cwd.join("notes"))?;
            std::fs::write(cwd.join("notes/todo.txt"), "milk")?;
            symlink(home.root(), cwd.join("home"))?;
            symlink(home.models_file(), cwd.join("secret"))?;
            symlink("/etc", cwd.join("etc"))?;
            symlink(cwd.join("loop"), cwd.join("loop"))?;
            symlink(cwd.join("nowhere"), cwd.join("dangling"))?;
            symlink("notes", cwd.join("link"))?;
            Ok(Place {
                _dir: dir,
                user_home: root,
                home,
                cwd,
            })
        };
        #[allow(clippy::expect_used)]
        make().expect("the fuzz target's folders can be made")
    })
}

/// A path a model wrote, confined for reading and for writing: whatever
/// comes back is absolute, lexically normal, already resolved (resolving it
/// again changes nothing) and passes the rules it was checked against.
fn paths(data: &[u8]) {
    let place = place();
    let raw = String::from_utf8_lossy(data);
    for access in [Access::Read, Access::Write] {
        let Ok(real) = confine_in(&place.home, &place.user_home, &place.cwd, &raw, access) else {
            continue;
        };
        assert!(real.is_absolute(), "{raw:?} gave {real:?}");
        assert!(
            real.components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
            "{raw:?} gave {real:?}, which is not normal"
        );
        if let Ok(again) = resolve(&real) {
            assert_eq!(again, real, "{raw:?} gave {real:?}, which leads elsewhere");
        }
        assert!(
            refusal(&place.home, &real, access).is_none(),
            "{raw:?} gave {real:?}, which the rules refuse"
        );
    }
}

const XML_TOKENS: &[&[u8]] = &[
    b"<",
    b">",
    b"</",
    b"/>",
    b"\"",
    b"=",
    b"&amp;",
    b"&#x0;",
    b"&#1114112;",
    b"&unknown;",
    b"<![CDATA[",
    b"]]>",
    b"<!--",
    b"-->",
    b"<?xml version=\"1.0\"?>",
    b"<!DOCTYPE x [",
    b"xmlns:w=\"",
    b"w:val=\"",
    b"-1",
    b"4294967296",
    b"<w:p>",
    b"</w:p>",
    b"<w:t>",
    b"<w:tbl>",
    b"<w:tr>",
    b"<w:tc>",
    b"<w:numPr>",
    b"<w:ilvl w:val=\"9\"/>",
    b"<a:p>",
    b"<a:tbl>",
    b"<text:list>",
    b"<text:list-item>",
    b"<table:table-row table:number-rows-repeated=\"",
    b"table:number-columns-repeated=\"",
    b"<text:s text:c=\"",
    b"<h1>",
    b"<ul><li>",
    b"<table>",
    b"<tr>",
    b"<td>",
    b"<pre>",
    b"<br/>",
    b"Target=\"../../",
    b"full-path=\"",
    b"r:id=\"rId",
];
const RTF_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"\\",
    b"\\par",
    b"\\'e9",
    b"\\'",
    b"\\u-10179?",
    b"\\u8364?",
    b"\\uc2",
    b"\\bin",
    b"\\bin4294967295",
    b"\\*",
    b"\\cell",
    b"\\row",
    b"\\trowd",
    b"\\intbl",
    b"\\ilvl9",
    b"\\ansicpg",
    b"\\fcharset",
    b"\\f",
    b"\\pict",
    b"{\\listtext",
    b"\\line",
    b"-2147483649",
    b"\\tab",
];
const PDF_TOKENS: &[&[u8]] = &[
    b"obj",
    b"endobj",
    b"stream\n",
    b"\nendstream",
    b"<<",
    b">>",
    b"[",
    b"]",
    b"(",
    b")",
    b"R",
    b"/Length",
    b"/Filter /FlateDecode",
    b"/Type /Page",
    b"/Kids",
    b"Tj",
    b"TJ",
    b"Td",
    b"BT",
    b"ET",
    b"Tf",
    b"xref",
    b"trailer",
    b"startxref",
    b"-1",
    b"99999999999",
];
/// BIFF record types and lengths, and the compound file's chain marks.
const XLS_TOKENS: &[&[u8]] = &[
    b"\x09\x08\x10\x00\x00\x06\x10\x00", // BOF of a worksheet
    b"\x0A\x00\x00\x00",                 // EOF
    b"\x3C\x00",                         // CONTINUE
    b"\x85\x00",                         // BoundSheet8
    b"\x00\x02\x0E\x00",                 // DIMENSIONS
    b"\x03\x02\x0E\x00",                 // NUMBER
    b"\x7E\x02\x0A\x00",                 // RK
    b"\xBD\x00",                         // MULRK
    b"\xFD\x00\x0A\x00",                 // LABELSST
    b"\x06\x00",                         // FORMULA
    b"\x07\x02",                         // STRING
    b"\xFF\xFF",
    b"\xFF\xFF\xFF\xFF",
    b"\xFE\xFF\xFF\xFF", // end of a sector chain
    b"\x00\x00\x00\x00",
];
const PATH_TOKENS: &[&[u8]] = &[
    b"/",
    b"..",
    b".",
    b"~",
    b"home/",
    b"secret",
    b"etc/",
    b"loop/",
    b"dangling",
    b"link/",
    b"/proc/self/root/",
    b"models.toml",
    b"config.toml",
    b"\0",
    b"//",
];

#[test]
fn fuzz_docx() {
    check!(name = "docx").for_each(docx);
}

#[test]
fn fuzz_docx_edits() {
    let seeds = seeds("docx", XML_TOKENS);
    check!(name = "docx_edits").for_each(|script| docx(&seeds.edited(script)));
}

#[test]
fn fuzz_pptx() {
    check!(name = "pptx").for_each(pptx);
}

#[test]
fn fuzz_pptx_edits() {
    let seeds = seeds("pptx", XML_TOKENS);
    check!(name = "pptx_edits").for_each(|script| pptx(&seeds.edited(script)));
}

#[test]
fn fuzz_odt() {
    check!(name = "odt").for_each(odt);
}

#[test]
fn fuzz_odt_edits() {
    let seeds = seeds("odt", XML_TOKENS);
    check!(name = "odt_edits").for_each(|script| odt(&seeds.edited(script)));
}

#[test]
fn fuzz_epub() {
    check!(name = "epub").for_each(epub);
}

#[test]
fn fuzz_epub_edits() {
    let seeds = seeds("epub", XML_TOKENS);
    check!(name = "epub_edits").for_each(|script| epub(&seeds.edited(script)));
}

#[test]
fn fuzz_xhtml() {
    check!(name = "xhtml").for_each(xhtml);
}

#[test]
fn fuzz_xhtml_edits() {
    let seeds = seeds("xhtml", XML_TOKENS);
    check!(name = "xhtml_edits").for_each(|script| xhtml(&seeds.edited(script)));
}

#[test]
fn fuzz_rtf() {
    check!(name = "rtf").for_each(rtf);
}

#[test]
fn fuzz_rtf_edits() {
    let seeds = seeds("rtf", RTF_TOKENS);
    check!(name = "rtf_edits").for_each(|script| rtf(&seeds.edited(script)));
}

#[test]
fn fuzz_pdf() {
    check!(name = "pdf").for_each(pdf);
}

#[test]
fn fuzz_pdf_edits() {
    let seeds = seeds("pdf", PDF_TOKENS);
    check!(name = "pdf_edits").for_each(|script| pdf(&seeds.edited(script)));
}

#[test]
fn fuzz_xlsx() {
    check!(name = "xlsx").for_each(xlsx);
}

#[test]
fn fuzz_xlsx_edits() {
    let seeds = seeds("xlsx", XML_TOKENS);
    check!(name = "xlsx_edits").for_each(|script| xlsx(&seeds.edited(script)));
}

#[test]
fn fuzz_xls() {
    check!(name = "xls").for_each(xls);
}

#[test]
fn fuzz_xls_edits() {
    let seeds = seeds("xls", XLS_TOKENS);
    check!(name = "xls_edits").for_each(|script| xls(&seeds.edited(script)));
}

#[test]
fn fuzz_ods() {
    check!(name = "ods").for_each(ods);
}

#[test]
fn fuzz_ods_edits() {
    let seeds = seeds("ods", XML_TOKENS);
    check!(name = "ods_edits").for_each(|script| ods(&seeds.edited(script)));
}

#[test]
fn fuzz_paths() {
    check!(name = "paths").for_each(paths);
}

#[test]
fn fuzz_paths_edits() {
    let seeds = seeds("paths", PATH_TOKENS);
    check!(name = "paths_edits").for_each(|script| paths(&seeds.edited(script)));
}

//! Tests of the document converters and the cache, on files built here.

use std::io::Write;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use troupe_runtime::home::Home;
use zip::write::SimpleFileOptions;

use super::markdown::Markdown;
use super::*;

/// Writes a zip of `(name, content)` parts to `dir/name`.
fn write_zip(dir: &Path, name: &str, parts: &[(&str, &str)]) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    for (part, content) in parts {
        let options = if *part == "mimetype" {
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)
        } else {
            SimpleFileOptions::default()
        };
        zip.start_file(*part, options).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
    }
    zip.finish().unwrap();
    path
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

pub(crate) fn docx(dir: &Path) -> PathBuf {
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {W}><w:body>
  <w:p><w:pPr><w:pStyle w:val="Titre1"/></w:pPr><w:r><w:t>Quarterly report</w:t></w:r></w:p>
  <w:p><w:r><w:t xml:space="preserve">Sales rose </w:t></w:r><w:r><w:t>12% &amp; costs fell.</w:t></w:r></w:p>
  <w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Next steps</w:t></w:r></w:p>
  <w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>Hire</w:t></w:r></w:p>
  <w:p><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>two engineers</w:t></w:r></w:p>
  <w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="2"/></w:numPr></w:pPr><w:r><w:t>Ship</w:t></w:r></w:p>
  <w:tbl>
    <w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Total</w:t></w:r></w:p></w:tc></w:tr>
    <w:tr><w:tc><w:p><w:r><w:t>North|East</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>40</w:t></w:r></w:p><w:p><w:r><w:t>units</w:t></w:r></w:p></w:tc></w:tr>
  </w:tbl>
  <w:p><w:r><w:t>Deleted:</w:t></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del><w:r><w:tab/><w:t>end</w:t></w:r></w:p>
  <w:sectPr/>
</w:body></w:document>"#
    );
    let styles = format!(
        r#"<w:styles {W}>
  <w:style w:type="paragraph" w:styleId="Titre1"><w:name w:val="heading 1"/></w:style>
  <w:style w:type="paragraph" w:styleId="Normal"><w:name w:val="Normal"/></w:style>
</w:styles>"#
    );
    let numbering = format!(
        r#"<w:numbering {W}>
  <w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>
  <w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/></w:lvl></w:abstractNum>
  <w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
  <w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>"#
    );
    write_zip(
        dir,
        "report.DOCX",
        &[
            ("[Content_Types].xml", "<Types/>"),
            (
                "_rels/.rels",
                r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#,
            ),
            ("word/document.xml", &document),
            ("word/styles.xml", &styles),
            ("word/numbering.xml", &numbering),
        ],
    )
}

#[test]
fn docx_keeps_headings_lists_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let md = to_markdown(&docx(dir.path())).unwrap();
    assert_eq!(
        md,
        "# Quarterly report\n\
         \n\
         Sales rose 12% & costs fell.\n\
         \n\
         ## Next steps\n\
         \n\
         - Hire\n   \
         - two engineers\n\
         1. Ship\n\
         \n\
         | Region | Total |\n\
         | --- | --- |\n\
         | North\\|East | 40 units |\n\
         \n\
         Deleted:\tend\n"
    );
}

fn pptx(dir: &Path) -> PathBuf {
    let ns = r#"xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let presentation = format!(
        r#"<p:presentation {ns}><p:sldIdLst><p:sldId id="256" r:id="rId3"/><p:sldId id="257" r:id="rId2"/></p:sldIdLst></p:presentation>"#
    );
    let rels = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide1.xml"/>
<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide2.xml"/>
</Relationships>"#;
    let shape = |ph: &str, paras: &str| {
        format!(
            r#"<p:sp><p:nvSpPr><p:cNvPr id="2" name="s"/><p:cNvSpPr/><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/>{paras}</p:txBody></p:sp>"#
        )
    };
    let slide = |shapes: String| {
        format!(
            r#"<p:sld {ns}><p:cSld><p:spTree><p:nvGrpSpPr/><p:grpSpPr/>{shapes}</p:spTree></p:cSld></p:sld>"#
        )
    };
    // slide2.xml is shown first: presentation.xml lists rId3 first.
    let first = slide(
        shape(
            r#"<p:ph type="ctrTitle"/>"#,
            "<a:p><a:r><a:t>Roadmap</a:t></a:r></a:p>",
        ) + &shape(
            r#"<p:ph idx="1"/>"#,
            r#"<a:p><a:r><a:t>Q1: beta</a:t></a:r></a:p><a:p><a:pPr lvl="1"/><a:r><a:t>invite users</a:t></a:r></a:p>"#,
        ) + &shape(
            r#"<p:ph type="sldNum"/>"#,
            "<a:p><a:fld><a:t>1</a:t></a:fld></a:p>",
        ),
    );
    let second = slide(
        shape("", "<a:p><a:r><a:t>A loose note</a:t></a:r></a:p>")
            + r#"<p:graphicFrame><a:graphic><a:graphicData><a:tbl>
<a:tr><a:tc><a:txBody><a:p><a:r><a:t>Item</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>Cost</a:t></a:r></a:p></a:txBody></a:tc></a:tr>
<a:tr><a:tc><a:txBody><a:p><a:r><a:t>Servers</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>9</a:t></a:r></a:p></a:txBody></a:tc></a:tr>
</a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#,
    );
    write_zip(
        dir,
        "deck.pptx",
        &[
            ("ppt/presentation.xml", &presentation),
            ("ppt/_rels/presentation.xml.rels", rels),
            ("ppt/slides/slide1.xml", &second),
            ("ppt/slides/slide2.xml", &first),
        ],
    )
}

#[test]
fn pptx_has_one_section_per_slide_in_presentation_order() {
    let dir = tempfile::tempdir().unwrap();
    let md = to_markdown(&pptx(dir.path())).unwrap();
    assert_eq!(
        md,
        "## Slide 1: Roadmap\n\
         \n\
         - Q1: beta\n   \
         - invite users\n\
         \n\
         ## Slide 2\n\
         \n\
         A loose note\n\
         \n\
         | Item | Cost |\n\
         | --- | --- |\n\
         | Servers | 9 |\n"
    );
}

fn xlsx(dir: &Path) -> PathBuf {
    write_zip(
        dir,
        "budget.xlsx",
        &[
            (
                "[Content_Types].xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/worksheets/sheet2.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>"#,
            ),
            (
                "_rels/.rels",
                r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
            ),
            (
                "xl/workbook.xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Costs" sheetId="1" r:id="rId1"/><sheet name="Empty" sheetId="2" r:id="rId2"/></sheets></workbook>"#,
            ),
            (
                "xl/_rels/workbook.xml.rels",
                r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet2.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>"#,
            ),
            (
                "xl/sharedStrings.xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="3" uniqueCount="3"><si><t>Item</t></si><si><t>Cost</t></si><si><t>Rent</t></si></sst>"#,
            ),
            (
                "xl/worksheets/sheet1.xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row><row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>1200</v></c></row><row r="3"><c r="B3"><v>2.5</v></c></row></sheetData></worksheet>"#,
            ),
            (
                "xl/worksheets/sheet2.xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData/></worksheet>"#,
            ),
        ],
    )
}

/// A sheet of many cells that all name one long shared string: each cell's
/// text was a copy of it, kept until the sheet was laid out, so 40,000
/// cells of a 1 MiB string asked for 40 GB. The cells are read until their
/// text passes twice what the output can show: here the output is full
/// first, and says so.
#[test]
fn xlsx_with_one_long_string_in_every_cell_is_read_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(1 << 20);
    let shared = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="40000" uniqueCount="1"><si><t>{long}</t></si></sst>"#
    );
    let mut rows = String::new();
    for r in 1..=40_000 {
        rows.push_str(&format!(
            r#"<row r="{r}"><c r="A{r}" t="s"><v>0</v></c></row>"#
        ));
    }
    let sheet = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>"#
    );
    let path = write_zip(
        dir.path(),
        "amplified.xlsx",
        &[
            (
                "[Content_Types].xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>"#,
            ),
            (
                "_rels/.rels",
                r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
            ),
            (
                "xl/workbook.xml",
                r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Big" sheetId="1" r:id="rId1"/></sheets></workbook>"#,
            ),
            (
                "xl/_rels/workbook.xml.rels",
                r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>"#,
            ),
            ("xl/sharedStrings.xml", &shared),
            ("xl/worksheets/sheet1.xml", &sheet),
        ],
    );
    let md = to_markdown(&path).unwrap();
    assert!(md.starts_with("## Big\n\n| xxx"), "{}", &md[..40]);
    assert!(md.len() < 17 << 20, "{} bytes", md.len());
    assert!(
        md.ends_with("[truncated: the document's text goes past 16777216 bytes; the rest was not converted]\n"),
        "{}",
        &md[md.len().saturating_sub(300)..]
    );
}

/// Found by the `xlsx` fuzz target: calamine reserved room for the forged
/// count of shared strings before reading one, and the failed allocation
/// aborted the whole process, past the converter's panic guard.
#[test]
fn xlsx_with_a_forged_count_of_shared_strings_is_corrupt_not_an_abort() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__/xlsx/corpus/forged_count.xlsx");
    let err = to_markdown(&path).unwrap_err();
    assert!(
        matches!(&err, DocumentError::Corrupt { reason, .. } if reason == "xl/sharedStrings.xml declares 128849018889 shared strings, more than its 169 bytes can hold"),
        "{err}"
    );
}

/// Found by the `xlsx` fuzz target: two cells with forged far-apart
/// references (`A1`, `XFD1048576`) made calamine's dense range ask for
/// hundreds of GB at once, and the failed allocation aborted the process.
/// The sheet is laid out from its cells instead, long empty runs shortened.
#[test]
fn xlsx_with_forged_far_apart_cells_is_a_small_table_not_an_abort() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__/xlsx/corpus/forged_refs.xlsx");
    let md = to_markdown(&path).unwrap();
    assert_eq!(
        md,
        "## A\n\
         \n\
         | 1 |  |  |  |  |\n\
         | --- | --- | --- | --- | --- |\n\
         |  |  |  |  |  |\n\
         |  |  |  |  |  |\n\
         |  |  |  |  |  |\n\
         |  |  |  |  | 2 |\n"
    );
}

fn xls_corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/__fuzz__/xls/corpus")
        .join(name)
}

/// calamine built an `.xls` sheet as a dense range when it opened the file:
/// two cells at forged far-apart references (`A1`, row and column 65536)
/// asked for 4 billion cells, 128 GiB, and the failed allocation aborted
/// the process. The workbook is laid out again before calamine reads it.
#[test]
fn xls_with_forged_far_apart_cells_is_a_small_table_not_an_abort() {
    let md = to_markdown(&xls_corpus("forged_refs.xls")).unwrap();
    assert_eq!(
        md,
        "## A\n\
         \n\
         | 1 |  |  |  |  |\n\
         | --- | --- | --- | --- | --- |\n\
         |  |  |  |  |  |\n\
         |  |  |  |  |  |\n\
         |  |  |  |  |  |\n\
         |  |  |  |  | 2 |\n"
    );
}

/// calamine reserved room for as many cells as a sheet's DIMENSIONS record
/// names: a forged one (4 billion rows by 65535 columns) asked for 10 PB.
#[test]
fn xls_with_a_forged_dimensions_record_is_read_not_an_abort() {
    let md = to_markdown(&xls_corpus("forged_dimensions.xls")).unwrap();
    assert_eq!(md, "## A\n\n| 1 |\n| --- |\n");
}

#[test]
fn xls_has_one_table_per_sheet() {
    let md = to_markdown(&xls_corpus("budget.xls")).unwrap();
    assert_eq!(
        md,
        "## Costs\n\
         \n\
         | Item | Cost |\n\
         | --- | --- |\n\
         | Rent | 1200 |\n\
         |  | 2.5 |\n\
         | 7 | 8 |\n\
         | 15 | total |\n\
         | TRUE | note |\n\
         \n\
         ## Empty\n\
         \n\
         (empty sheet)\n"
    );
}

#[test]
fn an_xlsx_named_xls_is_told_to_be_renamed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.xls");
    std::fs::rename(xlsx(dir.path()), &path).unwrap();
    let err = to_markdown(&path).unwrap_err();
    assert!(
        matches!(&err, DocumentError::Corrupt { reason, .. } if reason.ends_with("rename it .xlsx")),
        "{err}"
    );
}

#[test]
fn xlsx_has_one_table_per_sheet() {
    let dir = tempfile::tempdir().unwrap();
    let md = to_markdown(&xlsx(dir.path())).unwrap();
    assert_eq!(
        md,
        "## Costs\n\
         \n\
         | Item | Cost |\n\
         | --- | --- |\n\
         | Rent | 1200 |\n\
         |  | 2.5 |\n\
         \n\
         ## Empty\n\
         \n\
         (empty sheet)\n"
    );
}

const ODF_NS: &str = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0""#;

#[test]
fn odt_keeps_headings_lists_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let content = format!(
        r#"<office:document-content {ODF_NS}>
<office:automatic-styles>
  <text:list-style style:name="L2"><text:list-level-style-number text:level="1"/></text:list-style>
</office:automatic-styles>
<office:body><office:text>
  <text:h text:outline-level="1">Minutes</text:h>
  <text:p>Present:
     Ann<text:s text:c="2"/>and Bob<text:line-break/>Absent: none</text:p>
  <text:list text:style-name="L1"><text:list-item><text:p>Budget</text:p>
    <text:list><text:list-item><text:p>approved</text:p></text:list-item></text:list></text:list-item></text:list>
  <text:list text:style-name="L2"><text:list-item><text:p>First</text:p></text:list-item></text:list>
  <table:table><table:table-row><table:table-cell><text:p>A</text:p></table:table-cell><table:table-cell><text:p>B</text:p></table:table-cell><table:table-cell table:number-columns-repeated="900"/></table:table-row>
  <table:table-row><table:table-cell table:number-columns-repeated="2"><text:p>x</text:p></table:table-cell></table:table-row>
  <table:table-row table:number-rows-repeated="1000"><table:table-cell/></table:table-row></table:table>
</office:text></office:body></office:document-content>"#
    );
    let path = write_zip(
        dir.path(),
        "minutes.odt",
        &[
            ("mimetype", "application/vnd.oasis.opendocument.text"),
            ("content.xml", &content),
        ],
    );
    assert_eq!(
        to_markdown(&path).unwrap(),
        "# Minutes\n\
         \n\
         Present: Ann  and Bob\n\
         Absent: none\n\
         \n\
         - Budget\n   \
         - approved\n\
         1. First\n\
         \n\
         | A | B |\n\
         | --- | --- |\n\
         | x | x |\n"
    );
}

#[test]
fn odp_has_one_section_per_slide() {
    let dir = tempfile::tempdir().unwrap();
    let content = format!(
        r#"<office:document-content {ODF_NS}><office:body><office:presentation>
<draw:page draw:name="p1">
  <draw:frame presentation:class="title"><draw:text-box><text:p>Launch</text:p></draw:text-box></draw:frame>
  <draw:frame presentation:class="outline"><draw:text-box><text:list><text:list-item><text:p>Date set</text:p><text:list><text:list-item><text:p>May</text:p></text:list-item></text:list></text:list-item></text:list></draw:text-box></draw:frame>
</draw:page>
<draw:page draw:name="p2"><draw:frame><draw:text-box><text:p>Thanks</text:p></draw:text-box></draw:frame></draw:page>
</office:presentation></office:body></office:document-content>"#
    );
    let path = write_zip(
        dir.path(),
        "launch.odp",
        &[
            (
                "mimetype",
                "application/vnd.oasis.opendocument.presentation",
            ),
            ("content.xml", &content),
        ],
    );
    assert_eq!(
        to_markdown(&path).unwrap(),
        "## Slide 1: Launch\n\
         \n\
         - Date set\n   \
         - May\n\
         \n\
         ## Slide 2\n\
         \n\
         Thanks\n"
    );
}

#[test]
fn epub_reads_chapters_in_spine_order() {
    let dir = tempfile::tempdir().unwrap();
    let chapter = |body: &str| {
        format!(
            r#"<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title><style>p {{ color: red }}</style></head><body>{body}</body></html>"#
        )
    };
    let one = chapter(
        r#"<h1>Chapter One</h1><p>It was a <em>dark</em>
        and stormy&nbsp;night.</p><ul><li>rain<ul><li>cold</li></ul></li><li>wind</li></ul>"#,
    );
    let two = chapter(
        r#"<h2>Chapter Two</h2><div>Loose text<p>Inner<br/>line</p></div><ol><li>first</li></ol><blockquote><p>Quoted</p></blockquote><pre>let x = 1;
let y = 2;</pre><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>"#,
    );
    let path = write_zip(
        dir.path(),
        "book.epub",
        &[
            ("mimetype", "application/epub+zip"),
            (
                "META-INF/container.xml",
                r#"<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#,
            ),
            (
                "OEBPS/content.opf",
                r#"<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>
<item id="c2" href="text/ch%202.xhtml" media-type="application/xhtml+xml"/>
<item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>
<item id="css" href="style.css" media-type="text/css"/>
</manifest><spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>"#,
            ),
            ("OEBPS/text/ch1.xhtml", &one),
            ("OEBPS/text/ch 2.xhtml", &two),
        ],
    );
    assert_eq!(
        to_markdown(&path).unwrap(),
        "# Chapter One\n\
         \n\
         It was a dark and stormy night.\n\
         \n\
         - rain\n   \
         - cold\n\
         - wind\n\
         \n\
         ## Chapter Two\n\
         \n\
         Loose text\n\
         \n\
         Inner\n\
         line\n\
         \n\
         1. first\n\
         \n\
         > Quoted\n\
         \n\
         ```\n\
         let x = 1;\n\
         let y = 2;\n\
         ```\n\
         \n\
         | k | v |\n\
         | --- | --- |\n\
         | a | 1 |\n"
    );
}

#[test]
fn rtf_keeps_text_escapes_headings_lists_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let rtf = r#"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Arial;}{\f1 Symbol;}}{\colortbl;\red0\green0\blue0;}
{\stylesheet{\s1 heading 1;}}{\info{\title Secret title}{\author Ann}}
{\*\generator Writer}\pard\s1\outlinelevel0 Caf\'e9 notes\par
\pard Plain text with \{braces\}, a \\ backslash and \u8364? euros.\par
\pard {\pict\pngblip 89504e47}Emoji \u-10179?\u-8704? here\line next line\par
{\listtext\f1 \'b7\tab}\pard\ilvl0 Bullet one\par
{\listtext 1.\tab}\pard Numbered\par
\trowd\cellx1000\cellx2000\pard\intbl Name\cell Age\cell\row
\trowd\cellx1000\cellx2000\pard\intbl Ann\cell 41\cell\row
\pard After the table.\par
}"#;
    let path = dir.path().join("notes.rtf");
    std::fs::write(&path, rtf).unwrap();
    assert_eq!(
        to_markdown(&path).unwrap(),
        "# Café notes\n\
         \n\
         Plain text with {braces}, a \\ backslash and € euros.\n\
         \n\
         Emoji 😀 here\n\
         next line\n\
         \n\
         - Bullet one\n\
         1. Numbered\n\
         \n\
         | Name | Age |\n\
         | --- | --- |\n\
         | Ann | 41 |\n\
         \n\
         After the table.\n"
    );
}

/// A PDF with one text line per page, with a correct xref table.
pub(crate) fn pdf(pages: &[&str]) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 pages, 3 font, then (page, content) pairs.
    let mut objects: Vec<String> = Vec::new();
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".to_string());
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_string(),
    );
    for (i, text) in pages.iter().enumerate() {
        let content_id = 5 + 2 * i;
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        ));
        let stream = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[test]
fn pdf_has_one_section_per_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memo.pdf");
    std::fs::write(&path, pdf(&["Hello from page one", "Second page text"])).unwrap();
    assert_eq!(
        to_markdown(&path).unwrap(),
        "## Page 1\n\
         \n\
         Hello from page one\n\
         \n\
         ## Page 2\n\
         \n\
         Second page text\n"
    );
}

#[test]
fn is_document_goes_by_extension_ignoring_case() {
    for name in [
        "a.pdf", "b.DOCX", "c.pptx", "d.xlsx", "e.xls", "f.xlsm", "g.ods", "h.odt", "i.odp",
        "j.Rtf", "k.epub",
    ] {
        assert!(is_document(Path::new(name)), "{name}");
    }
    for name in ["a.txt", "b.md", "c", "d.doc.bak", "e.zip"] {
        assert!(!is_document(Path::new(name)), "{name}");
    }
}

#[test]
fn corrupt_zip_names_the_file_the_format_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.docx");
    std::fs::write(&path, b"PK\x03\x04 this is not really a zip").unwrap();
    let err = to_markdown(&path).unwrap_err();
    assert!(
        matches!(
            &err,
            DocumentError::Corrupt {
                format: Format::Docx,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("broken.docx"), "{text}");
    assert!(text.contains("Word document (DOCX)"), "{text}");
    assert!(text.contains("not a valid zip package"), "{text}");
}

#[test]
fn corrupt_pdf_and_rtf_are_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let pdf_path = dir.path().join("bad.pdf");
    std::fs::write(&pdf_path, b"%PDF-1.4\nnothing else").unwrap();
    let rtf_path = dir.path().join("bad.rtf");
    std::fs::write(&rtf_path, b"plain text, not rtf").unwrap();
    assert!(matches!(
        to_markdown(&pdf_path).unwrap_err(),
        DocumentError::Corrupt {
            format: Format::Pdf,
            ..
        }
    ));
    assert!(matches!(
        to_markdown(&rtf_path).unwrap_err(),
        DocumentError::Corrupt {
            format: Format::Rtf,
            ..
        }
    ));
}

#[test]
fn password_protected_office_file_is_reported_as_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.xlsx");
    let mut bytes = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
    bytes.extend_from_slice(&[0; 504]);
    std::fs::write(&path, &bytes).unwrap();
    let err = to_markdown(&path).unwrap_err();
    assert!(
        matches!(
            &err,
            DocumentError::Encrypted {
                format: Format::Spreadsheet,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("password-protected"));
    let docx_path = dir.path().join("locked.docx");
    std::fs::write(&docx_path, &bytes).unwrap();
    assert!(matches!(
        to_markdown(&docx_path).unwrap_err(),
        DocumentError::Encrypted {
            format: Format::Docx,
            ..
        }
    ));
}

#[test]
fn oversized_missing_and_unknown_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("huge.pdf");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(MAX_INPUT_BYTES + 1).unwrap();
    assert!(matches!(
        to_markdown(&big).unwrap_err(),
        DocumentError::TooLarge { size, limit: MAX_INPUT_BYTES, .. } if size == MAX_INPUT_BYTES + 1
    ));
    assert!(matches!(
        to_markdown(&dir.path().join("absent.docx")).unwrap_err(),
        DocumentError::Read { .. }
    ));
    assert!(matches!(
        to_markdown(&dir.path().join("notes.txt")).unwrap_err(),
        DocumentError::NotADocument { .. }
    ));
}

#[test]
fn markdown_output_is_cut_at_the_limit_with_a_note() {
    let mut md = Markdown::new(30);
    md.paragraph("first paragraph");
    md.paragraph("second paragraph is long");
    md.paragraph("never written");
    assert!(md.is_full());
    assert_eq!(
        md.finish(),
        "first paragraph\n\nsecond paragr\n\n[truncated: the document's text goes past 30 bytes; \
         the rest was not converted]\n"
    );
}

#[test]
fn cache_reuses_the_conversion_until_the_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let path = dir.path().join("notes.rtf");
    std::fs::write(&path, r"{\rtf1 First version\par}").unwrap();

    let first = cached(&home, &path).unwrap();
    assert!(first.converted);
    assert!(first.markdown_path.starts_with(home.documents_dir()));
    assert_eq!(read_cached(&home, &path).unwrap(), "First version\n");

    // Unchanged: served from the cache, not converted again.
    let again = cached(&home, &path).unwrap();
    assert_eq!(
        again,
        CachedDocument {
            markdown_path: first.markdown_path.clone(),
            converted: false
        }
    );

    // Same size, new modification time: converted again.
    std::fs::write(&path, r"{\rtf1 Second version\par}").unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
        .unwrap();
    let changed = cached(&home, &path).unwrap();
    assert!(changed.converted);
    assert_eq!(read_cached(&home, &path).unwrap(), "Second version\n");

    // A damaged cache entry is redone rather than trusted.
    std::fs::write(&changed.markdown_path, "half").unwrap();
    assert!(cached(&home, &path).unwrap().converted);
    assert_eq!(read_cached(&home, &path).unwrap(), "Second version\n");

    // A document that fails to convert leaves nothing behind and says why.
    let bad = dir.path().join("bad.epub");
    std::fs::write(&bad, b"nope").unwrap();
    assert!(matches!(
        read_cached(&home, &bad).unwrap_err(),
        DocumentError::Corrupt {
            format: Format::Epub,
            ..
        }
    ));
    let entries = std::fs::read_dir(home.documents_dir()).unwrap().count();
    assert_eq!(entries, 2, "one .md and one .json");
}

fn ods_corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/__fuzz__/ods/corpus")
        .join(name)
}

#[test]
fn ods_has_one_table_per_sheet_and_skips_the_unused_rest() {
    let md = to_markdown(&ods_corpus("budget.ods")).unwrap();
    assert!(md.contains("## Budget"), "{md}");
    assert!(md.contains("Rent") && md.contains("1200"), "{md}");
    assert!(md.contains("## Notes"), "{md}");
}

#[test]
fn ods_with_forged_repeats_is_refused_as_too_large_not_an_abort() {
    for name in ["forged_repeats.ods", "forged_far_apart.ods"] {
        let err = to_markdown(&ods_corpus(name)).unwrap_err();
        assert!(
            matches!(&err, DocumentError::Oversized { reason, .. } if reason.contains("cells")),
            "{name}: {err}"
        );
        assert!(
            err.to_string().contains("export the part you need"),
            "{err}"
        );
    }
}

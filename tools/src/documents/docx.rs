//! Word (DOCX) to Markdown.
//!
//! The body of `word/document.xml` is a sequence of paragraphs (`w:p`) and
//! tables (`w:tbl`). A paragraph is a heading when its style is a heading
//! (by the style's name in `styles.xml`, so localized style ids still work,
//! or by its outline level), and a list item when it has numbering
//! (`w:numPr`), ordered when `numbering.xml` gives its level a number
//! format other than a bullet.

use std::collections::HashMap;

use super::markdown::Markdown;
use super::package::Package;
use super::xml::{Element, Node};
use super::Failure;

/// Converts a DOCX package.
pub(crate) fn convert(bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let mut package = Package::open(bytes)?;
    let main = package
        .relationships("")?
        .into_iter()
        .find(|(_, kind, _)| kind.ends_with("/officeDocument"))
        .map(|(_, _, target)| target)
        .unwrap_or_else(|| "word/document.xml".to_string());
    let document = package.required_xml(&main)?;
    let dir = main.rsplit_once('/').map(|(d, _)| d).unwrap_or("word");
    let styles = package
        .xml(&format!("{dir}/styles.xml"))?
        .map(|el| heading_styles(&el))
        .unwrap_or_default();
    let numbering = package
        .xml(&format!("{dir}/numbering.xml"))?
        .map(|el| Numbering::read(&el))
        .unwrap_or_default();
    let body = document
        .child("body")
        .ok_or_else(|| Failure::corrupt(format!("{main} has no body")))?;
    let writer = Writer {
        styles: &styles,
        numbering: &numbering,
    };
    writer.blocks(body, md);
    Ok(())
}

struct Writer<'a> {
    styles: &'a HashMap<String, usize>,
    numbering: &'a Numbering,
}

impl Writer<'_> {
    fn blocks(&self, container: &Element, md: &mut Markdown) {
        for el in container.elements() {
            if md.is_full() {
                return;
            }
            match el.name.as_str() {
                "p" => self.paragraph(el, md),
                "tbl" => md.table(&self.table_rows(el)),
                "sdt" | "sdtContent" | "customXml" | "ins" | "smartTag" => self.blocks(el, md),
                _ => {}
            }
        }
    }

    fn paragraph(&self, p: &Element, md: &mut Markdown) {
        let text = run_text(p);
        let props = p.child("pPr");
        if let Some(level) = props.and_then(|pr| self.heading_level(pr)) {
            md.heading(level, &text);
            return;
        }
        let list = props.and_then(|pr| pr.child("numPr")).and_then(|num| {
            let id = num.child("numId")?.attr("val")?.to_string();
            let level = num
                .child("ilvl")
                .and_then(|l| l.attr("val"))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            (id != "0").then_some((id, level))
        });
        match list {
            Some((id, level)) => md.list_item(level, self.numbering.ordered(&id, level), &text),
            None => md.paragraph(&text),
        }
    }

    fn heading_level(&self, props: &Element) -> Option<usize> {
        if let Some(style) = props.child("pStyle").and_then(|s| s.attr("val")) {
            if let Some(level) = self.styles.get(style) {
                return Some(*level);
            }
            if let Some(level) = level_from_name(style) {
                return Some(level);
            }
        }
        outline_level(props)
    }

    fn table_rows(&self, table: &Element) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        for tr in table.elements().filter(|el| el.name == "tr") {
            let mut row = Vec::new();
            for tc in tr.elements().filter(|el| el.name == "tc") {
                row.push(cell_text(tc));
                let span = tc
                    .child("tcPr")
                    .and_then(|pr| pr.child("gridSpan"))
                    .and_then(|g| g.attr("val"))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(1);
                for _ in 1..span.min(64) {
                    row.push(String::new());
                }
            }
            rows.push(row);
        }
        rows
    }
}

/// The text of a cell: its paragraphs (and nested tables) joined by spaces.
fn cell_text(cell: &Element) -> String {
    let mut parts = Vec::new();
    for el in cell.elements() {
        match el.name.as_str() {
            "p" => parts.push(run_text(el)),
            "tbl" | "sdt" | "sdtContent" => parts.push(cell_text_deep(el)),
            _ => {}
        }
    }
    parts.retain(|p| !p.trim().is_empty());
    parts.join(" ")
}

fn cell_text_deep(el: &Element) -> String {
    let mut paragraphs = Vec::new();
    el.find_all("p", &mut paragraphs);
    paragraphs
        .into_iter()
        .map(run_text)
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The visible text of a paragraph: its runs, tabs and breaks, without
/// deleted text, field codes or the fallback copy of drawings.
fn run_text(p: &Element) -> String {
    let mut out = String::new();
    collect_runs(p, &mut out);
    out
}

fn collect_runs(el: &Element, out: &mut String) {
    for node in &el.children {
        let Node::Element(child) = node else { continue };
        match child.name.as_str() {
            "t" => out.push_str(&child.text()),
            "tab" | "ptab" => out.push('\t'),
            "br" | "cr" => out.push('\n'),
            "noBreakHyphen" => out.push('-'),
            "pPr" | "rPr" | "delText" | "instrText" | "Fallback" | "del" | "footnoteReference"
            | "endnoteReference" | "commentReference" => {}
            _ => collect_runs(child, out),
        }
    }
}

/// Heading level by style id, from each paragraph style's name ("heading 2",
/// "Title") or outline level.
fn heading_styles(styles: &Element) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for style in styles.elements().filter(|el| el.name == "style") {
        if style.attr("type") != Some("paragraph") {
            continue;
        }
        let Some(id) = style.attr("styleId") else {
            continue;
        };
        let name = style
            .child("name")
            .and_then(|n| n.attr("val"))
            .unwrap_or_default();
        let level = level_from_name(name)
            .or_else(|| style.child("pPr").and_then(outline_level))
            .or_else(|| level_from_name(id));
        if let Some(level) = level {
            out.insert(id.to_string(), level);
        }
    }
    out
}

/// "Title" → 1, "heading 3" / "Heading3" → 3.
fn level_from_name(name: &str) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    if lower == "title" {
        return Some(1);
    }
    let rest = lower.strip_prefix("heading")?.trim_start();
    let level: usize = rest.parse().ok()?;
    (1..=9).contains(&level).then_some(level.min(6))
}

/// `w:outlineLvl` 0..8 → heading 1..6 (9 means body text).
fn outline_level(props: &Element) -> Option<usize> {
    let level: usize = props.child("outlineLvl")?.attr("val")?.parse().ok()?;
    (level < 9).then_some((level + 1).min(6))
}

/// Which list levels are numbered rather than bulleted.
#[derive(Default)]
struct Numbering {
    /// numId → abstractNumId.
    nums: HashMap<String, String>,
    /// (abstractNumId, level) → numbered.
    ordered: HashMap<(String, usize), bool>,
}

impl Numbering {
    fn read(numbering: &Element) -> Self {
        let mut out = Numbering::default();
        for el in numbering.elements() {
            match el.name.as_str() {
                "abstractNum" => {
                    let Some(id) = el.attr("abstractNumId") else {
                        continue;
                    };
                    for lvl in el.elements().filter(|l| l.name == "lvl") {
                        let Some(level) = lvl.attr("ilvl").and_then(|v| v.parse().ok()) else {
                            continue;
                        };
                        let format = lvl
                            .child("numFmt")
                            .and_then(|f| f.attr("val"))
                            .unwrap_or("bullet");
                        let numbered = !matches!(format, "bullet" | "none");
                        out.ordered.insert((id.to_string(), level), numbered);
                    }
                }
                "num" => {
                    let abstract_id = el.child("abstractNumId").and_then(|a| a.attr("val"));
                    if let (Some(id), Some(abstract_id)) = (el.attr("numId"), abstract_id) {
                        out.nums.insert(id.to_string(), abstract_id.to_string());
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn ordered(&self, num_id: &str, level: usize) -> bool {
        self.nums
            .get(num_id)
            .and_then(|abs| self.ordered.get(&(abs.clone(), level)))
            .copied()
            .unwrap_or(false)
    }
}

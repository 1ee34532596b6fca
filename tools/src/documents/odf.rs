//! OpenDocument text (ODT) and presentation (ODP) to Markdown.
//!
//! Both keep their content in `content.xml`: a text document's body holds
//! headings (`text:h` with an outline level), paragraphs, lists and tables;
//! a presentation's body holds pages (`draw:page`) of frames, the one of
//! class `title` naming the slide. Whitespace is collapsed as ODF asks, and
//! `text:s`, `text:tab` and `text:line-break` bring spaces, tabs and breaks
//! back. Whether a list is numbered comes from its list style.

use std::collections::HashMap;

use super::markdown::{one_line, Markdown};
use super::package::Package;
use super::xml::{Element, Node};
use super::Failure;

/// The most times a repeated table cell or row is written out.
const MAX_REPEAT: usize = 64;

/// Converts an ODT or ODP package (told apart by its body).
pub(crate) fn convert(bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let mut package = Package::open(bytes)?;
    if package
        .bytes("META-INF/manifest.xml")?
        .is_some_and(|m| String::from_utf8_lossy(&m).contains("manifest:encryption-data"))
    {
        return Err(Failure::Encrypted);
    }
    let content = package.required_xml("content.xml")?;
    let mut lists = ListStyles::default();
    if let Some(styles) = package.xml("styles.xml")? {
        lists.read(&styles);
    }
    lists.read(&content);
    let body = content
        .child("body")
        .ok_or_else(|| Failure::corrupt("content.xml has no office:body"))?;
    let writer = Writer { lists: &lists };
    if let Some(text) = body.child("text") {
        writer.blocks(text, md);
    } else if let Some(presentation) = body.child("presentation") {
        writer.presentation(presentation, md);
    } else {
        return Err(Failure::corrupt(
            "content.xml holds neither a text document nor a presentation",
        ));
    }
    Ok(())
}

struct Writer<'a> {
    lists: &'a ListStyles,
}

impl Writer<'_> {
    /// Block content: headings, paragraphs, lists, tables, sections.
    fn blocks(&self, container: &Element, md: &mut Markdown) {
        for el in container.elements() {
            if md.is_full() {
                return;
            }
            match el.name.as_str() {
                "h" => {
                    let level = el
                        .attr("text:outline-level")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1);
                    md.heading(level, &inline_text(el));
                }
                "p" => md.paragraph(&inline_text(el)),
                "list" => self.list(el, 0, None, md),
                "table" => md.table(&table_rows(el)),
                "section" | "index-body" | "table-of-content" | "alphabetical-index"
                | "illustration-index" | "text-box" | "frame" => self.blocks(el, md),
                _ => {}
            }
        }
    }

    fn list(&self, list: &Element, depth: usize, style: Option<&str>, md: &mut Markdown) {
        let style = list.attr("text:style-name").or(style);
        let ordered = style.is_some_and(|s| self.lists.ordered(s, depth + 1));
        for item in list.elements() {
            if !matches!(item.name.as_str(), "list-item" | "list-header") {
                continue;
            }
            for el in item.elements() {
                match el.name.as_str() {
                    "p" | "h" => md.list_item(depth, ordered, &inline_text(el)),
                    "list" => self.list(el, depth + 1, style, md),
                    _ => {}
                }
            }
        }
    }

    fn presentation(&self, presentation: &Element, md: &mut Markdown) {
        let pages = presentation.elements().filter(|el| el.name == "page");
        for (index, page) in pages.enumerate() {
            if md.is_full() {
                return;
            }
            let number = index + 1;
            let title = page
                .elements()
                .find(|f| f.name == "frame" && f.attr("presentation:class") == Some("title"))
                .map(|f| one_line(&f.text()))
                .unwrap_or_default();
            if title.is_empty() {
                md.heading(2, &format!("Slide {number}"));
            } else {
                md.heading(2, &format!("Slide {number}: {title}"));
            }
            for frame in page.elements().filter(|el| el.name == "frame") {
                match frame.attr("presentation:class") {
                    Some("title" | "page-number" | "footer" | "date-time" | "header") => {}
                    class => {
                        let outline = class == Some("outline");
                        for content in frame.elements() {
                            match content.name.as_str() {
                                "text-box" if outline => self.outline(content, 0, md),
                                "text-box" => self.blocks(content, md),
                                "table" => md.table(&table_rows(content)),
                                _ => {}
                            }
                        }
                    }
                }
            }
        }
    }

    /// An outline box: every paragraph is a bullet at its list depth.
    fn outline(&self, container: &Element, depth: usize, md: &mut Markdown) {
        for el in container.elements() {
            match el.name.as_str() {
                "p" | "h" => md.list_item(depth, false, &inline_text(el)),
                "list" => self.outline(el, depth, md),
                "list-item" | "list-header" => {
                    for child in el.elements() {
                        match child.name.as_str() {
                            "p" | "h" => md.list_item(depth, false, &inline_text(child)),
                            "list" => self.outline(child, depth + 1, md),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// A paragraph's text: whitespace collapsed, spaces, tabs and breaks from
/// their elements, notes and annotations left out.
fn inline_text(el: &Element) -> String {
    let mut out = String::new();
    collect_inline(el, &mut out);
    out.lines()
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join("\n")
}

fn collect_inline(el: &Element, out: &mut String) {
    for node in &el.children {
        match node {
            Node::Text(text) => {
                for (i, word) in text.split([' ', '\t', '\n', '\r']).enumerate() {
                    if i > 0 && !out.ends_with(' ') {
                        out.push(' ');
                    }
                    out.push_str(word);
                }
            }
            Node::Element(child) => match child.name.as_str() {
                "s" => {
                    let count = child
                        .attr("text:c")
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(1);
                    out.push_str(&" ".repeat(count.min(MAX_REPEAT)));
                }
                "tab" => out.push('\t'),
                "line-break" => out.push('\n'),
                "note" | "annotation" | "tracked-changes" | "bookmark" => {}
                _ => collect_inline(child, out),
            },
        }
    }
}

fn table_rows(table: &Element) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    collect_rows(table, &mut rows);
    // Spreadsheet-style tables repeat empty cells and rows to the sheet's
    // edge; trim them.
    for row in &mut rows {
        while row.last().is_some_and(|c| c.trim().is_empty()) {
            row.pop();
        }
    }
    while rows.last().is_some_and(Vec::is_empty) {
        rows.pop();
    }
    rows
}

fn collect_rows(container: &Element, rows: &mut Vec<Vec<String>>) {
    for el in container.elements() {
        match el.name.as_str() {
            "table-row" => {
                let mut row = Vec::new();
                for cell in el.elements() {
                    if !matches!(cell.name.as_str(), "table-cell" | "covered-table-cell") {
                        continue;
                    }
                    let text = cell
                        .elements()
                        .filter(|p| matches!(p.name.as_str(), "p" | "h"))
                        .map(inline_text)
                        .filter(|t| !t.trim().is_empty())
                        .collect::<Vec<_>>()
                        .join(" ");
                    for _ in 0..repeat(cell, "table:number-columns-repeated") {
                        row.push(text.clone());
                    }
                }
                for _ in 0..repeat(el, "table:number-rows-repeated") {
                    rows.push(row.clone());
                }
            }
            "table-header-rows" | "table-rows" | "table-row-group" => collect_rows(el, rows),
            _ => {}
        }
    }
}

fn repeat(el: &Element, attr: &str) -> usize {
    el.attr(attr)
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, MAX_REPEAT)
}

/// Which list styles number which levels.
#[derive(Default)]
struct ListStyles {
    ordered: HashMap<(String, usize), bool>,
}

impl ListStyles {
    fn read(&mut self, root: &Element) {
        let mut styles = Vec::new();
        root.find_all("list-style", &mut styles);
        for style in styles {
            let Some(name) = style.attr("style:name") else {
                continue;
            };
            for level in style.elements() {
                let numbered = match level.name.as_str() {
                    "list-level-style-number" => true,
                    "list-level-style-bullet" | "list-level-style-image" => false,
                    _ => continue,
                };
                if let Some(n) = level.attr("text:level").and_then(|v| v.parse().ok()) {
                    self.ordered.insert((name.to_string(), n), numbered);
                }
            }
        }
    }

    fn ordered(&self, style: &str, level: usize) -> bool {
        self.ordered
            .get(&(style.to_string(), level))
            .copied()
            .unwrap_or(false)
    }
}

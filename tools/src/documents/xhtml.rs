//! XHTML to Markdown, for EPUB chapters.
//!
//! Block elements (headings, paragraphs, lists, tables, quotes, preformatted
//! text) become Markdown blocks; everything else is inline text whose
//! whitespace is collapsed as a browser would. Text loose between blocks
//! (inside a `div` beside a `p`) becomes its own paragraph. Scripts, styles
//! and the head are left out.

use super::markdown::{one_line, Markdown};
use super::xml::{Element, Node};

/// Writes the body of an XHTML document (or the whole tree, if it has no
/// body) into `md`.
pub(crate) fn convert(root: &Element, md: &mut Markdown) {
    let body = if root.name == "body" {
        Some(root)
    } else {
        root.find("body")
    };
    blocks(body.unwrap_or(root), md);
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "section"
            | "article"
            | "header"
            | "footer"
            | "main"
            | "nav"
            | "aside"
            | "blockquote"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "ul"
            | "ol"
            | "li"
            | "table"
            | "pre"
            | "hr"
            | "figure"
            | "figcaption"
            | "dl"
            | "dt"
            | "dd"
            | "body"
            | "head"
            | "script"
            | "style"
    )
}

/// Walks block content, gathering loose inline content into paragraphs.
fn blocks(container: &Element, md: &mut Markdown) {
    let mut pending = String::new();
    for node in &container.children {
        if md.is_full() {
            return;
        }
        match node {
            Node::Text(text) => pending.push_str(text),
            Node::Element(el) if !is_block(&el.name) => inline(el, &mut pending),
            Node::Element(el) => {
                flush(&mut pending, md);
                block(el, md);
            }
        }
    }
    flush(&mut pending, md);
}

fn flush(pending: &mut String, md: &mut Markdown) {
    md.paragraph(&collapse(pending));
    pending.clear();
}

fn block(el: &Element, md: &mut Markdown) {
    match el.name.as_str() {
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            let level = el.name[1..].parse().unwrap_or(1);
            md.heading(level, &inline_text(el));
        }
        "ul" | "ol" => list(el, 0, md),
        "table" => md.table(&table_rows(el)),
        "pre" => md.code_block(&el.text()),
        "blockquote" => {
            let mut inner = Markdown::new(usize::MAX);
            blocks(el, &mut inner);
            let quoted = inner
                .finish()
                .lines()
                .map(|line| {
                    if line.is_empty() {
                        ">".to_string()
                    } else {
                        format!("> {line}")
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            md.raw_block(&quoted);
        }
        "hr" | "head" | "script" | "style" => {}
        _ => blocks(el, md),
    }
}

fn list(el: &Element, depth: usize, md: &mut Markdown) {
    let ordered = el.name == "ol";
    for item in el.elements().filter(|i| i.name == "li") {
        let mut text = String::new();
        let mut nested = Vec::new();
        for node in &item.children {
            match node {
                Node::Text(t) => text.push_str(t),
                Node::Element(child) if matches!(child.name.as_str(), "ul" | "ol") => {
                    nested.push(child)
                }
                Node::Element(child) if is_block(&child.name) => {
                    text.push(' ');
                    inline(child, &mut text);
                    text.push(' ');
                }
                Node::Element(child) => inline(child, &mut text),
            }
        }
        md.list_item(depth, ordered, &collapse(&text));
        for child in nested {
            list(child, depth + 1, md);
        }
    }
}

fn table_rows(table: &Element) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut trs = Vec::new();
    table.find_all("tr", &mut trs);
    for tr in trs {
        rows.push(
            tr.elements()
                .filter(|c| matches!(c.name.as_str(), "td" | "th"))
                .map(inline_text)
                .collect(),
        );
    }
    rows
}

/// The inline text of an element, whitespace collapsed, `<br>` kept.
fn inline_text(el: &Element) -> String {
    let mut out = String::new();
    inline(el, &mut out);
    collapse(&out)
}

fn inline(el: &Element, out: &mut String) {
    match el.name.as_str() {
        "br" => {
            out.push('\u{2028}');
            return;
        }
        "script" | "style" | "head" => return,
        "img" => {
            if let Some(alt) = el.attr("alt").filter(|a| !a.trim().is_empty()) {
                out.push_str(alt);
            }
            return;
        }
        _ => {}
    }
    for node in &el.children {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Element(child) => inline(child, out),
        }
    }
}

/// Collapses whitespace like HTML, turning the `<br>` marks into newlines.
fn collapse(text: &str) -> String {
    text.split('\u{2028}')
        .map(one_line)
        .collect::<Vec<_>>()
        .join("\n")
}

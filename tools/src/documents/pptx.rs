//! PowerPoint (PPTX) to Markdown: one `## Slide N` section per slide.
//!
//! Slides come in the order `presentation.xml` lists them (not the order of
//! their file names). In each slide the title placeholder names the section;
//! text in body placeholders becomes list items at their outline level,
//! other text boxes become paragraphs, tables become Markdown tables, and
//! the date, footer and slide-number placeholders are left out.

use super::markdown::{one_line, Markdown};
use super::package::Package;
use super::xml::{Element, Node};
use super::Failure;

/// Converts a PPTX package.
pub(crate) fn convert(bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let mut package = Package::open(bytes)?;
    let slides = slide_parts(&mut package)?;
    for (index, part) in slides.iter().enumerate() {
        if md.is_full() {
            break;
        }
        let Some(slide) = package.xml(part)? else {
            continue;
        };
        write_slide(index + 1, &slide, md);
    }
    Ok(())
}

/// The slide parts in presentation order.
fn slide_parts(package: &mut Package<'_>) -> Result<Vec<String>, Failure> {
    let presentation = package.required_xml("ppt/presentation.xml")?;
    let rels = package.relationships("ppt/presentation.xml")?;
    let mut ids = Vec::new();
    if let Some(list) = presentation.child("sldIdLst") {
        for slide in list.elements().filter(|el| el.name == "sldId") {
            // The relationship id is the prefixed `r:id` (not the plain `id`).
            let rid = slide
                .attrs
                .iter()
                .find(|(key, _)| key.contains(':') && key.ends_with(":id"))
                .map(|(_, value)| value.clone());
            ids.extend(rid);
        }
    }
    let ordered: Vec<String> = ids
        .iter()
        .filter_map(|rid| {
            rels.iter()
                .find(|(id, _, _)| id == rid)
                .map(|(_, _, target)| target.clone())
        })
        .collect();
    if !ordered.is_empty() {
        return Ok(ordered);
    }
    // No slide list: fall back on the slide files by their number.
    let mut numbered: Vec<(u32, String)> = package
        .names()
        .into_iter()
        .filter_map(|name| {
            let n = name
                .strip_prefix("ppt/slides/slide")?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((n, name))
        })
        .collect();
    numbered.sort();
    Ok(numbered.into_iter().map(|(_, name)| name).collect())
}

/// What a shape holds, by its placeholder type.
#[derive(PartialEq)]
enum Role {
    Title,
    Body,
    Text,
    Skip,
}

fn role(shape: &Element) -> Role {
    let placeholder = shape
        .child("nvSpPr")
        .and_then(|nv| nv.child("nvPr"))
        .and_then(|nv| nv.child("ph"));
    match placeholder {
        None => Role::Text,
        Some(ph) => match ph.attr("type") {
            Some("title" | "ctrTitle") => Role::Title,
            Some("dt" | "ftr" | "sldNum" | "hdr") => Role::Skip,
            Some("subTitle") => Role::Text,
            _ => Role::Body,
        },
    }
}

fn write_slide(number: usize, slide: &Element, md: &mut Markdown) {
    let Some(tree) = slide.child("cSld").and_then(|c| c.child("spTree")) else {
        md.heading(2, &format!("Slide {number}"));
        return;
    };
    let mut shapes = Vec::new();
    flatten_shapes(tree, &mut shapes);
    let title = shapes
        .iter()
        .find(|s| s.name == "sp" && role(s) == Role::Title)
        .map(|s| one_line(&paragraphs(s).join(" ")))
        .unwrap_or_default();
    if title.is_empty() {
        md.heading(2, &format!("Slide {number}"));
    } else {
        md.heading(2, &format!("Slide {number}: {title}"));
    }
    for shape in shapes {
        match shape.name.as_str() {
            "sp" => match role(shape) {
                Role::Title | Role::Skip => {}
                Role::Body => {
                    for (level, text) in leveled_paragraphs(shape) {
                        md.list_item(level, false, &text);
                    }
                }
                Role::Text => {
                    for (bulleted, level, text) in text_box_paragraphs(shape) {
                        if bulleted {
                            md.list_item(level, false, &text);
                        } else {
                            md.paragraph(&text);
                        }
                    }
                }
            },
            "graphicFrame" => {
                if let Some(table) = shape.find("tbl") {
                    md.table(&table_rows(table));
                }
            }
            _ => {}
        }
    }
}

/// Shapes in drawing order, groups opened.
fn flatten_shapes<'a>(container: &'a Element, out: &mut Vec<&'a Element>) {
    for el in container.elements() {
        match el.name.as_str() {
            "sp" | "graphicFrame" => out.push(el),
            "grpSp" => flatten_shapes(el, out),
            "AlternateContent" => {
                if let Some(choice) = el.child("Choice") {
                    flatten_shapes(choice, out);
                }
            }
            _ => {}
        }
    }
}

/// The text of each `a:p` in a shape's text body.
fn paragraphs(shape: &Element) -> Vec<String> {
    leveled_paragraphs(shape)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// Each non-empty paragraph with its outline level.
fn leveled_paragraphs(shape: &Element) -> Vec<(usize, String)> {
    text_box_paragraphs(shape)
        .into_iter()
        .map(|(_, level, text)| (level, text))
        .collect()
}

/// Each non-empty paragraph: whether it has a bullet, its level, its text.
fn text_box_paragraphs(shape: &Element) -> Vec<(bool, usize, String)> {
    let Some(body) = shape.child("txBody") else {
        return Vec::new();
    };
    body.elements()
        .filter(|el| el.name == "p")
        .filter_map(|p| {
            let text = paragraph_text(p);
            if text.trim().is_empty() {
                return None;
            }
            let props = p.child("pPr");
            let level = props
                .and_then(|pr| pr.attr("lvl"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let bulleted = props
                .map(|pr| pr.child("buChar").is_some() || pr.child("buAutoNum").is_some())
                .unwrap_or(false);
            Some((bulleted, level, text))
        })
        .collect()
}

fn paragraph_text(p: &Element) -> String {
    let mut out = String::new();
    for node in &p.children {
        let Node::Element(el) = node else { continue };
        match el.name.as_str() {
            "r" | "fld" => {
                if let Some(t) = el.child("t") {
                    out.push_str(&t.text());
                }
            }
            "br" => out.push('\n'),
            _ => {}
        }
    }
    out
}

fn table_rows(table: &Element) -> Vec<Vec<String>> {
    table
        .elements()
        .filter(|el| el.name == "tr")
        .map(|tr| {
            tr.elements()
                .filter(|el| el.name == "tc")
                .map(|tc| {
                    let Some(body) = tc.child("txBody") else {
                        return String::new();
                    };
                    body.elements()
                        .filter(|el| el.name == "p")
                        .map(paragraph_text)
                        .filter(|t| !t.trim().is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        })
        .collect()
}

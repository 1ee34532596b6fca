//! A small element tree over quick-xml, shared by the XML-based formats.
//!
//! DOCX, PPTX, ODF and EPUB are all XML walked in document order with a
//! little context (which list, which table, which placeholder). A tree makes
//! each converter a short recursive function instead of a state machine over
//! events. Element names are kept without their namespace prefix (`w:p` is
//! `p`), which is how each format's vocabulary is written in its converter;
//! attributes keep their qualified name and are looked up either way.

use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};

/// An element: its local name, its attributes and its content in order.
#[derive(Debug, Default)]
pub(crate) struct Element {
    /// The name without its prefix.
    pub(crate) name: String,
    /// Attributes as (qualified name, unescaped value).
    pub(crate) attrs: Vec<(String, String)>,
    /// Child elements and text, in document order.
    pub(crate) children: Vec<Node>,
}

/// A piece of an element's content.
#[derive(Debug)]
pub(crate) enum Node {
    /// A child element.
    Element(Element),
    /// Text, with entity and character references resolved.
    Text(String),
}

impl Element {
    /// An attribute's value by qualified name (`r:id`), or else by local name
    /// (`val` finds `w:val`).
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(key, _)| key == name)
            .or_else(|| {
                self.attrs
                    .iter()
                    .find(|(key, _)| local(key) == name && !name.contains(':'))
            })
            .map(|(_, value)| value.as_str())
    }

    /// The child elements, in order.
    pub(crate) fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|node| match node {
            Node::Element(el) => Some(el),
            Node::Text(_) => None,
        })
    }

    /// The first child element named `name`.
    pub(crate) fn child(&self, name: &str) -> Option<&Element> {
        self.elements().find(|el| el.name == name)
    }

    /// The first element named `name` at any depth, in document order.
    pub(crate) fn find(&self, name: &str) -> Option<&Element> {
        for el in self.elements() {
            if el.name == name {
                return Some(el);
            }
            if let Some(found) = el.find(name) {
                return Some(found);
            }
        }
        None
    }

    /// Every element named `name` at any depth, not looking inside a match.
    pub(crate) fn find_all<'a>(&'a self, name: &str, out: &mut Vec<&'a Element>) {
        for el in self.elements() {
            if el.name == name {
                out.push(el);
            } else {
                el.find_all(name, out);
            }
        }
    }

    /// All the text inside, concatenated as written.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        self.collect_text(&mut out);
        out
    }

    fn collect_text(&self, out: &mut String) {
        for node in &self.children {
            match node {
                Node::Element(el) => el.collect_text(out),
                Node::Text(text) => out.push_str(text),
            }
        }
    }
}

/// The name after the prefix: `w:p` → `p`.
fn local(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

/// Parses `bytes` into the tree of its root element.
pub(crate) fn parse(bytes: &[u8]) -> Result<Element, String> {
    let mut reader = Reader::from_reader(bytes);
    let config = reader.config_mut();
    config.expand_empty_elements = true;
    config.check_end_names = false;
    config.allow_dangling_amp = true;
    config.allow_unmatched_ends = true;
    let mut stack: Vec<Element> = vec![Element::default()];
    let mut buf = Vec::new();
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("bad XML at byte {}: {e}", reader.buffer_position()))?;
        match event {
            Event::Start(start) => {
                let name = local(start.name().as_ref()).to_string();
                let mut attrs = Vec::new();
                for attr in start.attributes().with_checks(false).flatten() {
                    let key = attr.key.as_ref().to_string();
                    let value = attr
                        .normalized_value_with(XmlVersion::Implicit1_0, 4, resolve_entity)
                        .map(|v| v.into_owned())
                        .unwrap_or_else(|_| attr.value.to_string());
                    attrs.push((key, value));
                }
                stack.push(Element {
                    name,
                    attrs,
                    children: Vec::new(),
                });
            }
            Event::End(_) => {
                if stack.len() > 1 {
                    if let Some(done) = stack.pop() {
                        if let Some(parent) = stack.last_mut() {
                            parent.children.push(Node::Element(done));
                        }
                    }
                }
            }
            Event::Text(text) => push_text(&mut stack, &text.xml10_content()),
            Event::CData(data) => push_text(&mut stack, &data.xml10_content()),
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(ch)) => ch.to_string(),
                    _ => {
                        let name = reference.into_inner();
                        resolve_entity(&name)
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("&{name};"))
                    }
                };
                push_text(&mut stack, &resolved);
            }
            Event::Eof => break,
            Event::Empty(_)
            | Event::Comment(_)
            | Event::Decl(_)
            | Event::PI(_)
            | Event::DocType(_) => {}
        }
        buf.clear();
    }
    // Close whatever a truncated document left open.
    while stack.len() > 1 {
        if let Some(done) = stack.pop() {
            if let Some(parent) = stack.last_mut() {
                parent.children.push(Node::Element(done));
            }
        }
    }
    let root = stack.pop().unwrap_or_default();
    root.children
        .into_iter()
        .find_map(|node| match node {
            Node::Element(el) => Some(el),
            Node::Text(_) => None,
        })
        .ok_or_else(|| "no XML element found".to_string())
}

fn push_text(stack: &mut [Element], text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(current) = stack.last_mut() {
        if let Some(Node::Text(last)) = current.children.last_mut() {
            last.push_str(text);
        } else {
            current.children.push(Node::Text(text.to_string()));
        }
    }
}

/// The XML entities and the HTML ones an XHTML chapter commonly uses.
fn resolve_entity(name: &str) -> Option<&'static str> {
    Some(match name {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "nbsp" => "\u{a0}",
        "mdash" => "\u{2014}",
        "ndash" => "\u{2013}",
        "hellip" => "\u{2026}",
        "lsquo" => "\u{2018}",
        "rsquo" => "\u{2019}",
        "ldquo" => "\u{201c}",
        "rdquo" => "\u{201d}",
        "copy" => "\u{a9}",
        "reg" => "\u{ae}",
        "trade" => "\u{2122}",
        "shy" => "\u{ad}",
        "laquo" => "\u{ab}",
        "raquo" => "\u{bb}",
        "eacute" => "\u{e9}",
        "egrave" => "\u{e8}",
        "agrave" => "\u{e0}",
        "ccedil" => "\u{e7}",
        _ => return None,
    })
}

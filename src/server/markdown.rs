//! Messages as Markdown, rendered safe by construction on the server.
//!
//! [`render`] turns a message's text into HTML with pulldown-cmark
//! (CommonMark with the GFM tables, task lists and strikethrough), and
//! every event that could carry markup of the message's own is rewritten
//! before it is written: raw HTML becomes text, a link or image is an `<a>`
//! this module writes itself (an allowed scheme, a URL that parses, the
//! address percent-encoded and escaped, no title), and pulldown-cmark's
//! own tags take no attribute from the message but a code block's language
//! (checked against `[A-Za-z0-9+#._-]`). So what the page sets as a
//! container's `innerHTML` holds no script, handler, style or foreign
//! element whatever a message says. The page's CSP (no inline script or
//! style) is the second wall.
//!
//! This used to be checked by parsing the output again with ammonia
//! (html5ever): about 90% of a render's time. ammonia stays as the oracle
//! of the tests, with the old allow-list: over the fixtures and thousands
//! of generated messages, cleaning our output changes nothing.
//!
//! Chat conventions on top of CommonMark:
//! - a line break in a paragraph stays a break (`<br>`);
//! - raw HTML in a message is shown as text, never as markup;
//! - a message's headings sit below the page's own and never skip a
//!   level: `#` is an `<h3>`, each heading at most one below the one
//!   before it in the message (`## A` alone is an `<h3>`);
//! - bare `http(s)://`, `mailto:` and `troupe://thread/…` URLs are links,
//!   `@handle` is a `<span class="mention">`; an image is a link to it;
//! - every link opens in a new tab with `rel="noopener noreferrer"`;
//!   only `http`, `https`, `mailto` and `troupe` URLs are kept (a
//!   `javascript:` or relative link loses its `href`);
//! - a fenced block is `<div class="code"><pre><code class="language-…">`
//!   (the page adds its copy button), a table sits in `<div class="table">`,
//!   a task is a disabled checkbox labelled "done" or "to do".
//!
//! A turn's stream deltas are not rendered: the page shows them as plain
//! text until the message lands with its `html`.

use pulldown_cmark::{
    BlockQuoteKind, CodeBlockKind, CowStr, Event, HeadingLevel, LinkType, Options, Parser, Tag,
    TagEnd, TextMergeStream,
};
use serde_json::Value;
use troupe_runtime::protocol::house::ThreadMessage;

/// `text` as safe HTML (empty for an empty text).
pub fn render(text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    // As an HTML parser reads a page: every line ends in `\n`.
    let text = if text.contains('\r') {
        CowStr::from(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        CowStr::Borrowed(text)
    };
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_GFM;
    let mut in_code = 0usize;
    // For each open link or image: whether it was written as an `<a>`.
    let mut links: Vec<bool> = Vec::new();
    // The levels of the open headings, and the last one written.
    let mut headings: Vec<HeadingLevel> = Vec::new();
    let mut last_heading = 2usize;
    let events = TextMergeStream::new(Parser::new_ext(&text, options)).flat_map(|event| {
        let out: Vec<Event> = match event {
            Event::Start(Tag::Heading { level, .. }) => {
                let level = below(level, &mut last_heading);
                headings.push(level);
                vec![Event::Start(Tag::Heading {
                    level,
                    id: None,
                    classes: Vec::new(),
                    attrs: Vec::new(),
                })]
            }
            Event::End(TagEnd::Heading(_)) => vec![Event::End(TagEnd::Heading(
                headings.pop().unwrap_or(HeadingLevel::H6),
            ))],
            Event::Start(Tag::CodeBlock(kind)) => {
                in_code += 1;
                let lang = match &kind {
                    CodeBlockKind::Fenced(info) => info.split(' ').next().unwrap_or_default(),
                    CodeBlockKind::Indented => "",
                };
                let lang = if language(lang) { lang } else { "" };
                vec![
                    Event::Html(r#"<div class="code">"#.into()),
                    Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(
                        lang.to_string().into(),
                    ))),
                ]
            }
            Event::End(TagEnd::CodeBlock) => {
                in_code = in_code.saturating_sub(1);
                vec![Event::End(TagEnd::CodeBlock), Event::Html("</div>".into())]
            }
            Event::Start(Tag::Table(align)) => vec![
                Event::Html(r#"<div class="table">"#.into()),
                Event::Start(Tag::Table(align)),
            ],
            Event::End(TagEnd::Table) => {
                vec![Event::End(TagEnd::Table), Event::Html("</div>".into())]
            }
            // A GitHub alert is a plain quote: no class of the message's.
            Event::Start(Tag::BlockQuote(_)) => vec![Event::Start(Tag::BlockQuote(None))],
            Event::End(TagEnd::BlockQuote(_)) => {
                vec![Event::End(TagEnd::BlockQuote(None::<BlockQuoteKind>))]
            }
            // An image is a link to it: the page loads no image a message
            // names. A link to a URL not followed, or inside another link,
            // is its text.
            Event::Start(
                Tag::Link {
                    link_type,
                    dest_url,
                    ..
                }
                | Tag::Image {
                    link_type,
                    dest_url,
                    ..
                },
            ) => {
                let opened = if links.is_empty() {
                    anchor(link_type, &dest_url)
                } else {
                    None
                };
                links.push(opened.is_some());
                opened
                    .map(|a| vec![Event::InlineHtml(a.into())])
                    .unwrap_or_default()
            }
            Event::End(TagEnd::Link | TagEnd::Image) => match links.pop() {
                Some(true) => vec![Event::InlineHtml("</a>".into())],
                _ => vec![],
            },
            Event::TaskListMarker(done) => vec![Event::InlineHtml(
                if done {
                    r#"<input type="checkbox" disabled="" checked="" aria-label="done"> "#
                } else {
                    r#"<input type="checkbox" disabled="" aria-label="to do"> "#
                }
                .into(),
            )],
            Event::SoftBreak | Event::HardBreak => vec![Event::InlineHtml("<br>\n".into())],
            Event::Rule => vec![Event::Html("<hr>\n".into())],
            Event::Html(raw) | Event::InlineHtml(raw) => vec![Event::Text(raw)],
            Event::Text(text) if in_code == 0 && links.is_empty() => inline(text),
            // Not enabled, so never met; text if they ever were.
            Event::FootnoteReference(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                vec![Event::Text(t)]
            }
            other => vec![other],
        };
        out
    });
    let mut html = String::with_capacity(text.len() * 3 / 2 + 64);
    pulldown_cmark::html::push_html(&mut html, events);
    if html.contains(r#" style="text-align: "#) {
        // A column's alignment as a class: the CSP forbids style attributes.
        for cell in ["th", "td"] {
            for (align, class) in [
                ("left", ""),
                ("center", r#" class="al-center""#),
                ("right", r#" class="al-right""#),
            ] {
                html = html.replace(
                    &format!(r#"<{cell} style="text-align: {align}">"#),
                    &format!("<{cell}{class}>"),
                );
            }
        }
    }
    html
}

/// A thread message as the page and the API send it: its fields and its
/// text rendered as `html`.
pub fn message_json(message: &ThreadMessage) -> Value {
    let mut value = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("html".into(), Value::String(render(&message.text)));
    }
    value
}

/// The `<a …>` that opens a link or image to `dest`, when it is followed:
/// an `http`, `https`, `mailto` or `troupe` URL that parses.
fn anchor(link_type: LinkType, dest: &str) -> Option<String> {
    let href = if link_type == LinkType::Email {
        attribute(&format!("mailto:{dest}"))
    } else {
        attribute(dest)
    };
    followed(&href).then(|| {
        format!(
            r#"<a href="{}" target="_blank" rel="noopener noreferrer">"#,
            href
        )
    })
}

/// Whether a link to `href` (as written in the attribute) is made: `http`,
/// `https`, `mailto` or `troupe`, and a URL that parses.
fn followed(href: &str) -> bool {
    let scheme = ["http:", "https:", "mailto:", "troupe:"].iter().any(|p| {
        href.get(..p.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(p))
    });
    scheme && url::Url::parse(&href.replace("&amp;", "&")).is_ok()
}

/// A URL as an attribute's value: `&` escaped, and what may not stand in
/// a URL or would end the attribute (quotes, angle brackets, spaces and
/// controls, a non-breaking space) percent-encoded.
fn attribute(url: &str) -> String {
    let mut out = String::with_capacity(url.len() + 8);
    for c in url.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' | '\'' | '<' | '>' | '`' | '\\' | '\u{a0}' => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c if c.is_whitespace() || c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether a code block's language may be its class.
fn language(lang: &str) -> bool {
    !lang.is_empty()
        && lang
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+#.-_".contains(c))
}

/// A message's heading level: two below the page's own, and at most one
/// below `last`, the level written before it (which it becomes).
fn below(level: HeadingLevel, last: &mut usize) -> HeadingLevel {
    let wanted = (level as usize + 2).min(6);
    let level = wanted.min(*last + 1).max(3);
    *last = level;
    match level {
        3 => HeadingLevel::H3,
        4 => HeadingLevel::H4,
        5 => HeadingLevel::H5,
        _ => HeadingLevel::H6,
    }
}

/// Plain text with its bare URLs as links and its mentions as spans.
fn inline(text: CowStr<'_>) -> Vec<Event<'_>> {
    let t: &str = &text;
    if !t.contains(['@', ':']) {
        return vec![Event::Text(text)];
    }
    let mut html = String::new();
    let mut last = 0;
    let bytes = t.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Only at an ASCII byte that may start a URL or a mention (so `i`
        // is a char boundary), not inside a word.
        let b = bytes[i];
        let start = b == b'@' || matches!(b.to_ascii_lowercase(), b'h' | b'm' | b't');
        let before = if start {
            t[..i].chars().next_back()
        } else {
            None
        };
        if !start || before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            i += 1;
            continue;
        }
        let found = if b == b'@' {
            let len = mention_at(&t[i + 1..]);
            (len > 0 && before != Some('@')).then(|| {
                let handle = escape(&t[i + 1..i + 1 + len]);
                (
                    1 + len,
                    format!(r#"<span class="mention">@{handle}</span>"#),
                )
            })
        } else {
            url_at(&t[i..]).and_then(|len| {
                let url = &t[i..i + len];
                let href = attribute(url);
                followed(&href).then(|| {
                    (
                        len,
                        format!(
                            r#"<a href="{href}" target="_blank" rel="noopener noreferrer">{}</a>"#,
                            escape(url)
                        ),
                    )
                })
            })
        };
        match found {
            Some((len, made)) => {
                html.push_str(&escape(&t[last..i]));
                html.push_str(&made);
                i += len;
                last = i;
            }
            None => i += 1,
        }
    }
    if last == 0 {
        return vec![Event::Text(text)];
    }
    html.push_str(&escape(&t[last..]));
    vec![Event::InlineHtml(html.into())]
}

/// The length of the bare URL `s` starts with, if it does.
fn url_at(s: &str) -> Option<usize> {
    const SCHEMES: [&str; 4] = ["https://", "http://", "mailto:", "troupe://"];
    let scheme = SCHEMES.iter().find(|p| {
        s.len() > p.len() && s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p))
    })?;
    let end = s
        .find(|c: char| c.is_whitespace() || c == '<' || c == '>')
        .unwrap_or(s.len());
    let url = s[..end].trim_end_matches([
        '.', ',', ';', ':', '!', '?', ')', ']', '\'', '"', '*', '_', '~',
    ]);
    (url.len() > scheme.len()).then_some(url.len())
}

/// The length of the handle after an `@` (letters, digits, `._-`, not
/// ending in a dot), 0 when there is none.
fn mention_at(s: &str) -> usize {
    let len = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(s.len());
    s[..len].trim_end_matches('.').len()
}

/// `s` as text of an element: `&`, `<` and `>` escaped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;

//! Messages as Markdown, rendered and sanitised on the server.
//!
//! [`render`] turns a message's text into HTML with pulldown-cmark
//! (CommonMark with the GFM tables, task lists and strikethrough) and then
//! cleans it with ammonia against a short allow-list, so what the page
//! sets as a container's `innerHTML` holds no script, handler, style or
//! foreign element whatever a message says. The page's CSP (no inline
//! script or style) is the second wall.
//!
//! Chat conventions on top of CommonMark:
//! - a line break in a paragraph stays a break (`<br>`);
//! - raw HTML in a message is shown as text, never as markup;
//! - a message's headings sit below the page's own (`#` is an `<h3>`);
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

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd, TextMergeStream};
use serde_json::Value;
use troupe_runtime::protocol::house::ThreadMessage;

/// `text` as sanitised HTML (empty for an empty text).
pub fn render(text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_GFM;
    let mut in_code = 0usize;
    let mut links: Vec<bool> = Vec::new();
    let events = TextMergeStream::new(Parser::new_ext(text, options)).flat_map(|event| {
        let out: Vec<Event> = match event {
            Event::Start(Tag::Heading {
                level,
                id,
                classes,
                attrs,
            }) => vec![Event::Start(Tag::Heading {
                level: lower(level),
                id,
                classes,
                attrs,
            })],
            Event::End(TagEnd::Heading(level)) => vec![Event::End(TagEnd::Heading(lower(level)))],
            Event::Start(Tag::CodeBlock(kind)) => {
                in_code += 1;
                vec![
                    Event::Html(r#"<div class="code">"#.into()),
                    Event::Start(Tag::CodeBlock(kind)),
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
            // An image is a link to it: the page loads no image a message
            // names. A link to a URL not followed is its text.
            Event::Start(
                Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }
                | Tag::Image {
                    link_type,
                    dest_url,
                    title,
                    id,
                },
            ) => {
                let followed = followed(&dest_url);
                links.push(followed);
                if followed {
                    vec![Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    })]
                } else {
                    vec![]
                }
            }
            Event::End(TagEnd::Link | TagEnd::Image) => match links.pop() {
                Some(true) => vec![Event::End(TagEnd::Link)],
                _ => vec![],
            },
            Event::TaskListMarker(done) => vec![Event::InlineHtml(
                if done {
                    r#"<input type="checkbox" checked aria-label="done"> "#
                } else {
                    r#"<input type="checkbox" aria-label="to do"> "#
                }
                .into(),
            )],
            Event::SoftBreak => vec![Event::HardBreak],
            Event::Html(raw) | Event::InlineHtml(raw) => vec![Event::Text(raw)],
            Event::Text(text) if in_code == 0 && links.is_empty() => inline(text),
            other => vec![other],
        };
        out
    });
    let mut html = String::with_capacity(text.len() * 3 / 2 + 64);
    pulldown_cmark::html::push_html(&mut html, events);
    // A column's alignment as a class: the CSP forbids style attributes.
    let html = html
        .replace(r#" style="text-align: center""#, r#" class="al-center""#)
        .replace(r#" style="text-align: right""#, r#" class="al-right""#);
    cleaner().clean(&html).to_string()
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

/// Whether a link to `url` is made: `http`, `https`, `mailto` or
/// `troupe` (ammonia checks again).
fn followed(url: &str) -> bool {
    ["http:", "https:", "mailto:", "troupe:"].iter().any(|p| {
        url.get(..p.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(p))
    })
}

/// A message's heading level, two below the page's own.
fn lower(level: HeadingLevel) -> HeadingLevel {
    match level {
        HeadingLevel::H1 => HeadingLevel::H3,
        HeadingLevel::H2 => HeadingLevel::H4,
        HeadingLevel::H3 => HeadingLevel::H5,
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
            url_at(&t[i..]).map(|len| {
                let url = escape(&t[i..i + len]);
                (len, format!(r#"<a href="{url}">{url}</a>"#))
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

/// `s` with the characters HTML gives meaning to escaped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The allow-list, built once.
fn cleaner() -> &'static ammonia::Builder<'static> {
    static CLEANER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    CLEANER.get_or_init(|| {
        let tags: HashSet<&str> = [
            "p",
            "br",
            "h3",
            "h4",
            "h5",
            "h6",
            "strong",
            "em",
            "del",
            "code",
            "pre",
            "blockquote",
            "ul",
            "ol",
            "li",
            "input",
            "table",
            "thead",
            "tbody",
            "tr",
            "th",
            "td",
            "hr",
            "a",
            "span",
            "div",
        ]
        .into();
        let attributes: HashMap<&str, HashSet<&str>> = [
            ("a", ["href"].into()),
            ("ol", ["start"].into()),
            ("input", ["checked", "aria-label"].into()),
            ("code", ["class"].into()),
            ("span", ["class"].into()),
            ("div", ["class"].into()),
            ("th", ["class"].into()),
            ("td", ["class"].into()),
        ]
        .into();
        let forced: HashMap<&str, HashMap<&str, &str>> = [
            ("a", [("target", "_blank")].into()),
            ("input", [("type", "checkbox"), ("disabled", "")].into()),
        ]
        .into();
        let mut b = ammonia::Builder::empty();
        b.tags(tags)
            .tag_attributes(attributes)
            .set_tag_attribute_values(forced)
            .url_schemes(["http", "https", "mailto", "troupe"].into())
            .url_relative(ammonia::UrlRelative::Deny)
            .link_rel(Some("noopener noreferrer"))
            .attribute_filter(|tag, attribute, value| {
                if attribute != "class" {
                    return Some(value.into());
                }
                let ok = match tag {
                    "code" => value.strip_prefix("language-").is_some_and(|l| {
                        !l.is_empty()
                            && l.chars()
                                .all(|c| c.is_ascii_alphanumeric() || "+#.-_".contains(c))
                    }),
                    "span" => value == "mention",
                    "div" => value == "code" || value == "table",
                    "th" | "td" => value == "al-center" || value == "al-right",
                    _ => false,
                };
                ok.then(|| value.into())
            });
        b
    })
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn headings_sit_below_the_page() {
        assert_eq!(
            render("# Plan\n## Steps"),
            "<h3>Plan</h3>\n<h4>Steps</h4>\n"
        );
    }

    #[test]
    fn a_line_break_stays_and_emphasis_renders() {
        assert_eq!(
            render("**bold** *em* ~~gone~~\nnext `x<y`"),
            "<p><strong>bold</strong> <em>em</em> <del>gone</del><br>\nnext <code>x&lt;y</code></p>\n"
        );
    }

    #[test]
    fn tables_have_a_wrapper_and_alignment_classes() {
        let html = render("| a | b |\n|---|:-:|\n| 1 | 2 |");
        assert!(
            html.starts_with(
                r#"<div class="table"><table><thead><tr><th>a</th><th class="al-center">b</th>"#
            ),
            "{html}"
        );
        assert!(
            html.contains(r#"<td>1</td><td class="al-center">2</td>"#),
            "{html}"
        );
        assert!(!html.contains("style"), "{html}");
    }

    #[test]
    fn task_lists_are_disabled_labelled_checkboxes() {
        // The forced attributes come in any order.
        let html = render("- [x] done\n- [ ] todo");
        let items: Vec<&str> = html.split("<li>").skip(1).collect();
        assert_eq!(items.len(), 2, "{html}");
        for (item, label, checked) in [(items[0], "done", true), (items[1], "to do", false)] {
            assert!(item.starts_with("<input "), "{item}");
            for attribute in [r#"type="checkbox""#, r#"disabled="""#] {
                assert!(item.contains(attribute), "{item}");
            }
            assert!(item.contains(&format!(r#"aria-label="{label}""#)), "{item}");
            assert_eq!(item.contains("checked"), checked, "{item}");
        }
        assert!(items[0].ends_with("> done</li>\n"), "{html}");
    }

    #[test]
    fn code_fences_keep_their_language_and_their_text() {
        let html = render("```rust\nfn main() { println!(\"<b>@x</b>\"); }\n```");
        assert_eq!(
            html,
            "<div class=\"code\">\n<pre><code class=\"language-rust\">fn main() { println!(\"&lt;b&gt;@x&lt;/b&gt;\"); }\n</code></pre>\n</div>"
        );
        let odd = render("```x\" onclick=\"y\nz\n```");
        assert!(!odd.contains("onclick=\""), "{odd}");
    }

    #[test]
    fn links_open_in_a_new_tab_without_an_opener() {
        assert_eq!(
            render("[docs](https://example.com/a?b=1&c=2) and https://example.org/x."),
            "<p><a href=\"https://example.com/a?b=1&amp;c=2\" target=\"_blank\" rel=\"noopener noreferrer\">docs</a> \
             and <a href=\"https://example.org/x\" target=\"_blank\" rel=\"noopener noreferrer\">https://example.org/x</a>.</p>\n"
        );
    }

    #[test]
    fn thread_links_are_kept_for_the_page_to_make_chips() {
        let html = render("see troupe://thread/plans and [this](troupe://thread/q%203)");
        assert!(html.contains(r#"href="troupe://thread/plans""#), "{html}");
        assert!(html.contains(r#"href="troupe://thread/q%203""#), "{html}");
    }

    #[test]
    fn a_script_never_survives() {
        for text in [
            "<script>alert(1)</script>",
            "hi <script>alert(1)</script> there",
            "<div>\n<script>alert(1)</script>\n</div>",
        ] {
            let html = render(text);
            assert!(!html.contains("<script"), "{text} → {html}");
            assert!(
                html.contains("&lt;script&gt;"),
                "shown as text: {text} → {html}"
            );
        }
    }

    #[test]
    fn javascript_urls_lose_their_href() {
        assert_eq!(
            render("not [this](javascript:alert(1))."),
            "<p>not this.</p>\n"
        );
        for text in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "<javascript:alert(1)>",
            "[x](/api/houses)",
        ] {
            let html = render(text);
            assert!(!html.contains("href"), "{text} → {html}");
        }
    }

    #[test]
    fn raw_html_is_text_and_an_img_handler_is_inert() {
        let html = render(r#"<img src=x onerror="alert(1)"> and <b onclick="x()">b</b>"#);
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b"), "{html}");
        assert!(html.contains("&lt;img src=x onerror="), "{html}");
        let image = render("![pic](https://example.com/a.png)");
        assert!(!image.contains("<img"), "{image}");
        assert!(
            image.contains(r#"href="https://example.com/a.png""#) && image.contains(">pic</a>"),
            "{image}"
        );
    }

    #[test]
    fn mentions_are_spans_and_emails_are_not() {
        let html = render("@scribe, ask @ann.lee. Mail me@example.com; **@bold**");
        assert!(
            html.contains(r#"<span class="mention">@scribe</span>,"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="mention">@ann.lee</span>."#),
            "{html}"
        );
        assert!(html.contains("me@example.com"), "{html}");
        assert_eq!(html.matches("mention").count(), 3, "{html}");
        assert!(!render("`@code`").contains("mention"));
    }

    #[test]
    fn text_beyond_ascii_renders() {
        assert_eq!(
            render("Café — ok → ✓ @zoë h—ttp://x"),
            "<p>Café — ok → ✓ <span class=\"mention\">@zo</span>ë h—ttp://x</p>\n"
        );
    }

    #[test]
    fn an_empty_text_is_empty() {
        assert_eq!(render("  \n"), "");
    }
}

//! The Markdown renderer's tests: the chat conventions on fixtures, and
//! ammonia (html5ever parsing our output again, with the allow-list the
//! renderer used to clean with) as the oracle that our output is already
//! clean — over the fixtures, the bench's message and thousands of
//! generated messages mixing every construct with hostile pieces.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::render;

/// ammonia with the allow-list the renderer used to clean with, built once.
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

#[test]
fn headings_never_skip_a_level() {
    assert_eq!(
        render("## Cleaned up\n\ntext"),
        "<h3>Cleaned up</h3>\n<p>text</p>\n"
    );
    assert_eq!(
        render("# A\n### B\n#### C\n## D"),
        "<h3>A</h3>\n<h4>B</h4>\n<h5>C</h5>\n<h4>D</h4>\n"
    );
    assert_eq!(render("###### deep"), "<h3>deep</h3>\n");
}

#[test]
fn alerts_and_odd_links_carry_nothing_of_the_message() {
    let html = render("> [!WARNING]\n> careful");
    assert!(html.starts_with("<blockquote>"), "{html}");
    let html = render("[a](https://x.org \"t\\\" onclick=\\\"y\") and <me@example.com>");
    assert!(
        !html.contains("title") && !html.contains("onclick"),
        "{html}"
    );
    assert!(html.contains(r#"href="mailto:me@example.com""#), "{html}");
    let nested = render("[![img](https://x.org/a.png) and https://y.org](https://z.org)");
    assert_eq!(nested.matches("<a ").count(), 1, "{nested}");
    assert!(!render("[x](https:)").contains("href"));
    assert!(!render("http://[oops is not a host").contains("href"));
}

/// `html` with each tag's attributes in one order, and `&nbsp;` as the
/// character: what differs between two serialisations of one tree.
fn normal(html: &str) -> String {
    let html = html.replace("&nbsp;", "\u{a0}");
    let mut out = String::with_capacity(html.len());
    let mut rest = html.as_str();
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let is_tag = rest[1..].starts_with(|c: char| c.is_ascii_alphabetic());
        let Some(end) = rest.find('>').filter(|_| is_tag) else {
            out.push('<');
            rest = &rest[1..];
            continue;
        };
        let inner = &rest[1..end];
        let (name, mut attrs) = match inner.split_once(' ') {
            Some((name, attrs)) => (name, split_attributes(attrs)),
            None => (inner, Vec::new()),
        };
        attrs.sort();
        out.push('<');
        out.push_str(name);
        for a in attrs {
            out.push(' ');
            out.push_str(&a);
        }
        out.push('>');
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `a="x" b c="y"` as its attributes, each as written (values hold no `"`).
fn split_attributes(attrs: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = attrs.trim();
    while !rest.is_empty() {
        let end = match rest.find(['=', ' ']) {
            Some(i) if rest.as_bytes()[i] == b'=' => {
                let close = rest[i + 2..].find('"').expect("a quoted value");
                i + 2 + close + 1
            }
            Some(i) => i,
            None => rest.len(),
        };
        let (a, more) = rest.split_at(end);
        out.push(if a.contains('=') {
            a.to_owned()
        } else {
            format!("{a}=\"\"")
        });
        rest = more.trim_start();
    }
    out
}

/// Our output, and what ammonia makes of it, are one tree.
fn clean_already(text: &str) {
    let ours = render(text);
    let cleaned = cleaner().clean(&ours).to_string();
    assert_eq!(
        normal(&cleaned),
        normal(&ours),
        "ammonia changed the render of {text:?}"
    );
}

#[test]
fn ammonia_changes_nothing_of_the_fixtures() {
    #[cfg(feature = "cli")]
    clean_already(crate::bench::markdown::MESSAGE);
    for text in [
        "# Plan\n## Steps",
        "**bold** *em* ~~gone~~\nnext `x<y`",
        "| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |",
        "- [x] done\n- [ ] todo",
        "```rust\nfn main() { println!(\"<b>@x</b>\"); }\n```",
        "```x\" onclick=\"y\nz\n```",
        "[docs](https://example.com/a?b=1&c=2) and https://example.org/x.",
        "see troupe://thread/plans and [this](troupe://thread/q%203)",
        "<script>alert(1)</script>",
        "<div>\n<script>alert(1)</script>\n</div>",
        "[x](javascript:alert(1)) [x](JaVaScRiPt:alert(1)) <javascript:alert(1)> [x](/api/houses)",
        "[x](data:text/html,<script>alert(1)</script>)",
        r#"<img src=x onerror="alert(1)"> and <b onclick="x()">b</b> ![pic](https://example.com/a.png)"#,
        "@scribe, ask @ann.lee. Mail me@example.com; **@bold**",
        "Café — ok → ✓ @zoë h—ttp://x",
        "a\u{a0}b https://x.org/\u{a0}y &nbsp; &amp; &lt;p&gt; \"q\" 'a'",
        "line\r\nnext\rlast",
        "3. three\n4. four\n\n---\n\n> quote\n> > deeper",
        "https://x.org/a\"b'c`d\\e and [l](<https://x.org/a b>)",
    ] {
        clean_already(text);
    }
}

/// Messages made of every construct and hostile pieces, in many orders.
#[test]
fn ammonia_changes_nothing_of_generated_messages() {
    const PIECES: &[&str] = &[
        "# ",
        "## ",
        "#### ",
        "- ",
        "1. ",
        "> ",
        "- [ ] ",
        "- [x] ",
        "    ",
        "```",
        "```js\n",
        "~~~\n",
        "| a | b |\n|---|:-:|\n",
        "| ",
        " |",
        "**",
        "*",
        "_",
        "~~",
        "`",
        "[",
        "](",
        ")",
        "![",
        "<",
        ">",
        "</",
        "script>",
        "<a href=\"javascript:x\">",
        "<img src=x onerror=y>",
        "<!-- c -->",
        "<div>",
        "</div>",
        "&amp;",
        "&lt;",
        "&#60;",
        "&nbsp;",
        "\u{a0}",
        "\"",
        "'",
        "https://example.com/p?q=1&r=2",
        "http://[",
        "mailto:a@b.c",
        "troupe://thread/t",
        "javascript:alert(1)",
        "data:text/html,x",
        "@ada",
        "@",
        "me@x.org",
        "text",
        "word ",
        "Ünïcödé ",
        "\\",
        "\n",
        "\n\n",
        "  \n",
        "---",
        "[^1]",
        "<https://x.org>",
        "<a@b.c>",
        "[ref]\n\n[ref]: https://x.org \"title\"",
        "\t",
        "\r\n",
        "| x |",
        ":--",
        "$x$",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let n = 1 + (next() % 24) as usize;
        let text: String = (0..n)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        clean_already(&text);
    }
}

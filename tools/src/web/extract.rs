//! A page's main content as Markdown, with no model in between.
//!
//! `dom_smoothie` (a port of Mozilla's Readability) finds the article in the
//! page and drops its navigation, sidebars and footers; its Markdown mode
//! writes the article out. Its scoring costs several times a parse, so a
//! page over [`READABILITY_MAX_BYTES`] goes the cheaper way, one parse: the
//! page's landmarks say where its content is (`<article>`, `<main>`), and
//! navigation, headers, footers, sidebars and forms are dropped. That is also
//! the fallback when Readability finds no article (a list page, an app
//! shell, a short page), so a page is never answered with nothing.

use dom_smoothie::{Config, Readability, TextMode};

/// Fewer characters than this from the extractor means it missed: the whole
/// page is used instead.
const MIN_ARTICLE_CHARS: usize = 200;

/// Pages larger than this skip Readability for the one-parse extraction.
pub const READABILITY_MAX_BYTES: usize = 256 * 1024;

/// Boilerplate the one-parse extraction removes.
const BOILERPLATE: &str = "nav, header, footer, aside, form, [role=navigation], [role=banner], \
     [role=contentinfo], [role=complementary], [aria-hidden=true], .sidebar, #sidebar, .menu, \
     .navbar, .breadcrumb, .cookie-banner";

/// Where the content is, most specific first.
const CONTENT: &[&str] = &[
    "main article",
    "article",
    "main",
    "[role=main]",
    "#content",
    "body",
];

/// Elements the Markdown leaves out.
const SKIPPED: &[&str] = &[
    "script", "style", "meta", "head", "noscript", "template", "svg", "nav", "form", "iframe",
];

/// A page turned into Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The page's title, if it has one.
    pub title: String,
    /// The Markdown.
    pub markdown: String,
    /// Whether the article extractor found the main content (otherwise the
    /// whole page was used).
    pub article: bool,
}

/// Turns `html`, read from `url`, into Markdown of its main content.
pub fn html_to_markdown(html: &str, url: &str) -> Extracted {
    let config = Config {
        text_mode: TextMode::Markdown,
        ..Config::default()
    };
    let url = url.starts_with("http").then_some(url);
    if html.len() > READABILITY_MAX_BYTES {
        return whole_page(html);
    }
    if let Ok(mut readability) = Readability::new(html, url, Some(config)) {
        if let Ok(article) = readability.parse() {
            let markdown = tidy(&article.text_content);
            if markdown.chars().count() >= MIN_ARTICLE_CHARS {
                return Extracted {
                    title: article.title.trim().to_owned(),
                    markdown,
                    article: true,
                };
            }
        }
    }
    whole_page(html)
}

/// The page's content region as Markdown, its boilerplate removed (the
/// one-parse extraction and the fallback). `article` is set when the page
/// marked its content (`<article>`, `<main>`).
pub fn whole_page(html: &str) -> Extracted {
    let doc = dom_query::Document::from(html);
    let title = doc.select("title").text().trim().to_owned();
    doc.select(BOILERPLATE).remove();
    for (i, selector) in CONTENT.iter().enumerate() {
        let found = doc.select(selector);
        if let Some(node) = found.nodes().first() {
            return Extracted {
                title,
                markdown: tidy(&node.md(Some(SKIPPED))),
                article: i + 1 < CONTENT.len(),
            };
        }
    }
    Extracted {
        title,
        markdown: tidy(&doc.md(Some(SKIPPED))),
        article: false,
    }
}

/// Trims each line's end and folds runs of blank lines into one.
fn tidy(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut blank = 0;
    for line in markdown.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

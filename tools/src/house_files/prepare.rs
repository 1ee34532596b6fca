//! What a house file holds: text, a document (with its converted text) or
//! binary bytes, decided from its name and bytes before it is written.

use std::path::Path;

use troupe_runtime::store::house_files::{text_of, Indexing, NewFile};

/// `bytes` as the house file `path`: a document (PDF, Word, ODF,
/// spreadsheet, slides, EPUB, RTF, HTML) is converted to text for search
/// (a failed conversion is kept with its reason); UTF-8 text is indexed as
/// it is; anything else is binary. Blocking: run it off the async threads.
pub fn prepare(path: &str, bytes: Vec<u8>) -> NewFile {
    let name = Path::new(path);
    let ext = name
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let indexing = if crate::documents::is_document(name) {
        Indexing::Document(
            crate::documents::bytes_to_markdown(name, &bytes).map_err(|e| e.to_string()),
        )
    } else if matches!(ext.as_str(), "html" | "htm" | "xhtml") {
        match text_of(&bytes) {
            Some(t) => Indexing::Document(Ok(strip_html(t))),
            None => Indexing::Document(Err("the HTML is not UTF-8 text".into())),
        }
    } else if text_of(&bytes).is_some() {
        Indexing::Text
    } else {
        Indexing::Binary
    };
    NewFile {
        path: path.to_string(),
        bytes,
        indexing,
    }
}

/// The visible text of an HTML page: no tags, scripts or styles, the
/// common entities decoded, blank runs collapsed.
pub fn strip_html(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let rest = &lower[i..];
        if rest.starts_with("<script") || rest.starts_with("<style") {
            let close = if rest.starts_with("<script") {
                "</script"
            } else {
                "</style"
            };
            i += rest.find(close).map_or(rest.len(), |end| {
                end + rest[end..].find('>').map_or(rest.len() - end, |g| g + 1)
            });
            continue;
        }
        if rest.starts_with('<') {
            let tag_end = rest.find('>').map_or(rest.len(), |g| g + 1);
            let tag = &rest[..tag_end];
            if [
                "<p", "<br", "<div", "<li", "<h", "<tr", "</p", "</div", "</h",
            ]
            .iter()
            .any(|t| tag.starts_with(t))
            {
                out.push('\n');
            }
            i += tag_end;
            continue;
        }
        let next = rest.find('<').unwrap_or(rest.len());
        out.push_str(&html[i..i + next]);
        i += next;
    }
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    let mut text = String::with_capacity(decoded.len());
    for line in decoded.lines().map(str::trim).filter(|l| !l.is_empty()) {
        text.push_str(line);
        text.push('\n');
    }
    text
}

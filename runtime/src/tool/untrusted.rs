//! The block around what came from outside — a web page, a search engine,
//! an MCP server — so the model reads it as data to weigh, never as
//! instructions to follow.

/// The tag around text from outside.
pub const UNTRUSTED_TAG: &str = "untrusted_tool_result";

/// Wraps `body` in an `<untrusted_tool_result>` block with `attrs`. An
/// opening or closing tag inside the body is defused, so its author cannot
/// end the block early and speak as troupe.
pub fn untrusted(attrs: &[(&str, &str)], body: &str) -> String {
    let mut open = format!("<{UNTRUSTED_TAG}");
    for (name, value) in attrs {
        let value = value
            .replace('&', "&amp;")
            .replace('"', "&quot;")
            .replace('<', "&lt;");
        open.push_str(&format!(" {name}=\"{value}\""));
    }
    open.push('>');
    let body = defuse(body);
    let newline = if body.ends_with('\n') { "" } else { "\n" };
    format!("{open}\n{body}{newline}</{UNTRUSTED_TAG}>")
}

fn defuse(body: &str) -> String {
    if !body.contains(UNTRUSTED_TAG) {
        return body.to_owned();
    }
    body.replace(
        &format!("</{UNTRUSTED_TAG}"),
        &format!("&lt;/{UNTRUSTED_TAG}"),
    )
    .replace(
        &format!("<{UNTRUSTED_TAG}"),
        &format!("&lt;{UNTRUSTED_TAG}"),
    )
}

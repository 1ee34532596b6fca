//! EPUB to Markdown: the chapters in reading order.
//!
//! `META-INF/container.xml` names the package document (OPF); its manifest
//! maps ids to files and its spine lists the ids in reading order. Each
//! XHTML chapter of the spine goes through [`super::xhtml`]. A book with
//! DRM (an `encryption.xml` that covers its chapters) cannot be read.

use std::collections::HashMap;

use super::markdown::Markdown;
use super::package::{resolve, Package};
use super::xhtml;
use super::xml;
use super::Failure;

/// Converts an EPUB package.
pub(crate) fn convert(bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let mut package = Package::open(bytes)?;
    let container = package.required_xml("META-INF/container.xml")?;
    let opf_path = container
        .find("rootfile")
        .and_then(|r| r.attr("full-path"))
        .map(|p| resolve("", p))
        .ok_or_else(|| Failure::corrupt("META-INF/container.xml names no rootfile"))?;
    let opf = package.required_xml(&opf_path)?;
    let dir = opf_path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");

    let mut manifest: HashMap<String, (String, String)> = HashMap::new();
    if let Some(items) = opf.child("manifest") {
        for item in items.elements().filter(|el| el.name == "item") {
            if let (Some(id), Some(href)) = (item.attr("id"), item.attr("href")) {
                let media = item.attr("media-type").unwrap_or_default().to_string();
                manifest.insert(id.to_string(), (resolve(dir, href), media));
            }
        }
    }
    let spine: Vec<String> = opf
        .child("spine")
        .map(|s| {
            s.elements()
                .filter(|el| el.name == "itemref")
                .filter_map(|el| el.attr("idref").map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if spine.is_empty() {
        return Err(Failure::corrupt(format!("{opf_path} has an empty spine")));
    }
    let encrypted = encrypted_parts(&mut package)?;

    for idref in spine {
        if md.is_full() {
            break;
        }
        let Some((part, media)) = manifest.get(&idref) else {
            continue;
        };
        if !(media.contains("html") || media.is_empty()) {
            continue;
        }
        if encrypted.iter().any(|e| e == part) {
            return Err(Failure::Encrypted);
        }
        let Some(chapter) = package.bytes(part)? else {
            continue;
        };
        let root = xml::parse(&chapter).map_err(|e| Failure::corrupt(format!("{part}: {e}")))?;
        xhtml::convert(&root, md);
    }
    Ok(())
}

/// The parts `META-INF/encryption.xml` lists as encrypted (fonts are often
/// obfuscated this way, which does not stop reading the text).
fn encrypted_parts(package: &mut Package<'_>) -> Result<Vec<String>, Failure> {
    let Some(encryption) = package.xml("META-INF/encryption.xml")? else {
        return Ok(Vec::new());
    };
    let mut refs = Vec::new();
    encryption.find_all("CipherReference", &mut refs);
    Ok(refs
        .into_iter()
        .filter_map(|r| r.attr("URI").map(|uri| resolve("", uri)))
        .collect())
}

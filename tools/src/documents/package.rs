//! The zip container of DOCX, PPTX, ODF and EPUB.
//!
//! Each of these formats is a zip of XML parts. Reading a part is bounded
//! (a zip bomb stops at [`MAX_PART_BYTES`]), and a password-protected Office
//! file, which is an OLE compound file rather than a zip, is recognized so
//! the user hears "encrypted" instead of "corrupt".

use std::io::{Cursor, Read};

use zip::result::ZipError;
use zip::ZipArchive;

use super::xml::{self, Element};
use super::Failure;

/// The most bytes one part may unpack to (64 MiB).
pub(crate) const MAX_PART_BYTES: u64 = 64 * 1024 * 1024;

/// The magic number of an OLE compound file, the container of encrypted
/// OOXML files (and of legacy .doc/.xls).
const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// An opened zip package.
pub(crate) struct Package<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
}

impl<'a> Package<'a> {
    /// Opens `bytes` as a zip.
    pub(crate) fn open(bytes: &'a [u8]) -> Result<Self, Failure> {
        if bytes.starts_with(&OLE_MAGIC) {
            return Err(Failure::Encrypted);
        }
        match ZipArchive::new(Cursor::new(bytes)) {
            Ok(archive) => Ok(Self { archive }),
            Err(e) => Err(Failure::Corrupt(format!("not a valid zip package ({e})"))),
        }
    }

    /// The names of the parts, in the zip's order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .filter_map(|name| name.ok().map(|n| n.into_owned()))
            .collect()
    }

    /// A part's bytes, or `None` when the package has no such part.
    pub(crate) fn bytes(&mut self, name: &str) -> Result<Option<Vec<u8>>, Failure> {
        let file = match self.archive.by_name(name) {
            Ok(file) => file,
            Err(ZipError::FileNotFound) => return Ok(None),
            Err(ZipError::UnsupportedArchive(what)) if what.contains("assword") => {
                return Err(Failure::Encrypted)
            }
            Err(e) => return Err(Failure::Corrupt(format!("cannot unpack {name} ({e})"))),
        };
        let mut out = Vec::new();
        file.take(MAX_PART_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| Failure::Corrupt(format!("cannot unpack {name} ({e})")))?;
        if out.len() as u64 > MAX_PART_BYTES {
            return Err(Failure::Corrupt(format!(
                "{name} unpacks to more than {MAX_PART_BYTES} bytes"
            )));
        }
        Ok(Some(out))
    }

    /// A part parsed as XML, or `None` when the package has no such part.
    pub(crate) fn xml(&mut self, name: &str) -> Result<Option<Element>, Failure> {
        match self.bytes(name)? {
            Some(bytes) => xml::parse(&bytes)
                .map(Some)
                .map_err(|e| Failure::Corrupt(format!("{name}: {e}"))),
            None => Ok(None),
        }
    }

    /// A part that must be there, parsed as XML.
    pub(crate) fn required_xml(&mut self, name: &str) -> Result<Element, Failure> {
        self.xml(name)?
            .ok_or_else(|| Failure::Corrupt(format!("the package has no {name}")))
    }

    /// The relationships of `part` (`word/document.xml` →
    /// `word/_rels/document.xml.rels`) as (id, type, resolved target).
    pub(crate) fn relationships(
        &mut self,
        part: &str,
    ) -> Result<Vec<(String, String, String)>, Failure> {
        let (dir, file) = match part.rsplit_once('/') {
            Some((dir, file)) => (dir, file),
            None => ("", part),
        };
        let rels_name = if dir.is_empty() {
            format!("_rels/{file}.rels")
        } else {
            format!("{dir}/_rels/{file}.rels")
        };
        let Some(rels) = self.xml(&rels_name)? else {
            return Ok(Vec::new());
        };
        Ok(rels
            .elements()
            .filter(|el| el.name == "Relationship")
            .filter(|el| el.attr("TargetMode") != Some("External"))
            .filter_map(|el| {
                let id = el.attr("Id")?.to_string();
                let kind = el.attr("Type").unwrap_or_default().to_string();
                let target = resolve(dir, el.attr("Target")?);
                Some((id, kind, target))
            })
            .collect())
    }
}

/// Resolves a relative part name against the folder `dir` (`ppt` +
/// `slides/slide1.xml` → `ppt/slides/slide1.xml`; `/x` is from the root),
/// decoding `%XX` escapes.
pub(crate) fn resolve(dir: &str, target: &str) -> String {
    let target = percent_decode(target);
    let target = target.split('#').next().unwrap_or_default();
    let mut parts: Vec<&str> = Vec::new();
    let joined;
    let full = if let Some(absolute) = target.strip_prefix('/') {
        absolute
    } else {
        joined = if dir.is_empty() {
            target.to_string()
        } else {
            format!("{dir}/{target}")
        };
        joined.as_str()
    };
    for piece in full.split('/') {
        match piece {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Decodes `%XX` escapes (as in EPUB and OPC hrefs).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(byte) = u8::from_str_radix(hex, 16) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

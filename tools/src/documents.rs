//! Documents read as Markdown: PDF, Word, PowerPoint, spreadsheets,
//! OpenDocument, RTF and EPUB.
//!
//! `read_file` and `find_files` hand a model text; a document is a binary
//! container of text. This module turns each supported format into plain
//! Markdown (headings, paragraphs, lists, tables, one section per slide,
//! sheet or page) so the model reads it like any other file and ripgrep can
//! search it. Conversion is bounded: inputs over [`MAX_INPUT_BYTES`] are
//! refused, every part unpacked from a zip is capped, and the output stops at
//! [`MAX_MARKDOWN_BYTES`] with a note saying so. A converter that panics on a
//! malformed file is caught and reported as a corrupt file.
//!
//! The conversion cache ([`read_cached`], [`cached`]) keeps each document's
//! Markdown in the home's `documents/` folder until the file changes, so a
//! search over a folder of documents converts each one once.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

mod cache;
mod compound_file;
mod docx;
mod epub;
mod markdown;
mod odf;
mod ods_guard;
mod package;
mod pdf;
mod pptx;
mod rtf;
mod spreadsheet;
mod xhtml;
mod xls_guard;
mod xml;

pub use cache::{cached, read_cached, CachedDocument};

use markdown::Markdown;

/// The largest file converted, in bytes (50 MiB).
pub const MAX_INPUT_BYTES: u64 = 50 * 1024 * 1024;

/// The most Markdown kept from one document, in bytes (16 MiB); the rest is
/// cut with a note at the end.
pub const MAX_MARKDOWN_BYTES: usize = 16 * 1024 * 1024;

/// A document format this module converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// PDF (`.pdf`): the text layer, one section per page.
    Pdf,
    /// Word (`.docx`, `.docm`).
    Docx,
    /// PowerPoint (`.pptx`, `.pptm`): one section per slide.
    Pptx,
    /// A spreadsheet (`.xlsx`, `.xlsm`, `.xlsb`, `.xls`, `.ods`): one section
    /// and one table per sheet.
    Spreadsheet,
    /// OpenDocument text (`.odt`).
    Odt,
    /// OpenDocument presentation (`.odp`): one section per slide.
    Odp,
    /// Rich Text Format (`.rtf`).
    Rtf,
    /// EPUB book (`.epub`): its chapters in reading order.
    Epub,
}

impl Format {
    /// The format a path's extension names (case-insensitive), if it is a
    /// document this module converts.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "pdf" => Format::Pdf,
            "docx" | "docm" => Format::Docx,
            "pptx" | "pptm" => Format::Pptx,
            "xlsx" | "xlsm" | "xlsb" | "xls" | "ods" => Format::Spreadsheet,
            "odt" => Format::Odt,
            "odp" => Format::Odp,
            "rtf" => Format::Rtf,
            "epub" => Format::Epub,
            _ => return None,
        })
    }

    /// A short name used in cache headers and logs.
    pub fn id(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Pptx => "pptx",
            Format::Spreadsheet => "spreadsheet",
            Format::Odt => "odt",
            Format::Odp => "odp",
            Format::Rtf => "rtf",
            Format::Epub => "epub",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Pdf => "PDF",
            Format::Docx => "Word document (DOCX)",
            Format::Pptx => "PowerPoint presentation (PPTX)",
            Format::Spreadsheet => "spreadsheet",
            Format::Odt => "OpenDocument text (ODT)",
            Format::Odp => "OpenDocument presentation (ODP)",
            Format::Rtf => "RTF document",
            Format::Epub => "EPUB book",
        })
    }
}

/// Why a document could not be read as Markdown.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The extension is not one of the document formats.
    #[error(
        "{path} is not a document troupe converts (pdf, docx, pptx, xlsx, xls, ods, odt, odp, \
         rtf, epub); read it as a plain file instead"
    )]
    NotADocument {
        /// The file.
        path: PathBuf,
    },
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}; check that the file exists and is readable")]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The file is over [`MAX_INPUT_BYTES`].
    #[error(
        "{path} is a {format} of {size} bytes, over the {limit}-byte limit for conversion; \
         split it or export the part you need to text"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: Format,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The document is protected by a password.
    #[error(
        "{path} is a password-protected {format}; ask the user for a copy saved without the \
         password"
    )]
    Encrypted {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: Format,
    },
    /// The file is damaged, misnamed, or uses a part of the format the
    /// converter cannot read.
    #[error(
        "{path} could not be read as a {format}: {reason}; check that the file is not damaged \
         and that its extension matches its content (re-saving it in its program often helps)"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The format its extension names.
        format: Format,
        /// What failed.
        reason: String,
    },
    /// Small on disk, but what it describes is larger than troupe reads
    /// (a sheet of repeated rows and columns, say).
    #[error(
        "{path} is a {format} too large to read: {reason}; export the part you need \
         (one sheet as CSV, say) and read that"
    )]
    Oversized {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: Format,
        /// What it would build.
        reason: String,
    },
    /// The conversion cache could not be written or read.
    #[error(
        "cannot keep the converted text of a document in {path}: {source}; check that the \
         home's documents/ folder is writable"
    )]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// Why a converter stopped, before the file and format are attached.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The file is not well-formed for its format.
    Corrupt(String),
    /// The document needs a password.
    Encrypted,
    /// Reading it would build more than troupe reads (the reason says what).
    Oversized(String),
}

impl Failure {
    /// A corrupt-file failure from anything displayable.
    pub(crate) fn corrupt(reason: impl fmt::Display) -> Self {
        Failure::Corrupt(reason.to_string())
    }
}

/// Whether `path` names a document this module converts, by its extension
/// (case-insensitive). It does not look at the file.
pub fn is_document(path: &Path) -> bool {
    Format::of(path).is_some()
}

/// Converts the document at `path` to Markdown, without the cache.
///
/// Refuses files over [`MAX_INPUT_BYTES`]; the output is capped at
/// [`MAX_MARKDOWN_BYTES`].
pub fn to_markdown(path: &Path) -> Result<String, DocumentError> {
    let format = Format::of(path).ok_or_else(|| DocumentError::NotADocument {
        path: path.to_path_buf(),
    })?;
    let bytes = read_bounded(path, format)?;
    convert_bytes(path, format, &bytes)
}

/// Converts a document held in memory to Markdown; `name`'s extension
/// tells its format (a house file, which has no local path).
pub fn bytes_to_markdown(name: &Path, bytes: &[u8]) -> Result<String, DocumentError> {
    let format = Format::of(name).ok_or_else(|| DocumentError::NotADocument {
        path: name.to_path_buf(),
    })?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(DocumentError::TooLarge {
            path: name.to_path_buf(),
            format,
            size: bytes.len() as u64,
            limit: MAX_INPUT_BYTES,
        });
    }
    convert_bytes(name, format, bytes)
}

/// Reads a document's bytes, refusing files over [`MAX_INPUT_BYTES`].
fn read_bounded(path: &Path, format: Format) -> Result<Vec<u8>, DocumentError> {
    let read_error = |source| DocumentError::Read {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read_error)?.len();
    if size > MAX_INPUT_BYTES {
        return Err(DocumentError::TooLarge {
            path: path.to_path_buf(),
            format,
            size,
            limit: MAX_INPUT_BYTES,
        });
    }
    std::fs::read(path).map_err(read_error)
}

/// Runs the converter for `format` over `bytes`, catching its panics.
pub(crate) fn convert_bytes(
    path: &Path,
    format: Format,
    bytes: &[u8],
) -> Result<String, DocumentError> {
    let run = || convert_unguarded(path, format, bytes);
    let outcome = catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".to_string());
        tracing::warn!(path = %path.display(), format = format.id(), panic = %what, "document converter panicked");
        Err(Failure::Corrupt(format!(
            "the converter stopped on a structure it does not handle ({what})"
        )))
    });
    outcome.map_err(|failure| match failure {
        Failure::Corrupt(reason) => DocumentError::Corrupt {
            path: path.to_path_buf(),
            format,
            reason,
        },
        Failure::Encrypted => DocumentError::Encrypted {
            path: path.to_path_buf(),
            format,
        },
        Failure::Oversized(reason) => DocumentError::Oversized {
            path: path.to_path_buf(),
            format,
            reason,
        },
    })
}

/// Runs the converter for `format` over `bytes`; a panic goes through (the
/// fuzz targets want to see it).
pub(crate) fn convert_unguarded(
    path: &Path,
    format: Format,
    bytes: &[u8],
) -> Result<String, Failure> {
    let mut md = Markdown::new(MAX_MARKDOWN_BYTES);
    match format {
        Format::Pdf => pdf::convert(bytes, &mut md),
        Format::Docx => docx::convert(bytes, &mut md),
        Format::Pptx => pptx::convert(bytes, &mut md),
        Format::Spreadsheet => spreadsheet::convert(path, bytes, &mut md),
        Format::Odt | Format::Odp => odf::convert(bytes, &mut md),
        Format::Rtf => rtf::convert(bytes, &mut md),
        Format::Epub => epub::convert(bytes, &mut md),
    }
    .map(|()| md.finish())
}

/// One XHTML page (an EPUB chapter) as Markdown, as the EPUB converter reads
/// each chapter.
#[cfg(test)]
pub(crate) fn xhtml_to_markdown(bytes: &[u8]) -> Result<String, Failure> {
    let root = xml::parse(bytes).map_err(Failure::corrupt)?;
    let mut md = Markdown::new(MAX_MARKDOWN_BYTES);
    xhtml::convert(&root, &mut md);
    Ok(md.finish())
}

/// Lays an `.xls` out again as the spreadsheet converter does before
/// calamine reads it, without the panic guard (the `xls` fuzz target wants
/// to see a panic of troupe's own), and checks that laying the result out
/// again changes nothing: what the layout writes, it reads as it meant.
#[cfg(test)]
pub(crate) fn lay_out_xls_twice(bytes: &[u8]) {
    if let Ok(once) = xls_guard::rebuild(bytes) {
        let twice = xls_guard::rebuild(&once.file).map(|again| again.file);
        assert!(
            twice.as_ref().is_ok_and(|file| *file == once.file),
            "laid out again, a laid-out workbook changed: {:?}",
            twice.err()
        );
    }
}

/// Measures an `.ods` as the guard does, without the panic guard (the
/// `ods` fuzz target wants to see a panic of troupe's own): the cells
/// calamine would build, or `None` when the guard refuses it.
#[cfg(test)]
pub(crate) fn measure_ods(bytes: &[u8]) -> Option<u64> {
    ods_guard::check(bytes).ok()?;
    let mut package = package::Package::open(bytes).ok()?;
    let content = package.bytes("content.xml").ok()??;
    Some(ods_guard::measure(&content).ok()?.cells)
}

#[cfg(test)]
#[path = "documents_tests.rs"]
pub(crate) mod tests;

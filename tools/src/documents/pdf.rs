//! PDF to Markdown: the text layer, one `## Page N` section per page.
//!
//! pdf-extract (over lopdf) places the glyphs of each page using its fonts'
//! encodings and ToUnicode maps, which plain content-stream scraping gets
//! wrong. A PDF protected only by an owner password (the empty user
//! password) opens; one that needs a password to open is reported as
//! encrypted. A page the extractor cannot read is noted and skipped rather
//! than failing the whole document, and a PDF with no text at all (a scan)
//! says so.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pdf_extract::{output_doc_page, Document, Error as PdfError, PlainTextOutput};

use super::markdown::Markdown;
use super::Failure;

/// Converts a PDF's bytes.
pub(crate) fn convert(bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    if !bytes.starts_with(b"%PDF") && !bytes.windows(5).take(1024).any(|w| w == b"%PDF-") {
        return Err(Failure::corrupt("it has no %PDF header"));
    }
    let mut doc = Document::load_mem(bytes).map_err(load_failure)?;
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(Failure::Encrypted);
    }
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut any_text = false;
    for number in pages {
        if md.is_full() {
            break;
        }
        let mut text = String::new();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut output = PlainTextOutput::new(&mut text);
            output_doc_page(&doc, &mut output, number)
        }));
        match outcome {
            Ok(Ok(())) => {
                let text = tidy(&text);
                if !text.is_empty() {
                    any_text = true;
                    md.heading(2, &format!("Page {number}"));
                    for paragraph in text.split("\n\n") {
                        md.paragraph(paragraph);
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::debug!(page = number, error = %e, "pdf page not extracted");
                md.heading(2, &format!("Page {number}"));
                md.paragraph("(this page's text could not be extracted)");
            }
            Err(_) => {
                md.heading(2, &format!("Page {number}"));
                md.paragraph("(this page's text could not be extracted)");
            }
        }
    }
    if !any_text && !md.is_full() {
        md.paragraph(
            "(this PDF has no text layer: it is probably scanned images; OCR would be needed to \
             read it)",
        );
    }
    Ok(())
}

fn load_failure(error: PdfError) -> Failure {
    match error {
        PdfError::Decryption(_) => Failure::Encrypted,
        other => Failure::corrupt(other),
    }
}

/// Trims line ends and keeps at most one blank line in a row.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    for line in text.lines().map(str::trim_end) {
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line.trim_start());
    }
    out
}

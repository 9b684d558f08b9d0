//! The text of a PDF document, page by page, through `pdf-extract` (pure Rust, on `lopdf`).
//!
//! A PDF the extractor cannot read, or one that makes it panic (it has panics on malformed
//! input), is an error the caller describes; the plugin keeps running either way.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Why a PDF's text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PdfError(String);

/// The text of each page of the PDF in `bytes`.
pub fn pages(bytes: &[u8]) -> Result<Vec<String>, PdfError> {
    match catch_unwind(AssertUnwindSafe(|| pdf_extract::extract_text_from_mem_by_pages(bytes))) {
        Ok(Ok(pages)) => Ok(pages),
        Ok(Err(error)) => Err(PdfError(error.to_string())),
        Err(payload) => {
            let reason = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("the PDF reader failed");
            Err(PdfError(reason.to_owned()))
        }
    }
}

/// A PDF read as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    /// How many pages it has.
    pub pages: usize,
    /// The pages' text, each page after a `[page N]` line when there are several, blank-line
    /// runs collapsed; `None` when no page has any text (a scan, say).
    pub text: Option<String>,
}

/// The text of the PDF in `bytes`.
pub fn text(bytes: &[u8]) -> Result<PdfText, PdfError> {
    let pages = pages(bytes)?;
    let several = pages.len() > 1;
    let mut out = String::new();
    for (number, page) in pages.iter().enumerate() {
        let page = tidy(page);
        if page.is_empty() {
            continue;
        }
        if several {
            out.push_str(&format!("[page {}]\n", number + 1));
        }
        out.push_str(&page);
        out.push_str("\n\n");
    }
    let out = out.trim_end().to_owned();
    Ok(PdfText { pages: pages.len(), text: (!out.is_empty()).then_some(out) })
}

/// A page's text with trailing spaces cut and runs of blank lines made one.
fn tidy(page: &str) -> String {
    crate::blank_lines::collapse_blank_lines(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_a_pdf_are_an_error_not_a_panic() {
        assert!(pages(b"%PDF-1.4\nthis is not really a pdf").is_err());
        assert!(text(b"").is_err());
    }

    #[test]
    fn pages_are_tidied() {
        assert_eq!(tidy("  \n\nOne  \n\n\n\nTwo\n\n"), "One\n\nTwo");
    }
}

//! Decoding a fetched body to text by its character encoding: a byte-order mark, else the
//! `charset` of the `Content-Type` header, else (HTML) a `<meta charset>` or
//! `<meta http-equiv="Content-Type">` in the first 1024 bytes, else UTF-8 when the bytes are
//! valid UTF-8, else windows-1252 (what browsers assume for unlabelled legacy pages).
//!
//! Labels are resolved as the WHATWG Encoding Standard says (`encoding_rs`): `iso-8859-1` and
//! `latin1` mean windows-1252, `sjis` means Shift_JIS, and so on.

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};

/// How many bytes of an HTML page are searched for a `<meta>` charset (as browsers do).
const META_PRESCAN_BYTES: usize = 1024;

/// `body` as text, decoded as described in the module docs; `charset` is the header's
/// parameter, `html` whether the body is HTML (so its `<meta>` may name the encoding).
pub fn decode(body: &[u8], charset: Option<&str>, html: bool) -> String {
    encoding(body, charset, html).decode(body).0.into_owned()
}

/// The encoding `body` is in.
pub fn encoding(body: &[u8], charset: Option<&str>, html: bool) -> &'static Encoding {
    if let Some((bom, _)) = Encoding::for_bom(body) {
        return bom;
    }
    if let Some(declared) = charset.and_then(|label| Encoding::for_label(label.trim().as_bytes())) {
        return declared;
    }
    if html && let Some(meta) = meta_charset(&body[..body.len().min(META_PRESCAN_BYTES)]) {
        // A page cannot declare UTF-16 in ASCII bytes; the standard reads it as UTF-8.
        return meta.output_encoding();
    }
    if std::str::from_utf8(body).is_ok() { UTF_8 } else { WINDOWS_1252 }
}

/// The encoding named by the first `<meta>` tag with a `charset=` in `head`: `<meta
/// charset="x">` or `<meta http-equiv="Content-Type" content="text/html; charset=x">`.
fn meta_charset(head: &[u8]) -> Option<&'static Encoding> {
    let lower = head.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = find(&lower[from..], b"<meta") {
        let start = from + found;
        let end = find(&lower[start..], b">").map_or(lower.len(), |end| start + end);
        if let Some(label) = charset_in(&lower[start..end])
            && let Some(encoding) = Encoding::for_label(label)
        {
            return Some(encoding);
        }
        from = end;
    }
    None
}

/// The value after `charset=` in a tag, without quotes, up to a quote, space, `;` or `/`.
fn charset_in(tag: &[u8]) -> Option<&[u8]> {
    let at = find(tag, b"charset")? + b"charset".len();
    let rest = tag[at..].trim_ascii_start().strip_prefix(b"=")?.trim_ascii_start();
    let rest = rest.strip_prefix(b"\"").or_else(|| rest.strip_prefix(b"'")).unwrap_or(rest);
    let len = rest.iter().position(|b| matches!(b, b'"' | b'\'' | b';' | b'/') || b.is_ascii_whitespace());
    let label = &rest[..len.unwrap_or(rest.len())];
    (!label.is_empty()).then_some(label)
}

/// The offset of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_charset_decides_and_latin1_means_windows_1252() {
        assert_eq!(decode(b"caf\xe9 \x80", Some("ISO-8859-1"), false), "café €");
        assert_eq!(decode(b"\x93\xfa\x96\x7b", Some("shift_jis"), false), "日本");
    }

    #[test]
    fn a_meta_charset_is_read_from_an_html_head_in_either_spelling() {
        let page = b"<html><head><meta charset='windows-1252'><title>Caf\xe9</title>";
        assert_eq!(encoding(page, None, true), WINDOWS_1252);
        let page = b"<html><head><META http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\">";
        assert_eq!(encoding(page, None, true).name(), "Shift_JIS");
        assert_eq!(encoding(page, None, false), UTF_8, "only HTML declares its charset in a meta tag");
    }

    #[test]
    fn a_byte_order_mark_wins_over_a_declaration() {
        assert_eq!(decode(b"\xef\xbb\xbfcaf\xc3\xa9", Some("windows-1252"), false), "café");
        assert_eq!(decode(b"\xff\xfeh\0i\0", None, false), "hi");
    }

    #[test]
    fn undeclared_bytes_are_utf8_when_valid_else_windows_1252() {
        assert_eq!(decode("café".as_bytes(), None, true), "café");
        assert_eq!(decode(b"caf\xe9", None, true), "café");
        assert_eq!(decode(b"caf\xe9", Some("no-such-charset"), false), "café");
    }

    #[test]
    fn a_meta_utf16_declaration_reads_as_utf8() {
        assert_eq!(encoding(b"<meta charset=utf-16><p>x", None, true), UTF_8);
    }
}

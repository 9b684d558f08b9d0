//! Scrubbing secrets from provider errors, as they are and encoded.

use super::*;

#[test]
fn every_secret_is_replaced_and_short_placeholders_are_left_alone() {
    let secrets = Secrets::new(["sk-live-0123456789".to_owned(), "k".to_owned(), "team-secret".to_owned()]);
    let text = "401: got header Authorization: Bearer sk-live-0123456789 and x-team: team-secret (key k)";
    assert_eq!(secrets.scrub(text), "401: got header Authorization: Bearer [redacted] and x-team: [redacted] (key k)");
}

#[test]
fn a_key_containing_another_is_replaced_whole() {
    let secrets = Secrets::new(["abcdef".to_owned(), "abcdef-ghijkl".to_owned()]);
    assert_eq!(secrets.scrub("abcdef-ghijkl / abcdef"), "[redacted] / [redacted]");
}

#[test]
fn every_error_variant_with_text_is_scrubbed() {
    let secrets = Secrets::new(["sk-secret-key".to_owned()]);
    let error = secrets.scrub_error(ProviderError::Rejected { status: 400, message: "bad sk-secret-key".into() });
    assert_eq!(error.to_string(), "provider rejected the request (400): bad [redacted]");
    let error = secrets.scrub_error(ProviderError::Network("proxy said sk-secret-key".into()));
    assert!(!error.to_string().contains("sk-secret-key"));
}

/// A key whose standard base64 has a `+` and whose URL-encoding differs from it.
const KEY: &str = "sk-Oxi/Test+Key=0123456789abcdef~GHIJ";

fn scrubbed(text: &str) -> String {
    Secrets::new([KEY.to_owned()]).scrub(text)
}

#[test]
fn base64_of_the_key_is_replaced_padded_or_not_and_url_safe() {
    // Computed with Python's `base64.b64encode` and `base64.urlsafe_b64encode`.
    assert_eq!(scrubbed("got c2stT3hpL1Rlc3QrS2V5PTAxMjM0NTY3ODlhYmNkZWZ+R0hJSg== here"), "got [redacted] here");
    assert_eq!(scrubbed("got c2stT3hpL1Rlc3QrS2V5PTAxMjM0NTY3ODlhYmNkZWZ+R0hJSg."), "got [redacted].");
    assert_eq!(scrubbed("got c2stT3hpL1Rlc3QrS2V5PTAxMjM0NTY3ODlhYmNkZWZ-R0hJSg"), "got [redacted]");
}

#[test]
fn base64_of_the_key_behind_a_prefix_is_replaced_at_every_alignment() {
    let bearer = "QmVhcmVyIHNrLU94aS9UZXN0K0tleT0wMTIzNDU2Nzg5YWJjZGVmfkdISUo=";
    let basic = "dXNlcjpzay1PeGkvVGVzdCtLZXk9MDEyMzQ1Njc4OWFiY2RlZn5HSElK";
    let json = "eyJrZXkiOiJzay1PeGkvVGVzdCtLZXk9MDEyMzQ1Njc4OWFiY2RlZn5HSElKIn0=";
    assert_eq!(scrubbed(&format!("auth={bearer};")), "auth=[redacted];");
    assert_eq!(scrubbed(&format!("Authorization: Basic {basic}")), "Authorization: Basic [redacted]");
    assert_eq!(scrubbed(&format!("body {json}")), "body [redacted]");
}

#[test]
fn url_encoded_keys_are_replaced_whatever_is_escaped_and_in_either_case() {
    assert_eq!(scrubbed("key=sk-Oxi%2FTest%2BKey%3D0123456789abcdef~GHIJ&x=1"), "key=[redacted]&x=1");
    assert_eq!(scrubbed("key=sk-Oxi%2fTest+Key%3d0123456789abcdef%7EGHIJ"), "key=[redacted]");
    let every_byte: String = KEY.bytes().map(|b| format!("%{b:02x}")).collect();
    assert_eq!(scrubbed(&format!("({every_byte})")), "([redacted])");
}

#[test]
fn hex_of_the_key_is_replaced_in_either_case() {
    let hex = "736b2d4f78692f546573742b4b65793d303132333435363738396162636465667e4748494a";
    assert_eq!(scrubbed(&format!("raw {hex} end")), "raw [redacted] end");
    assert_eq!(scrubbed(&format!("raw 0x{} end", hex.to_uppercase())), "raw 0x[redacted] end");
    assert_eq!(scrubbed(&format!("bearer 426561726572{hex}")), "bearer [redacted]", "`Bearer ` in hex goes too");
}

#[test]
fn the_key_in_another_case_is_replaced() {
    assert_eq!(
        scrubbed(&format!("KEY {} key {}", KEY.to_uppercase(), KEY.to_lowercase())),
        "KEY [redacted] key [redacted]"
    );
}

#[test]
fn escaped_keys_are_replaced() {
    let unicode: String = KEY.bytes().map(|b| format!("\\u{b:04x}")).collect();
    let c_style: String = KEY.bytes().map(|b| format!("\\x{b:02X}")).collect();
    assert_eq!(scrubbed(&format!("\"{unicode}\"")), "\"[redacted]\"");
    assert_eq!(scrubbed(&format!("b'{c_style}'")), "b'[redacted]'");
    assert_eq!(scrubbed(r#"{"key":"sk-Oxi\/Test+Key=0123456789abcdef~GHIJ"}"#), r#"{"key":"[redacted]"}"#);
}

#[test]
fn a_start_or_end_of_eight_characters_next_to_a_mask_is_replaced_with_the_mask() {
    assert_eq!(scrubbed("key sk-Oxi/Test+K****89abcdef~GHIJ is wrong"), "key [redacted] is wrong");
    assert_eq!(scrubbed("key sk-Oxi/Te...cdef~GHIJ."), "key [redacted].");
    assert_eq!(scrubbed("key sk-Oxi/Test… rejected"), "key [redacted] rejected");
    assert_eq!(scrubbed("key xxxxxxxx89abcdef~GHIJ"), "key [redacted]");
    assert_eq!(scrubbed("key •••• 89abcdef~GHIJ"), "key [redacted]");
    assert_eq!(scrubbed("key —·89abcdef~GHIJ"), "key —[redacted]", "a mask after another wide character");
    assert_eq!(scrubbed("key SK-OXI/TEST****"), "key [redacted]", "in any case");
    assert_eq!(scrubbed("cut base64 c2stT3hpL1Rlc3QrS2V5…"), "cut base64 [redacted]");
}

#[test]
fn short_starts_and_ends_and_unrelated_masks_stay() {
    for text in ["key sk-O...GHIJ", "key sk-Oxi/** here", "**bold** and ... and xxx", "sk-Oxi/Test+Key unmasked"] {
        assert_eq!(scrubbed(text), text);
    }
}

#[test]
fn text_without_the_key_is_unchanged_and_other_characters_survive() {
    let text = "résumé… naïve 😀 — © ·· c2stT3hpL1Rlc3 736b2d4f 0123456789abcdef ***";
    assert_eq!(scrubbed(text), text);
    assert_eq!(scrubbed(&format!("😀{KEY}é")), "😀[redacted]é");
}

#[test]
fn the_debug_form_names_no_secret() {
    let shown = format!("{:?}", Secrets::new([KEY.to_owned()]));
    assert!(!shown.contains("sk-Oxi"), "{shown}");
}

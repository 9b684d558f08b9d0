//! The anti-spoofing check: a mail counts as from its `From:` domain only when an
//! `Authentication-Results` header (RFC 8601) written by a trusted server (its authserv-id in
//! `trustedAuthservIds`) says `dkim=pass` for that domain (`header.d`, or `header.i`) and
//! `spf=pass` for it (`smtp.mailfrom`), a subdomain on either side counting as aligned.
//!
//! Only the trusted server's own headers are read: the topmost run of adjacent
//! `Authentication-Results` headers bearing a trusted authserv-id. A receiving server prepends
//! its headers above the mail it got, so a header the sender wrote with the same authserv-id
//! sits lower, behind the server's `Received:` line or other headers, and is not believed (RFC
//! 8601, section 7.1). A server that adds no header of its own cannot be told from a forgery:
//! the checks need one that does.

/// What the trusted headers of one mail say about its sender's domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// An aligned `dkim=pass`.
    pub dkim: bool,
    /// An aligned `spf=pass`.
    pub spf: bool,
}

/// Reads a mail's headers `headers` (name and value, top first) for mail from
/// `sender_domain`, believing only the topmost `Authentication-Results` headers written by one
/// of `trusted` (lowercase authserv-ids).
pub fn verdict<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    sender_domain: &str,
    trusted: &[String],
) -> Verdict {
    let mut verdict = Verdict::default();
    for header in topmost_trusted(headers, trusted) {
        for statement in header.split(';').skip(1) {
            let mut words = statement.split_whitespace();
            let Some((method, result)) = words.next().and_then(|word| word.split_once('=')) else { continue };
            if !result.eq_ignore_ascii_case("pass") {
                continue;
            }
            let properties: Vec<(&str, &str)> = words.filter_map(|word| word.split_once('=')).collect();
            let property = |names: &[&str]| {
                properties
                    .iter()
                    .find(|(name, _)| names.iter().any(|wanted| name.eq_ignore_ascii_case(wanted)))
                    .map(|(_, v)| *v)
            };
            match method.to_lowercase().as_str() {
                "dkim" => {
                    verdict.dkim |= property(&["header.d", "header.i"]).is_some_and(|d| aligned(d, sender_domain))
                }
                "spf" => verdict.spf |= property(&["smtp.mailfrom"]).is_some_and(|d| aligned(d, sender_domain)),
                _ => {}
            }
        }
    }
    verdict
}

/// The values, without comments, of the first `Authentication-Results` header with a trusted
/// authserv-id and of the ones right after it that have one too; the first other header ends
/// the run.
fn topmost_trusted<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>, trusted: &[String]) -> Vec<String> {
    let mut run = Vec::new();
    for (name, value) in headers {
        let value = without_comments(value);
        let authserv = value.split(';').next().unwrap_or_default().split_whitespace().next().unwrap_or_default();
        let is_trusted = name.trim().eq_ignore_ascii_case("Authentication-Results")
            && trusted.iter().any(|id| id == &authserv.trim_end_matches('.').to_lowercase());
        match (is_trusted, run.is_empty()) {
            (true, _) => run.push(value),
            (false, true) => {}
            (false, false) => break,
        }
    }
    run
}

/// Whether the domain of `value` (a domain, or an address whose domain counts) and
/// `sender_domain` are the same or one is a subdomain of the other.
fn aligned(value: &str, sender_domain: &str) -> bool {
    let domain = value.trim_matches('"').rsplit('@').next().unwrap_or_default().trim_end_matches('.').to_lowercase();
    let sender = sender_domain.trim_end_matches('.').to_lowercase();
    !domain.is_empty()
        && (domain == sender || sender.ends_with(&format!(".{domain}")) || domain.ends_with(&format!(".{sender}")))
}

/// `text` without RFC 5322 comments (parenthesised, possibly nested).
fn without_comments(text: &str) -> String {
    let mut depth = 0_usize;
    let mut kept = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted() -> Vec<String> {
        vec!["mx.example.org".to_owned()]
    }

    fn results<'a>(values: &[&'a str]) -> Vec<(&'a str, &'a str)> {
        values.iter().map(|value| ("Authentication-Results", *value)).collect()
    }

    #[test]
    fn aligned_passes_from_a_trusted_server_count() {
        let header = "mx.example.org; dkim=pass (good signature) header.d=mail.sender.com header.s=s1; \
                      spf=pass smtp.mailfrom=ada@sender.com";
        assert_eq!(verdict(results(&[header]), "sender.com", &trusted()), Verdict { dkim: true, spf: true });
    }

    #[test]
    fn an_untrusted_server_a_failure_or_another_domain_counts_for_nothing() {
        let forged = "evil.example; dkim=pass header.d=sender.com; spf=pass smtp.mailfrom=sender.com";
        assert_eq!(verdict(results(&[forged]), "sender.com", &trusted()), Verdict::default());
        let failed = "mx.example.org; dkim=fail header.d=sender.com; spf=softfail smtp.mailfrom=sender.com";
        assert_eq!(verdict(results(&[failed]), "sender.com", &trusted()), Verdict::default());
        let other = "mx.example.org; dkim=pass header.d=other.com; spf=pass smtp.mailfrom=x@notsender.com";
        assert_eq!(verdict(results(&[other]), "sender.com", &trusted()), Verdict::default());
    }

    #[test]
    fn each_check_may_come_from_its_own_header() {
        let headers = results(&[
            "MX.example.org. 1; spf=pass smtp.mailfrom=sender.com",
            "mx.example.org; dkim=pass header.i=@sender.com",
        ]);
        assert_eq!(verdict(headers, "sender.com", &trusted()), Verdict { dkim: true, spf: true });
    }

    #[test]
    fn a_header_below_the_servers_own_is_the_senders_and_counts_for_nothing() {
        let headers = [
            ("Return-Path", "<ceo@sender.com>"),
            (
                "Authentication-Results",
                "mx.example.org; dkim=fail header.d=sender.com; spf=fail smtp.mailfrom=sender.com",
            ),
            ("Received", "from evil.example by mx.example.org"),
            (
                "Authentication-Results",
                "mx.example.org; dkim=pass header.d=sender.com; spf=pass smtp.mailfrom=sender.com",
            ),
        ];
        assert_eq!(verdict(headers, "sender.com", &trusted()), Verdict::default());
        let below_another = [
            ("Authentication-Results", "mx.example.org; spf=pass smtp.mailfrom=sender.com"),
            ("From", "ceo@sender.com"),
            ("Authentication-Results", "mx.example.org; dkim=pass header.d=sender.com"),
        ];
        assert_eq!(verdict(below_another, "sender.com", &trusted()), Verdict { dkim: false, spf: true });
    }
}

//! Redaction benchmark: what scrubbing a provider's error costs per text — a 1 kB and a 10 kB
//! error body (prose with masks and base64-looking tokens, as a proxy's HTML or JSON error may
//! hold) without a secret, and the 10 kB one with the key in five forms, three secrets
//! configured — next to the literal-only `str::replace` the scrubber grew from.
//!
//! Run: `cargo bench -p oxibot-tests --bench redaction`
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use oxibot_kernel::provider::redact::Secrets;
use oxibot_tests::bench::sized;

const KEY: &str = "sk-proj-Oxi0123456789abcdefGHIJKLmnopQRSTuvwx";
const RUNS: usize = sized(2_000, 20);

fn main() {
    oxibot_tests::bench::announce_short_run();
    let values = [KEY.to_owned(), "team-header-secret-42".to_owned(), "org-0123456789".to_owned()];
    let started = Instant::now();
    let secrets = Secrets::new(values.clone());
    println!("oxibot redaction benchmark (3 secrets, prepared in {:?}; median of {RUNS} runs)\n", started.elapsed());
    let short = error_text(None)[..1_000].to_owned();
    let clean = error_text(None);
    let leaking = error_text(Some(KEY));
    let texts = [
        ("1 kB without a secret", &short),
        ("10 kB without a secret", &clean),
        ("10 kB with the key in 5 forms", &leaking),
    ];
    for (label, text) in texts {
        let scrub = median(|| secrets.scrub(black_box(text)));
        let literal = median(|| values.iter().fold(text.to_owned(), |t, v| t.replace(v.as_str(), "[redacted]")));
        println!("{label:<32} every form {scrub:>9.1?}   literal only {literal:>9.1?}");
    }
    assert!(!secrets.scrub(&leaking).contains("Oxi0123456789"), "the bench text is scrubbed");
}

/// About 10 kB of error text; with `key`, it holds the key as it is, in base64 behind
/// `Bearer `, upper-cased, URL-encoded and shown around a mask.
fn error_text(key: Option<&str>) -> String {
    let filler = "Upstream error ... the gateway said **bad request**: token c2VydmljZS11bmF2YWlsYWJsZQ== \
                  rejected at 2026-11-27T06:00:00Z (request id 8f14e45fceea167a5a36dedd4bea2543). ";
    let mut text = String::new();
    while text.len() < 10_000 {
        text.push_str(filler);
    }
    if let Some(key) = key {
        let encoded = "QmVhcmVyIHNrLXByb2otT3hpMDEyMzQ1Njc4OWFiY2RlZkdISUpLTG1ub3BRUlNUdXZ3eA==";
        let forms = [key.to_owned(), encoded.to_owned(), key.to_uppercase(), key.replace('-', "%2D")];
        for (i, form) in forms.iter().chain([&format!("{}****{}", &key[..10], &key[key.len() - 10..])]).enumerate() {
            text.insert_str(2_000 * i, &format!(" key {form} "));
        }
    }
    text
}

/// The median time of `RUNS` calls of `work`.
fn median<T>(mut work: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            black_box(work());
            started.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

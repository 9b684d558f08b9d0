//! The environment a plugin starts with: only what a program needs to run (search path,
//! home, locale, terminal, time zone, temp dir, proxies and certificates, logging), never the
//! kernel's whole environment, which holds API keys (`ANTHROPIC_API_KEY`, and any variable a
//! `${VAR}` in the config names). What a plugin needs beyond this, its config entry passes
//! explicitly (`plugins[].env`).

use std::ffi::{OsStr, OsString};

/// Variables passed through by exact name.
const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "TMPDIR",
    "NO_COLOR",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "OXIBOT_HOME",
    // Can only switch the sandbox off, which makes `exec` refuse: never a widening.
    "OXIBOT_SANDBOX_DISABLE",
    // Can only take the container away (exec falls back to Landlock alone, and says so).
    "OXIBOT_CONTAINER_DISABLE",
];

/// Variables passed through by prefix (the locale categories).
const PASSED_PREFIXES: &[&str] = &["LC_"];

/// Whether the kernel's variable `name` is passed to plugins.
pub fn is_passed(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else { return false };
    PASSED.contains(&name) || PASSED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The part of `environment` (the kernel's, usually `std::env::vars_os()`) a plugin inherits.
pub fn inherited(environment: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    environment.into_iter().filter(|(name, _)| is_passed(name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(names: &[&str]) -> Vec<(OsString, OsString)> {
        names.iter().map(|n| (OsString::from(n), OsString::from("v"))).collect()
    }

    #[test]
    fn keys_and_config_variables_stay_in_the_kernel() {
        let kept = inherited(pairs(&[
            "PATH",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "MY_TELEGRAM_TOKEN",
            "LC_ALL",
            "HOME",
            "AWS_SECRET_ACCESS_KEY",
        ]));
        let names: Vec<_> = kept.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH", "LC_ALL", "HOME"]);
    }
}

//! Outside programs and packages some tests need: a missing one fails the test with the line
//! that installs it, never skips it.

use std::process::{Command, Stdio};

/// What installs every test dependency at once.
pub const SETUP: &str = "scripts/test-setup (the README's test command runs it)";

/// Fails the calling test unless `python3` can import `module`, naming the package to install.
pub fn python_module(module: &str, package: &str) {
    let imported = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match imported {
        Ok(status) if status.success() => {}
        Ok(_) => panic!(
            "this test needs the Python package `{package}`, which python3 cannot import: \
             run {SETUP}, or `python3 -m pip install {package}`"
        ),
        Err(error) => panic!("this test needs python3 ({error}); install Python 3, then run {SETUP}"),
    }
}

//! The sandbox applied for real: each test confines one thread of its own (Landlock confines
//! the calling thread) and checks what that thread can still reach.
#![allow(clippy::unwrap_used, missing_docs)]

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};

use oxibot_sandbox::{Policy, SandboxError, Support, apply, detect};

/// A fresh directory for one test, with a file in it.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oxibot-sandbox-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("file"), "content").unwrap();
    dir.canonicalize().unwrap()
}

/// Runs `check` in a new thread confined to `policy`, or returns `None` without Landlock.
fn confined<T: Send + 'static>(policy: Policy, check: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if !detect().is_available() {
        let error = apply(&policy).unwrap_err();
        assert!(matches!(error, SandboxError::Unavailable { .. }), "{error}");
        return None;
    }
    std::thread::spawn(move || {
        apply(&policy).unwrap();
        check()
    })
    .join()
    .ok()
}

fn denied(result: std::io::Result<impl Sized>) -> bool {
    matches!(result, Err(error) if error.kind() == ErrorKind::PermissionDenied)
}

#[test]
fn detection_names_landlock_and_its_abi_or_says_why_not() {
    match detect() {
        Support::Landlock { abi } => {
            assert!(abi >= 1);
            assert_eq!(detect().to_string(), format!("landlock (ABI {abi})"));
        }
        Support::Unavailable { reason } => assert!(!reason.is_empty()),
    }
}

#[test]
fn a_confined_thread_reaches_its_read_write_paths_and_nothing_else() {
    let inside = scratch("inside");
    let outside = scratch("outside");
    let mut policy = Policy::system();
    policy.allow_read_write(&inside);
    let (inside_check, outside_check) = (inside.clone(), outside.clone());
    let results = confined(policy, move || {
        (
            std::fs::read_to_string(inside_check.join("file")).is_ok(),
            std::fs::write(inside_check.join("new"), "x").is_ok(),
            denied(std::fs::read_to_string(outside_check.join("file"))),
            denied(std::fs::write(outside_check.join("new"), "x")),
            denied(std::fs::remove_file(outside_check.join("file"))),
            denied(std::fs::read_dir(std::env::temp_dir())),
            std::fs::read("/etc/resolv.conf").is_ok() || !Path::new("/etc/resolv.conf").exists(),
            denied(std::fs::read_to_string("/etc/passwd")),
            denied(std::fs::write("/etc/oxibot-sandbox-test", "x")),
        )
    });
    if let Some(results) = results {
        assert_eq!(results, (true, true, true, true, true, true, true, true, true));
        assert!(outside.join("file").exists() && !outside.join("new").exists());
    }
}

#[test]
fn read_only_paths_can_be_read_but_not_changed() {
    let dir = scratch("read-only");
    let mut policy = Policy::new();
    policy.allow_read_only(&dir);
    let check = dir.clone();
    let results = confined(policy, move || {
        (
            std::fs::read_to_string(check.join("file")).is_ok(),
            denied(std::fs::write(check.join("file"), "changed")),
            denied(std::fs::remove_file(check.join("file"))),
        )
    });
    if let Some(results) = results {
        assert_eq!(results, (true, true, true));
    }
}

#[test]
fn a_policy_without_network_refuses_tcp_connections_and_one_with_it_connects() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let mut closed = Policy::new();
    closed.deny_network();
    let refused = confined(closed, move || denied(TcpStream::connect(address)));
    let open = confined(Policy::new(), move || TcpStream::connect(address).is_ok());
    if let (Some(refused), Some(open)) = (refused, open) {
        let abi_has_network = matches!(detect(), Support::Landlock { abi } if abi >= 4);
        assert_eq!(refused, abi_has_network);
        assert!(open);
    }
}

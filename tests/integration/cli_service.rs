//! `oxibot service`, `oxibot completions`, `oxibot man` and `oxibot --version` as a user runs
//! them: the unit written for the gateway passes systemd's own verification.

use std::process::Command;

use oxibot_tests::{TempDir, bin, stderr, stdout};

fn oxibot(home: &TempDir, args: &[&str]) -> std::process::Output {
    Command::new(bin("oxibot"))
        .args(args)
        .env("OXIBOT_HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("xdg"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn service_install_writes_a_unit_that_systemd_verifies_and_uninstall_removes_it() {
    let home = TempDir::new("service-home");
    let config = home.write("config.json", "{}");
    let out = oxibot(&home, &["service", "install", "--no-start", "--config", &config.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let unit_path = home.path().join("xdg/systemd/user/oxibot-gateway.service");
    assert!(stdout(&out).contains(&unit_path.display().to_string()), "{}", stdout(&out));
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let exec =
        format!("ExecStart={} gateway --config {}", bin("oxibot").canonicalize().unwrap().display(), config.display());
    assert!(unit.contains(&exec), "{unit}");
    assert!(unit.contains(&format!("Environment=OXIBOT_HOME={}", home.path().display())), "{unit}");

    // systemd's own check, where systemd is installed (it is on the machines CI runs on).
    if Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success()) {
        // A user manager needs a runtime directory; a private one serves the check.
        let runtime = TempDir::new("service-runtime");
        std::fs::set_permissions(runtime.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let verified = Command::new("systemd-analyze")
            .args(["verify", "--user"])
            .arg(&unit_path)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .output()
            .unwrap();
        let complaints = String::from_utf8_lossy(&verified.stderr);
        assert!(verified.status.success(), "systemd-analyze verify: {complaints}");
        assert!(!complaints.contains("oxibot-gateway.service"), "systemd-analyze complained: {complaints}");
    }

    let out = oxibot(&home, &["service", "uninstall"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!unit_path.exists());
}

#[test]
fn completions_man_page_and_version_come_from_the_command_definition() {
    let home = TempDir::new("conventions-home");
    let bash = oxibot(&home, &["completions", "bash"]);
    assert!(bash.status.success() && stdout(&bash).contains("complete -F") && stdout(&bash).contains("gateway"));
    let fish = oxibot(&home, &["completions", "fish"]);
    assert!(stdout(&fish).contains("complete -c oxibot"), "{}", stdout(&fish));
    let man = oxibot(&home, &["man"]);
    assert!(stdout(&man).starts_with(".ie") || stdout(&man).contains(".TH oxibot"), "{}", stdout(&man));
    let version = stdout(&oxibot(&home, &["--version"]));
    let expected = format!("oxibot {}", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&expected), "{version}");
    assert!(version.contains('('), "the git revision is part of the version: {version}");
}

#[test]
fn every_page_the_manual_names_exists() {
    let home = TempDir::new("man-home");
    let pages = home.path().join("man1");
    let out = oxibot(&home, &["man", "--dir", &pages.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written: std::collections::BTreeSet<String> =
        std::fs::read_dir(&pages).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    for page in ["oxibot.1", "oxibot-agent.1", "oxibot-cron-add.1", "oxibot-memory-restore.1"] {
        assert!(written.contains(page), "{page} missing from {written:?}");
    }
    for (page, text) in written.iter().map(|p| (p, std::fs::read_to_string(pages.join(p)).unwrap())) {
        for named in text.split_whitespace().filter_map(|word| word.strip_suffix("(1)")) {
            let named = named.trim_start_matches("\\fB").trim_end_matches("\\fR").replace("\\-", "-");
            assert!(written.contains(&format!("{named}.1")), "{page} names {named}(1), which was not written");
        }
    }
    let cron_add = oxibot(&home, &["man", "cron", "add"]);
    assert!(stdout(&cron_add).contains(".TH oxibot-cron-add"), "{}", stdout(&cron_add));
    let unknown = oxibot(&home, &["man", "nope"]);
    assert!(!unknown.status.success() && stderr(&unknown).contains("no command 'oxibot nope'"), "{}", stderr(&unknown));
}

//! A nanobot user moves over in one command: `oxibot import nanobot` run on a data dir the
//! real nanobot-ai 0.3.5 made (`tests/fixtures/nanobot-0.3.5/`, see its `generate.sh`)
//! brings sessions, cron jobs, pairing approvals and the config over once, leaves nanobot's
//! files as they were, and the conversation goes on; `oxibot agent --config <nanobot's
//! config>` finds nanobot's sessions without any import; an older nanobot's layout imports too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::{TempDir, bin, session_path, stderr, stdout};
use serde_json::{Value, json};

/// The fixture, materialised: `<root>/home/.nanobot` with its workspace inside, as nanobot
/// 0.3.5 left it, and oxibot's data dir at `<root>/oxibot`.
struct Nanobot {
    root: TempDir,
}

impl Nanobot {
    /// Copies the fixture into a temp dir, restoring what could not be checked in as it was
    /// (`dot-git` → `.git`, `dot-gitignore` → `.gitignore`, `@ROOT@`, `@LLM_BASE@`).
    fn materialise(llm: &ScriptedLlm) -> Nanobot {
        let root = TempDir::new("nanobot-import");
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/nanobot-0.3.5/home");
        copy_tree(&fixture, &root.path().join("home"));
        let workspace = root.path().join("home/.nanobot/workspace");
        std::fs::rename(workspace.join("dot-git"), workspace.join(".git")).unwrap();
        std::fs::rename(workspace.join("dot-gitignore"), workspace.join(".gitignore")).unwrap();
        let substitutions = [("@ROOT@", root.path().display().to_string()), ("@LLM_BASE@", llm.base_url())];
        for file in files_under(&root.path().join("home")) {
            if file.components().any(|part| part.as_os_str() == ".git") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            let replaced = substitutions.iter().fold(text.clone(), |text, (from, to)| text.replace(from, to));
            if replaced != text {
                std::fs::write(&file, replaced).unwrap();
            }
        }
        Nanobot { root }
    }

    fn data_dir(&self) -> PathBuf {
        self.root.path().join("home/.nanobot")
    }

    fn workspace(&self) -> PathBuf {
        self.data_dir().join("workspace")
    }

    fn oxibot_home(&self) -> PathBuf {
        self.root.path().join("oxibot")
    }

    /// Runs `oxibot` as the nanobot user would: their home, oxibot's own data dir.
    fn oxibot(&self, args: &[&str]) -> Output {
        Command::new(bin("oxibot"))
            .args(args)
            .current_dir(self.root.path())
            .env("HOME", self.root.path().join("home"))
            .env("OXIBOT_HOME", self.oxibot_home())
            .env("OXIBOT_PROVIDER_RETRY_DELAYS_MS", "20,40,80")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    }

    fn import(&self) -> String {
        let from = self.data_dir().display().to_string();
        let out = self.oxibot(&["import", "nanobot", "--from", &from]);
        assert!(out.status.success(), "stdout: {}\nstderr: {}", stdout(&out), stderr(&out));
        stdout(&out)
    }

    /// Every file of nanobot's data dir with its bytes.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        files_under(&self.data_dir()).into_iter().map(|path| (path.clone(), std::fs::read(&path).unwrap())).collect()
    }

    fn nanobot_session(&self, key: &str) -> PathBuf {
        let id = std::fs::read_to_string(self.workspace().join(".nanobot/workspace-id")).unwrap();
        self.data_dir().join("sessions").join(id.trim()).join(oxibot_kernel::session::location::storage_name(key))
    }
}

/// The files added, removed or changed between two snapshots.
fn changed_files(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<PathBuf> {
    let paths: std::collections::BTreeSet<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths.into_iter().filter(|path| before.get(*path) != after.get(*path)).cloned().collect()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            files.extend(files_under(&entry.path()));
        } else {
            files.push(entry.path());
        }
    }
    files
}

fn texts(request: &Value) -> Vec<String> {
    request["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str().map(str::to_owned)).collect()
}

fn job_names(listing: &str) -> Vec<&str> {
    ["water plants", "stretch", "dream", "heartbeat"].into_iter().filter(|name| listing.contains(name)).collect()
}

#[test]
fn importing_nanobot_twice_brings_everything_over_once_and_the_conversation_goes_on() {
    let llm = ScriptedLlm::start();
    let nanobot = Nanobot::materialise(&llm);
    let before = nanobot.snapshot();

    let dry = nanobot.oxibot(&["import", "nanobot", "--from", &nanobot.data_dir().display().to_string(), "--dry-run"]);
    assert!(stdout(&dry).contains("would copy session cli:direct"), "{}", stdout(&dry));
    assert!(changed_files(&before, &nanobot.snapshot()).is_empty(), "a dry run writes nothing");
    assert!(!nanobot.oxibot_home().exists());

    let first = nanobot.import();
    for expected in [
        "copied session cli:direct (4 messages)",
        "copied session telegram:42 (8 messages)",
        "added job 'stretch'",
        "telegram senders 42 to the approved ones",
        "adopted nanobot's memory repository",
        "memory/history.jsonl: 1 entry up to cursor 1",
    ] {
        assert!(first.contains(expected), "{expected:?} missing from:\n{first}");
    }
    let second = nanobot.import();
    assert!(second.contains("Nothing new to import."), "{second}");
    assert!(!second.contains("copied session") && !second.contains("added job"), "{second}");

    // Nothing of nanobot's changed but what the shared workspace holds for both: the queued
    // job added to its jobs file (and the lock every writer of that file takes), and
    // oxibot's mark in the memory repository's config.
    let ws = nanobot.workspace();
    assert_eq!(
        changed_files(&before, &nanobot.snapshot()),
        [ws.join(".git/config"), ws.join("cron/jobs.json"), ws.join("cron/jobs.json.lock")]
    );

    llm.push(Reply::Text("Water them in the evening.".into()));
    let out = nanobot.oxibot(&["agent", "-m", "What should I do about the wilting?"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Water them in the evening.");
    let request = &llm.requests()[0];
    let said = texts(request);
    let earlier = said.iter().position(|t| t == "My tomato plants are wilting on the balcony.");
    let reply = said.iter().position(|t| t == "echo: They get the afternoon sun.");
    let now = said.iter().position(|t| t.contains("What should I do about the wilting?"));
    assert!(earlier < reply && reply < now && earlier.is_some(), "nanobot's turns come first: {said:#?}");
    let asked = &said[now.unwrap()];
    assert!(
        asked.contains("mock checkpoint of 4 messages"),
        "nanobot's history.jsonl is in the request's recent history"
    );
    assert_eq!(request["model"], "mock-model");

    let cron = nanobot.oxibot(&["cron", "list"]);
    assert!(cron.status.success(), "stderr: {}", stderr(&cron));
    assert_eq!(job_names(&stdout(&cron)), ["water plants", "stretch", "dream", "heartbeat"], "{}", stdout(&cron));
    let pairing = nanobot.oxibot(&["pairing", "list"]);
    assert!(stdout(&pairing).contains("approved on telegram: 42"), "{}", stdout(&pairing));
    let memory = nanobot.oxibot(&["memory", "log", "--all"]);
    assert!(stdout(&memory).contains("init: nanobot memory store"), "{}{}", stdout(&memory), stderr(&memory));

    // nanobot goes on in one session while oxibot went on in another: a third import
    // brings nanobot's new messages and keeps oxibot's longer copy.
    let telegram = nanobot.nanobot_session("telegram:42");
    let mut text = std::fs::read_to_string(&telegram).unwrap();
    text.push_str(&format!(
        "{}\n",
        json!({"role": "user", "content": "still there?", "timestamp": "2026-12-01T10:00:00.000001"})
    ));
    std::fs::write(&telegram, text).unwrap();
    let third = nanobot.import();
    assert!(third.contains("updated session telegram:42: nanobot's copy has 1 new message"), "{third}");
    assert!(third.contains("kept oxibot's copy of session cli:direct: it has 2 messages more"), "{third}");
    let ours = session_path(&nanobot.oxibot_home(), &ws, "telegram:42");
    assert!(std::fs::read_to_string(ours).unwrap().contains("still there?"));
}

// Issue 23, finding 10c: nanobot 0.3.5 writes `restrictToWorkspace: false`, and an import
// carried it over without a word.
#[test]
fn an_imported_config_with_the_sandbox_off_is_named_loudly_by_the_import_and_by_status() {
    let llm = ScriptedLlm::start();
    let nanobot = Nanobot::materialise(&llm);
    let from = nanobot.data_dir().display().to_string();
    let warning = "WARNING: the sandbox is off: tools.restrictToWorkspace is false in";
    let dry = nanobot.oxibot(&["import", "nanobot", "--from", &from, "--dry-run"]);
    let nanobot_config = nanobot.data_dir().join("config.json").display().to_string();
    assert!(stdout(&dry).contains(&format!("{warning} {nanobot_config}")), "{}", stdout(&dry));
    let imported = nanobot.import();
    let ours = nanobot.oxibot_home().join("config.json");
    let line = imported.lines().find(|line| line.starts_with(warning)).unwrap_or_else(|| panic!("{imported}"));
    assert!(line.contains(&ours.display().to_string()), "{line}");
    assert!(line.contains("exec and the file tools reach the whole machine"), "{line}");
    assert!(line.contains(r#"set "tools": {"restrictToWorkspace": true}"#), "{line}");

    let status = stdout(&nanobot.oxibot(&["status"]));
    assert!(status.contains(&format!("{warning} {}", ours.display())), "{status}");
    let text = std::fs::read_to_string(&ours).unwrap();
    std::fs::write(&ours, text.replace(r#""restrictToWorkspace": false"#, r#""restrictToWorkspace": true"#)).unwrap();
    assert!(!stdout(&nanobot.oxibot(&["status"])).contains(warning), "no warning once the sandbox is on");
    assert!(!nanobot.import().contains(warning));
}

#[test]
fn agent_with_nanobots_config_finds_nanobots_sessions_without_an_import() {
    let llm = ScriptedLlm::start();
    let nanobot = Nanobot::materialise(&llm);
    let nanobot_file = nanobot.nanobot_session("telegram:42");
    let before = std::fs::read(&nanobot_file).unwrap();
    llm.push(Reply::Text("Both reminders are set.".into()));

    let config = nanobot.data_dir().join("config.json").display().to_string();
    let out = nanobot.oxibot(&["agent", "--config", &config, "-s", "telegram:42", "-m", "Which reminders do I have?"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Both reminders are set.");
    let said = texts(&llm.requests()[0]);
    assert!(said.iter().any(|t| t.starts_with("Remind me every morning to water the plants.")), "{said:#?}");
    assert!(said.iter().any(|t| t.starts_with("done: Created job 'stretch'")), "{said:#?}");

    assert_eq!(std::fs::read(&nanobot_file).unwrap(), before, "nanobot's session file is untouched");
    let ours =
        std::fs::read_to_string(session_path(&nanobot.oxibot_home(), &nanobot.workspace(), "telegram:42")).unwrap();
    assert!(ours.contains("Which reminders do I have?") && ours.contains("Remind me every morning"));
}

#[test]
fn an_older_nanobots_layout_is_imported_from_the_workspace_and_the_data_dirs_cron_store() {
    let llm = ScriptedLlm::start();
    let root = TempDir::new("nanobot-old");
    let ws = root.path().join("ws");
    let data = root.path().join("nb");
    let config = json!({
        "agents": {"defaults": {"workspace": ws, "model": "old-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "k", "apiBase": llm.base_url()}},
        "someFutureKey": {"kept": true}
    });
    root.write("nb/config.json", &config.to_string());
    let session = [
        json!({"_type": "metadata", "key": "cli:direct", "created_at": "2025-06-01T09:00:00", "updated_at": "2025-06-01T09:01:00", "metadata": {}, "last_consolidated": 0}),
        json!({"role": "user", "content": "remember my cat is called Miso", "timestamp": "2025-06-01T09:00:01"}),
        json!({"role": "assistant", "content": "Noted: Miso.", "timestamp": "2025-06-01T09:00:02"}),
    ];
    let old_file =
        root.write("ws/sessions/cli_direct.jsonl", &session.iter().map(|l| format!("{l}\n")).collect::<String>());
    let jobs = json!({"version": 1, "jobs": [{"id": "feed0001", "name": "feed Miso", "enabled": true,
        "schedule": {"kind": "every", "everyMs": 43_200_000}, "payload": {"kind": "agent_turn", "message": "Feed Miso"},
        "state": {}, "createdAtMs": 1, "updatedAtMs": 1}]});
    root.write("nb/cron/jobs.json", &jobs.to_string());
    root.write("nb/pairing.json", r#"{"approved": {"discord": ["1001"]}, "pending": {"AB12-CD34": {"channel": "discord", "sender_id": "7", "created_at": 1, "expires_at": 2}}}"#);
    let home = root.path().join("oxibot");
    let import = || {
        let out = Command::new(bin("oxibot"))
            .args(["import", "nanobot", "--from"])
            .arg(&data)
            .env("OXIBOT_HOME", &home)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        stdout(&out)
    };

    let first = import();
    assert!(first.contains("copied session cli:direct (2 messages)"), "{first}");
    assert!(first.contains("added job 'feed Miso' (feed0001)"), "{first}");
    assert!(first.contains("discord senders 1001 to the approved ones"), "{first}");
    assert!(first.contains("1 pending pairing code is not brought over"), "{first}");
    assert!(old_file.exists(), "the old session file stays where it was");
    assert!(import().contains("Nothing new to import."));
    let copied: Value = serde_json::from_str(&std::fs::read_to_string(home.join("config.json")).unwrap()).unwrap();
    assert_eq!(copied["someFutureKey"]["kept"], true, "keys oxibot does not use are kept");

    llm.push(Reply::Text("Miso it is.".into()));
    let out = Command::new(bin("oxibot"))
        .args(["agent", "-m", "what is my cat called?"])
        .env("OXIBOT_HOME", &home)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(texts(&llm.requests()[0]).contains(&"remember my cat is called Miso".to_owned()));
    let listed = Command::new(bin("oxibot")).args(["cron", "list"]).env("OXIBOT_HOME", &home).output().unwrap();
    assert!(stdout(&listed).contains("feed Miso"), "{}", stdout(&listed));
}

#[test]
fn importing_after_onboard_takes_nanobots_config_in_place_of_the_untouched_fresh_one() {
    let llm = ScriptedLlm::start();
    let nanobot = Nanobot::materialise(&llm);
    let onboard = nanobot.oxibot(&["onboard"]);
    assert!(onboard.status.success(), "{}", stderr(&onboard));
    let config = nanobot.oxibot_home().join("config.json");
    let fresh = std::fs::read_to_string(&config).unwrap();

    let imported = nanobot.import();
    assert!(imported.contains("it was still as `oxibot onboard` wrote it"), "{imported}");
    let backup = nanobot.oxibot_home().join("config.json.before-import");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), fresh, "the replaced config is kept beside");
    let taken: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(taken["agents"]["defaults"]["model"], "mock-model", "{taken}");

    llm.push(Reply::Text("Water them in the evening.".into()));
    let out = nanobot.oxibot(&["agent", "-m", "What should I do about the wilting?"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let said = texts(&llm.requests()[0]);
    assert!(
        said.iter().any(|t| t == "My tomato plants are wilting on the balcony."),
        "nanobot's conversation goes on: {said:#?}"
    );
}

#[test]
fn an_edited_oxibot_config_is_kept_unless_the_import_is_told_to_take_nanobots() {
    let llm = ScriptedLlm::start();
    let nanobot = Nanobot::materialise(&llm);
    std::fs::create_dir_all(nanobot.oxibot_home()).unwrap();
    let config = nanobot.oxibot_home().join("config.json");
    let mine = r#"{"agents": {"defaults": {"model": "my-own-model"}}}"#;
    std::fs::write(&config, mine).unwrap();

    let kept = nanobot.import();
    assert!(kept.contains("it exists and was edited or used") && kept.contains("--take-config"), "{kept}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), mine);

    let from = nanobot.data_dir().display().to_string();
    let out = nanobot.oxibot(&["import", "nanobot", "--from", &from, "--take-config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("as --take-config asks"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(nanobot.oxibot_home().join("config.json.before-import")).unwrap(), mine);
    let taken: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(taken["agents"]["defaults"]["model"], "mock-model");
}

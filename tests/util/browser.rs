//! A real headless Chromium driven through W3C WebDriver (Debian's `chromium` and
//! `chromium-driver`): `chromedriver` on a free port, one session with a fresh profile, and the
//! few commands the web UI tests need (navigate, run a script, wait for a condition, click,
//! type, screenshot, resize), spoken as JSON over plain HTTP/1.1.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::TempDir;
use crate::channels::free_port;

/// Where Debian installs them (`apt-get install chromium chromium-driver`; `.ci/run` does).
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// How long a condition may take to hold.
const WAIT: Duration = Duration::from_secs(30);
/// The key WebDriver names elements by.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One browser; closed (and its driver's process group killed) when dropped.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile, `width`×`height`.
    pub fn start(width: u32, height: u32) -> Browser {
        for tool in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: run {} or `apt-get install chromium chromium-driver`",
                super::needs::SETUP
            );
        }
        let port = free_port();
        let mut command = Command::new(CHROMEDRIVER);
        command.arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let driver = command.spawn().unwrap();
        let profile = TempDir::new("chromium-profile");
        let mut browser = Browser { driver, port, session: String::new(), _profile: profile };
        let deadline = Instant::now() + WAIT;
        while !browser.call("GET", "/status", None).is_ok_and(|v| v["ready"] == true) {
            assert!(Instant::now() < deadline, "chromedriver did not get ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}});
        let created = browser.call("POST", "/session", Some(&capabilities)).unwrap_or_else(|e| panic!("{e}"));
        browser.session = created["sessionId"].as_str().unwrap().to_owned();
        browser
    }

    /// Opens `url` and waits for the page to load.
    pub fn open(&self, url: &str) {
        self.command("POST", "/url", json!({"url": url}));
    }

    /// Loads the current page again.
    pub fn reload(&self) {
        self.command("POST", "/refresh", json!({}));
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub fn run(&self, script: &str, args: Value) -> Value {
        self.command("POST", "/execute/sync", json!({"script": script, "args": args}))
    }

    /// Waits until `script` returns something truthy (not false, null, 0 or ""), and returns
    /// it; fails naming `what` after the wait.
    pub fn wait_for(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.run(script, json!([]));
            let truthy = !matches!(&value, Value::Null | Value::Bool(false)) && value != json!(0) && value != json!("");
            if truthy {
                return value;
            }
            assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}; page: {}", self.text("body"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The visible text of the first element matching `css` ("" when none).
    pub fn text(&self, css: &str) -> String {
        let script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';";
        self.run(script, json!([css])).as_str().unwrap_or("").to_owned()
    }

    /// Clicks the first element matching `css`.
    pub fn click(&self, css: &str) {
        let element = self.element(css);
        self.command("POST", &format!("/element/{element}/click"), json!({}));
    }

    /// Types `text` into the first element matching `css`, as keystrokes.
    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css);
        self.command("POST", &format!("/element/{element}/value"), json!({"text": text}));
    }

    /// Sets the value of a text field at once (for long texts), firing `input`.
    pub fn set_value(&self, css: &str, value: &str) {
        let script = "const e = document.querySelector(arguments[0]); e.value = arguments[1]; e.dispatchEvent(new Event('input')); return true;";
        self.run(script, json!([css, value]));
    }

    /// Saves a PNG of the window to `path`.
    pub fn screenshot(&self, path: &Path) {
        let encoded = self.command("GET", "/screenshot", Value::Null);
        let png = base64_decode(encoded.as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Resizes the window.
    pub fn resize(&self, width: u32, height: u32) {
        self.command("POST", "/window/rect", json!({"width": width, "height": height}));
    }

    fn element(&self, css: &str) -> String {
        let found = self.command("POST", "/element", json!({"using": "css selector", "value": css}));
        found[ELEMENT_KEY].as_str().unwrap_or_else(|| panic!("no element {css}: {found}")).to_owned()
    }

    /// A command of this session; fails the test on a WebDriver error.
    fn command(&self, method: &str, path: &str, body: Value) -> Value {
        let body = (!body.is_null()).then_some(body);
        self.call(method, &format!("/session/{}{path}", self.session), body.as_ref())
            .unwrap_or_else(|error| panic!("webdriver {method} {path}: {error}"))
    }

    /// One WebDriver request; its `value`, or the error it reported.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let body = body.map(Value::to_string).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.port,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body.as_bytes()))
            .map_err(|e| e.to_string())?;
        let body = read_response(&mut stream)?;
        let value: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        match value["value"].get("error") {
            Some(error) => Err(format!("{error}: {}", value["value"]["message"])),
            None => Ok(value["value"].clone()),
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        // Chromium runs in chromedriver's process group; none of it outlives the test.
        if let Some(group) = rustix::process::Pid::from_raw(self.driver.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.driver.wait();
    }
}

/// The body of a response delimited by `Content-Length` (chromedriver keeps the connection
/// open even when asked to close it).
fn read_response(stream: &mut TcpStream) -> Result<String, String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if read == 0 {
            return Err(format!("no HTTP answer: {}", String::from_utf8_lossy(&buffer)));
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .ok_or_else(|| format!("no content-length in {head}"))?;
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("the answer was cut short".to_owned());
        }
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(length);
    String::from_utf8(body).map_err(|e| e.to_string())
}

/// Standard base64 (with padding), as WebDriver sends screenshots.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for group in digits.chunks(4) {
        let bits = group.iter().enumerate().fold(0u32, |acc, (i, d)| acc | (u32::from(*d) << (18 - 6 * i)));
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..group.len()]);
    }
    out
}

/// Where a test's screenshot goes: `docs/screenshots/<name>.png` when
/// `OXIBOT_UPDATE_SCREENSHOTS` is set (to refresh the README's pictures), else a scratch
/// directory, so a test run leaves the repository as it was.
pub fn screenshot_path(scratch: &Path, name: &str) -> std::path::PathBuf {
    match std::env::var_os("OXIBOT_UPDATE_SCREENSHOTS") {
        Some(_) => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("docs/screenshots").join(format!("{name}.png"))
        }
        None => scratch.join(format!("{name}.png")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(base64_decode("aGVsbG8="), b"hello");
        assert_eq!(base64_decode("aGk="), b"hi");
        assert_eq!(base64_decode("YWJj"), b"abc");
    }
}

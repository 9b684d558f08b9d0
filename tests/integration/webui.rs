//! The web UI in a real headless Chromium (WebDriver), served by the real `oxibot gateway`
//! with the websocket channel and the scripted LLM: a streamed reply, a reply holding
//! `<script>` shown as text, a tool hint, the session list and a transcript, USER.md edited to
//! disk, a Dream change's diff and its restore, a scheduled job paused, a killed plugin
//! restarting in the health view, signing in with the one-time link `oxibot ui` prints (the
//! secret is asked for on loopback too), the token rule off loopback, and changes from other
//! sites refused. The same tests take the README's screenshots (see `browser::screenshot_path`).

use std::time::Duration;

use oxibot_kernel::memory::git::GitStore;
use oxibot_tests::TempDir;
use oxibot_tests::browser::{Browser, screenshot_path};
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::{sigkill, wait_until};
use serde_json::{Value, json};

use crate::gateway::{Gateway, GatewayEnv};

/// A gateway whose websocket channel serves the page's chat.
fn web_env() -> GatewayEnv {
    GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": free_port()}}))
}

fn start(env: &GatewayEnv) -> Gateway {
    env.start_with("websocket")
}

fn page_url(env: &GatewayEnv, fragment: &str) -> String {
    format!("http://127.0.0.1:{}/{fragment}", env.http_port())
}

/// A browser signed in to the gateway's UI through a one-time link from `oxibot ui`.
fn signed_in(env: &GatewayEnv, width: u32, height: u32) -> Browser {
    let browser = Browser::start(width, height);
    browser.open(&env.login_url());
    browser.wait_for("the page after signing in", "return document.querySelector('#nav');");
    browser
}

/// Opens the chat and waits until its socket is connected.
fn open_chat(browser: &Browser, env: &GatewayEnv) {
    browser.open(&page_url(env, "#chat"));
    browser.wait_for("the chat to connect", "return document.querySelector('#chat-status')?.dataset.chat;");
}

/// Sends `text` from the chat box and waits for the `n`th finished reply; returns its text.
fn send_and_wait(browser: &Browser, text: &str, n: usize) -> String {
    browser.type_into("#chat-input", text);
    browser.click("#chat-send");
    let script = format!(
        "const done = document.querySelectorAll('.msg.assistant.done'); return done.length >= {n} ? done[{}].innerText : null;",
        n - 1
    );
    browser.wait_for(&format!("reply {n}"), &script).as_str().unwrap().to_owned()
}

#[test]
fn a_message_sent_in_the_page_streams_its_reply_and_a_script_in_a_reply_shows_as_text() {
    let env = web_env();
    env.llm.push(Reply::Text("Hello from **oxibot**, streamed to the page.".into()));
    env.llm.push(Reply::Text("Here: <script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">".into()));
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 800);
    open_chat(&browser, &env);

    let reply = send_and_wait(&browser, "Say hello", 1);
    assert!(reply.contains("Hello from oxibot, streamed to the page."), "{reply}");
    let streamed = browser.run("return document.querySelector('.msg.assistant.done').dataset.deltas;", json!([]));
    assert!(streamed.as_str().is_some_and(|n| n.parse::<u32>().unwrap() > 0), "no delta reached the page: {streamed}");
    let bold = browser.run("return document.querySelector('.msg.assistant.done strong')?.textContent;", json!([]));
    assert_eq!(bold, "oxibot");

    let reply = send_and_wait(&browser, "Show me a script", 2);
    assert!(reply.contains("<script>window.pwned = 1</script><img src=x"), "the markup is not shown as text: {reply}");
    let injected = browser.run(
        "return [window.pwned ?? null, document.querySelectorAll('#chat-log script, #chat-log img').length];",
        json!([]),
    );
    assert_eq!(injected, json!([null, 0]), "the reply's markup reached the DOM");

    let chat_id = browser.run("return document.querySelector('#chat-status').dataset.chat;", json!([]));
    let session = env.session_file(&format!("websocket:{}", chat_id.as_str().unwrap()));
    assert!(session.contains("Say hello") && session.contains("Hello from **oxibot**"), "{session}");
}

/// Issue 24, item 5: Stop erased the partial reply (two bubbles, "(stopped)" and "Stopping.").
/// What was streamed stays in one bubble marked as stopped, and a reload shows the same.
#[test]
fn the_stop_button_keeps_the_streamed_part_in_one_stopped_bubble_and_new_chat_starts_another_session() {
    let env = web_env();
    // Five pieces are "The first part is here. "; the rest would come after 20 s.
    env.llm.push(Reply::StallAfter {
        text: "The first part is here. The rest comes much later.".into(),
        after_chunks: 5,
        delay_ms: 20_000,
    });
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 800);
    open_chat(&browser, &env);
    let first_chat = browser.run("return document.querySelector('#chat-status').dataset.chat;", json!([]));
    browser.type_into("#chat-input", "Take your time");
    browser.click("#chat-send");
    browser.wait_for(
        "the first part of the reply",
        "return document.querySelector('.msg.assistant.streaming')?.innerText.includes('The first part is here.');",
    );
    browser.click("#chat-stop");
    let bubbles = "return [...document.querySelectorAll('#chat-log .msg.assistant')].map(m => [m.classList.contains('stopped'), m.querySelector('.body').innerText, m.querySelector('.stopped-note')?.innerText]);";
    browser.wait_for("the stopped turn", "return document.querySelector('.msg.assistant.done.stopped');");
    browser.wait_for("the stop's answer", "return document.querySelector('#chat-status').innerText === 'Stopping.';");
    let live = browser.run(bubbles, json!([]));
    assert_eq!(live.as_array().unwrap().len(), 1, "one bubble for the stopped reply: {live}");
    assert_eq!(live[0][0], true, "{live}");
    assert_eq!(live[0][1], "The first part is here.", "{live}");
    assert!(live[0][2].as_str().is_some_and(|note| note.contains("stopped before finishing")), "{live}");
    let scratch = scratch_dir();
    browser.screenshot(&scratch.path().join("chat-stopped.png"));

    browser.reload();
    browser.wait_for("the chat to connect again", "return document.querySelector('#chat-status')?.dataset.chat;");
    let reloaded = browser.wait_for("the transcript", &format!("{bubbles} "));
    assert_eq!(reloaded, live, "the reloaded chat shows what the live one did");
    let key = format!("websocket:{}", first_chat.as_str().unwrap());
    browser.open(&page_url(&env, &format!("#sessions/{key}")));
    browser.wait_for("the session's transcript", "return document.querySelector('#transcript .msg.assistant');");
    let transcript = browser.run(
        "return [...document.querySelectorAll('#transcript .msg.assistant.stopped .body')].map(b => b.innerText);",
        json!([]),
    );
    assert_eq!(transcript, json!(["The first part is here."]));
    open_chat(&browser, &env);

    browser.click("#new-chat");
    let second_chat = browser.wait_for(
        "a new chat",
        "const id = document.querySelector('#chat-status').dataset.chat; return id !== arguments[0] && id;"
            .replace("arguments[0]", &first_chat.to_string())
            .as_str(),
    );
    assert_ne!(second_chat, first_chat);
    assert_eq!(browser.run("return document.querySelectorAll('#chat-log .msg').length;", json!([])), 0);
}

/// A reply with a GFM table and lists nested both ways.
const TABLE_AND_LISTS: &str = "Here is a plan for your day:

| Time | Task | Minutes |
|:-----|:----:|--------:|
| 09:00 | **Answer mail** | 30 |
| 10:00 | Write the report | 90 |

1. Morning
   - coffee
   - a walk
2. Evening
   - dinner
     1. soup
     2. bread

- Tea before bed
  1. green
  2. chamomile";

/// Each list in the last reply as [tag, [[item text, nested lists…]…]].
const LIST_OUTLINE: &str = "const isList = n => n.tagName === 'UL' || n.tagName === 'OL';
const outline = list => [list.tagName.toLowerCase(), [...list.children].map(li =>
  [[...li.childNodes].filter(n => !isList(n)).map(n => n.textContent).join('').trim(), ...[...li.children].filter(isList).map(outline)])];
const body = [...document.querySelectorAll('.msg.assistant.done .body')].pop();
return [...body.children].filter(isList).map(outline);";

/// The cells of the last reply's table, row by row.
const TABLE_CELLS: &str = "const t = [...document.querySelectorAll('.msg.assistant.done')].pop().querySelector('table'); return t && [...t.rows].map(r => [...r.cells].map(c => c.innerText));";

/// Issue 24, item 6: tables were shown as raw pipes and nested bullets became items of the
/// numbered list around them; item 7: after a reload the chat showed a reply as plain text,
/// its line breaks collapsed. Takes the README's chat screenshots.
#[test]
fn a_reply_with_a_table_and_nested_lists_is_rendered_as_them_also_after_a_reload() {
    let env = web_env();
    env.llm.push(Reply::Text(TABLE_AND_LISTS.into()));
    env.llm.push(Reply::Text(
        "| Cell |\n|---|\n| <script>window.pwned = 3</script><img src=x onerror=\"window.pwned = 4\"> |".into(),
    ));
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 900);
    open_chat(&browser, &env);
    browser.set_value("#chat-input", "Plan my day, please.\nI start at nine.");
    browser.click("#chat-send");
    browser.wait_for("the reply", "return document.querySelector('.msg.assistant.done');");

    let table =
        json!([["Time", "Task", "Minutes"], ["09:00", "Answer mail", "30"], ["10:00", "Write the report", "90"]]);
    assert_eq!(browser.run(TABLE_CELLS, json!([])), table);
    let styled = browser.run(
        "const t = document.querySelector('.msg.assistant.done table'); return [t.rows[1].cells[1].querySelector('strong')?.innerText, t.rows[1].cells[2].className, t.rows[0].cells[1].className];",
        json!([]),
    );
    assert_eq!(styled, json!(["Answer mail", "align-right", "align-center"]));
    let lists = json!([
        [
            "ol",
            [
                ["Morning", ["ul", [["coffee"], ["a walk"]]]],
                ["Evening", ["ul", [["dinner", ["ol", [["soup"], ["bread"]]]]]]]
            ]
        ],
        ["ul", [["Tea before bed", ["ol", [["green"], ["chamomile"]]]]]]
    ]);
    assert_eq!(browser.run(LIST_OUTLINE, json!([])), lists);
    let scratch = scratch_dir();
    browser.screenshot(&screenshot_path(scratch.path(), "chat"));
    browser.resize(390, 844);
    browser.screenshot(&screenshot_path(scratch.path(), "chat-phone"));
    browser.resize(1200, 900);

    browser.reload();
    open_chat(&browser, &env);
    assert_eq!(browser.run(LIST_OUTLINE, json!([])), lists, "the same after a reload: {}", browser.text("#chat-log"));
    assert_eq!(browser.run(TABLE_CELLS, json!([])), table);
    assert_eq!(browser.text(".msg.user"), "Plan my day, please.\nI start at nine.", "the line break stays");

    send_and_wait(&browser, "And a script?", 2);
    let cells = browser.run(TABLE_CELLS, json!([]));
    assert_eq!(cells[1][0], "<script>window.pwned = 3</script><img src=x onerror=\"window.pwned = 4\">");
    let injected = browser.run(
        "return [window.pwned ?? null, document.querySelectorAll('#chat-log script, #chat-log img').length];",
        json!([]),
    );
    assert_eq!(injected, json!([null, 0]), "the cell's markup reached the DOM");
}

/// A scratch directory for screenshots the README does not show.
fn scratch_dir() -> TempDir {
    TempDir::new("webui-shots")
}

#[test]
fn the_session_list_opens_a_transcript_with_its_tool_calls_folded() {
    let env = web_env();
    env.llm.push(Reply::ToolCalls(vec![("list_dir".into(), r#"{"path": "."}"#.into())]));
    env.llm.push(Reply::Text("The workspace holds your memory files.".into()));
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 800);
    open_chat(&browser, &env);
    send_and_wait(&browser, "What is in my workspace?", 1);
    let hint = browser.text(".msg.assistant.done .hint");
    assert!(hint.contains(r#"list_dir {"path": "."}"#), "no tool hint shown: {hint:?}");
    let chat_id = browser.run("return document.querySelector('#chat-status').dataset.chat;", json!([]));
    let key = format!("websocket:{}", chat_id.as_str().unwrap());

    browser.open(&page_url(&env, "#sessions"));
    let listed = browser.wait_for("the session list", "return document.querySelector('#session-list')?.innerText;");
    assert!(listed.as_str().unwrap().contains(&key), "{listed}");
    assert!(listed.as_str().unwrap().contains("The workspace holds your memory files."), "{listed}");
    let scratch = TempDir::new("webui-shots");
    browser.screenshot(&screenshot_path(scratch.path(), "sessions"));

    browser.click("#session-list a");
    browser.wait_for("the transcript", "return document.querySelector('#transcript')?.innerText;");
    assert_eq!(browser.text("#transcript-key"), key);
    let folded = browser.run(
        "return [...document.querySelectorAll('#transcript details')].map(d => [d.open, d.querySelector('summary').innerText]);",
        json!([]),
    );
    assert_eq!(folded, json!([[false, "called list_dir"], [false, "result of list_dir"]]), "{folded}");
    assert!(browser.text("#transcript").contains("What is in my workspace?"));
    browser.screenshot(&screenshot_path(scratch.path(), "transcript"));

    // The turn's tokens are counted in the health view.
    browser.open(&page_url(&env, "#health"));
    browser.wait_for("today's usage", "return document.querySelector('#usage tbody tr');");
    // Issue 24, item 8: the usage is drawn as a bar per day, its title giving the numbers.
    let bar = browser.run(
        "const bars = document.querySelectorAll('#usage-chart .bar'); return [bars.length, document.querySelectorAll('#usage tbody tr').length, bars[0]?.querySelector('title').textContent, bars[0]?.querySelector('rect.prompt').getBBox().height > 0];",
        json!([]),
    );
    assert_eq!(bar[0], bar[1], "one bar a day: {bar}");
    assert!(bar[2].as_str().is_some_and(|t| t.contains("1 turns") && t.contains("prompt")), "{bar}");
    assert_eq!(bar[3], true, "{bar}");
    browser.screenshot(&screenshot_path(scratch.path(), "health"));
}

#[test]
fn user_md_edited_in_the_page_is_written_to_disk() {
    let env = web_env();
    std::fs::create_dir_all(env.workspace()).unwrap();
    std::fs::write(env.workspace().join("USER.md"), "# User\n\n- Name: Ada\n").unwrap();
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 900);
    browser.open(&page_url(&env, "#memory"));
    let shown = browser.wait_for("USER.md", "return document.querySelector('#memory-USER-md')?.value;");
    assert_eq!(shown, "# User\n\n- Name: Ada\n");
    browser.set_value("#memory-USER-md", "# User\n\n- Name: Ada\n- Prefers tea over coffee\n");
    browser.click("#memory-USER-md-save");
    browser.wait_for(
        "the save",
        "return [...document.querySelectorAll('.editor .ok')].some(e => e.innerText === 'saved');",
    );
    let on_disk = std::fs::read_to_string(env.workspace().join("USER.md")).unwrap();
    assert_eq!(on_disk, "# User\n\n- Name: Ada\n- Prefers tea over coffee\n");
    browser.wait_for("the history", "return document.querySelector('#memory-log li');");
    let scratch = TempDir::new("webui-shots");
    browser.screenshot(&screenshot_path(scratch.path(), "memory"));
}

#[test]
fn a_dream_change_shows_its_diff_and_is_restored_from_the_page() {
    let env = web_env();
    let user_md = env.workspace().join("USER.md");
    std::fs::create_dir_all(env.workspace()).unwrap();
    std::fs::write(&user_md, "- Name: Ada\n").unwrap();
    let git = GitStore::new(env.workspace());
    git.init().unwrap();
    std::fs::write(&user_md, "- Name: Ada\n- Dislikes meetings\n").unwrap();
    git.commit("dream: learned about meetings").unwrap().unwrap();
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 900);
    browser.open(&page_url(&env, "#memory"));
    let newest = browser.wait_for("the history", "return document.querySelector('#memory-log li')?.innerText;");
    assert!(newest.as_str().unwrap().contains("dream: learned about meetings"), "{newest}");

    browser.click("#memory-log li .buttons button");
    let diff = browser.wait_for(
        "the diff",
        "const d = document.querySelector('#memory-log li .diff'); return d && !d.hidden && d.innerText;",
    );
    assert!(diff.as_str().unwrap().contains("+- Dislikes meetings"), "{diff}");
    browser.run("window.confirm = () => true; return true;", json!([]));
    browser.click("#memory-log li .buttons button:nth-child(2)");
    let restored = || std::fs::read_to_string(&user_md).unwrap() == "- Name: Ada\n";
    assert!(wait_until(Duration::from_secs(15), restored), "{}", std::fs::read_to_string(&user_md).unwrap());
    let newest = browser.wait_for(
        "the restore in the history",
        "const li = document.querySelector('#memory-log li'); return li && li.innerText.includes('restore:') && li.innerText;",
    );
    assert!(newest.as_str().unwrap().contains("restore: files as before"), "{newest}");
}

#[test]
fn a_scheduled_job_is_listed_run_now_and_paused_from_the_page() {
    let env = web_env();
    env.llm.push(Reply::Text("The plants are watered.".into()));
    let args =
        ["cron", "add", "-m", "Water the plants", "--every", "3600", "--name", "plants", "-s", "websocket:web-cron"];
    let added = env.command(&args).output().unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let _gateway = start(&env);
    let browser = signed_in(&env, 1200, 800);
    browser.open(&page_url(&env, "#automations"));
    let card = browser.wait_for("the job", "return document.querySelector('#jobs .job')?.innerText;");
    let card = card.as_str().unwrap();
    assert!(card.contains("plants") && card.contains("Water the plants") && card.contains("every 3600 s"), "{card}");
    assert!(card.contains("Next run") && !card.contains("Next run\n—") && card.contains("never run"), "{card}");
    assert!(card.contains("Replies to\nwebsocket:web-cron"), "the card names where the reply goes: {card}");

    // Run now: the job's turn runs in its session and the run is recorded in its history.
    browser.click("#jobs .job .buttons button:nth-child(2)");
    let jobs_file = env.workspace().join("cron/jobs.json");
    let job = || -> Value {
        let jobs: Value =
            serde_json::from_str(&std::fs::read_to_string(&jobs_file).unwrap_or_default()).unwrap_or_default();
        jobs["jobs"][0].clone()
    };
    let ran = || job()["state"]["runHistory"].as_array().is_some_and(|runs| !runs.is_empty());
    assert!(wait_until(Duration::from_secs(30), ran), "no run recorded: {}", job());
    assert!(env.session_file("websocket:web-cron").contains("The plants are watered."));
    browser.reload();
    let card = browser.wait_for("the run", "const c = document.querySelector('#jobs .job'); return c && c.innerText.includes('Run history (1)') && c.innerText;");
    assert!(!card.as_str().unwrap().contains("never run"), "{card}");
    let scratch = TempDir::new("webui-shots");
    browser.screenshot(&screenshot_path(scratch.path(), "automations"));

    browser.click("#jobs .job button");
    browser.wait_for("the paused badge", "return document.querySelector('#jobs .job .badge')?.innerText === 'paused';");
    // The scheduler answers at once and writes the file on its store thread.
    let paused = || job()["enabled"] == false;
    assert!(wait_until(Duration::from_secs(15), paused), "{}", job());
}

#[test]
fn a_killed_plugin_shows_running_then_restarting_then_running_again_in_the_health_view() {
    let env = web_env();
    let stress = oxibot_tests::bin("oxibot-stress-plugin");
    // A slow start makes the restart last long enough to be seen in the page.
    env.edit_config(|config| {
        config["plugins"] =
            json!([{"name": "stress", "command": stress, "env": {"OXIBOT_STRESS_START_DELAY_MS": "3000"}}]);
    });
    let _gateway = start(&env);
    env.wait_running("stress");
    let browser = signed_in(&env, 1200, 900);
    browser.open(&page_url(&env, "#health"));
    let row = |state: &str| {
        format!(
            "const r = document.querySelector('tr[data-plugin=\"stress\"]'); return r && r.querySelector('.state').innerText === '{state}' ? [r.children[3].innerText, r.querySelector('.restarts').innerText] : null;"
        )
    };
    let running = browser.wait_for("stress running", &row("running"));
    assert_eq!(running[1], "0");
    let pid: u32 = running[0].as_str().unwrap().parse().unwrap();

    sigkill(pid);
    browser.wait_for("stress restarting", &row("restarting"));
    let again = browser.wait_for("stress running again", &row("running"));
    assert_ne!(again[0].as_str().unwrap(), pid.to_string(), "the same process");
    assert_eq!(again[1], "1");
}

/// Issue 24, item 7: on a phone the Health page's "Last error" column ran off screen (errors
/// became vertical strips), session names broke mid-word, and a plugin that died before its
/// handshake five times showed 0 restarts.
#[test]
fn on_a_phone_the_health_page_fits_the_screen_and_counts_a_plugin_failing_at_start() {
    let env = web_env();
    env.edit_config(|config| config["plugins"] = json!([{"name": "flaky", "command": "/bin/false"}]));
    env.llm.push(Reply::Text("Noted.".into()));
    let _gateway = start(&env);
    env.chat_once("a-rather-long-chat-name", "remember the milk");
    let browser = signed_in(&env, 1200, 900);
    // Headless Chromium starts no narrower than 500 px; a resize goes below.
    browser.resize(390, 844);
    browser.open(&page_url(&env, "#health"));
    let failed = browser.wait_for(
        "flaky failed",
        "const r = document.querySelector('tr[data-plugin=\"flaky\"]'); return r && r.querySelector('.state').innerText === 'failed' && r.querySelector('.restarts').innerText;",
    );
    assert_eq!(failed, "5", "every restart is counted");
    let layout = browser.run(
        "const r = document.querySelector('tr[data-plugin=\"flaky\"]'); const reason = r.querySelector('.reason').getBoundingClientRect();
         const off = [...document.querySelectorAll('#view td')].filter(td => td.getBoundingClientRect().right > window.innerWidth + 1).length;
         return [off, Math.round(reason.width) >= 250, document.documentElement.scrollWidth <= window.innerWidth];",
        json!([]),
    );
    assert_eq!(layout, json!([0, true, true]), "cells off screen, a narrow error column, a page wider than the phone");
    let scratch = scratch_dir();
    browser.screenshot(&screenshot_path(scratch.path(), "health-phone"));

    browser.open(&page_url(&env, "#sessions"));
    browser.wait_for("the session list", "return document.querySelector('#session-list .key');");
    let lines = browser.run(
        "const key = [...document.querySelectorAll('#session-list .key')].find(k => k.innerText.includes('a-rather-long-chat-name'));
         if (!key) return null; const range = document.createRange(); range.selectNodeContents(key);
         return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;",
        json!([]),
    );
    assert_eq!(lines, 1, "the session's name is broken over lines");
    browser.screenshot(&scratch.path().join("sessions-phone.png"));
}

/// Issue 24, item 8: the Health page showed token usage as numbers only; usage per source and
/// cost per day, latency per turn and plugin restarts are drawn, and each session's context
/// fill is a bar, at desktop and phone widths.
#[test]
fn the_health_page_draws_sources_cost_latency_restarts_and_context_fill() {
    let env = web_env();
    env.edit_config(|config| {
        config["plugins"] = json!([{"name": "flaky", "command": "/bin/false"}]);
        config["agents"]["defaults"]["pricing"] = json!({"test-model": {"input": 2.0, "output": 10.0}});
    });
    env.llm.push(Reply::Text("Noted.".into()));
    let _gateway = start(&env);
    env.chat_once("charts", "remember the milk");
    let scratch = scratch_dir();
    for (name, width, height) in [("health-charts", 1200, 2000), ("health-charts-phone", 390, 1600)] {
        let browser = signed_in(&env, 1200, height);
        browser.resize(width, height);
        browser.open(&page_url(&env, "#health"));
        browser.wait_for(
            "flaky failed",
            "const r = document.querySelector('#restarts-chart [data-plugin=\"flaky\"] meter'); return r && r.value === 5 && r.title;",
        );
        let drawn = browser.run(
            "const count = s => document.querySelectorAll(s).length;
             const meter = document.querySelector('#contexts [data-session=\"websocket:charts\"] meter');
             return [count('#sources-chart .bar rect'), document.querySelector('#sources-chart .bar title')?.textContent ?? '',
                     count('#cost-chart .bar'), document.querySelector('#cost-chart .bar title')?.textContent ?? '',
                     count('#latency-chart .bar'), meter ? meter.value > 0 && meter.value < meter.max : null,
                     document.documentElement.scrollWidth <= window.innerWidth,
                     [...document.querySelectorAll('#source-totals tr[data-source=\"user\"] td')].map(td => td.textContent)];",
            json!([]),
        );
        assert_eq!(drawn[0], 1, "one source, one bar part: {drawn}");
        // Issue 33: each source's calls, tokens, cache hit rate, reasoning tokens, cost and time
        // per model call under the chart.
        let cells: Vec<&str> = drawn[7].as_array().unwrap().iter().map(|cell| cell.as_str().unwrap()).collect();
        assert_eq!(cells[..6], ["user", "1", "17", "25%", "2", "0.0001"], "{drawn}");
        let per_call = cells.get(6).and_then(|cell| cell.strip_suffix(" ms"));
        assert!(per_call.is_some_and(|ms| ms.parse::<u64>().is_ok()), "the call's time: {drawn}");
        assert!(drawn[1].as_str().is_some_and(|t| t.contains("user")), "{drawn}");
        assert_eq!(drawn[2], 1, "one day of cost: {drawn}");
        assert!(drawn[3].as_str().is_some_and(|t| !t.contains("unpriced")), "{drawn}");
        assert_eq!(drawn[4], 1, "one turn's latency: {drawn}");
        assert_eq!(drawn[5], true, "the session's context fill: {drawn}");
        assert_eq!(drawn[6], true, "the page is wider than the screen at {width} px");
        browser.run("document.querySelector('#restarts-chart').scrollIntoView();", json!([]));
        browser.screenshot(&screenshot_path(scratch.path(), name));
    }
}

#[test]
fn an_off_loopback_gateway_refuses_the_page_without_its_token_and_keeps_it_in_a_cookie() {
    let env = web_env();
    env.edit_config(|config| {
        config["gateway"]["host"] = json!("0.0.0.0");
        config["gateway"]["token"] = json!("s3cret-token");
    });
    let _gateway = start(&env);
    let browser = Browser::start(1000, 700);
    browser.open(&page_url(&env, ""));
    let refused = browser.text("body");
    assert!(
        refused.contains("oxibot ui") && browser.run("return !document.querySelector('#nav');", json!([])) == true,
        "{refused}"
    );
    browser.open(&page_url(&env, "?token=wrong"));
    assert!(browser.text("body").contains("wrong token"));

    browser.open(&page_url(&env, "?token=s3cret-token"));
    browser.wait_for("the page", "return document.querySelector('#nav');");
    let location = browser.run("return location.href;", json!([]));
    assert!(!location.as_str().unwrap().contains("token"), "the token stayed in the URL: {location}");
    assert_eq!(browser.run("return document.cookie;", json!([])), "", "the cookie is readable by scripts");
    open_chat(&browser, &env);
    browser.open(&page_url(&env, "#sessions"));
    browser
        .wait_for("the API through the cookie", "return document.querySelector('main h2')?.innerText === 'Sessions';");
}

#[test]
fn an_off_loopback_gateway_without_a_token_serves_health_and_asks_for_the_generated_secret() {
    let env = web_env();
    env.edit_config(|config| config["gateway"]["host"] = json!("0.0.0.0"));
    let _gateway = start(&env);
    let page = http_get(env.http_port(), "/", &[]);
    assert!(page.starts_with("HTTP/1.1 401"), "{page}");
    assert!(page.contains("oxibot ui"), "{page}");
    assert!(http_get(env.http_port(), "/health", &[]).starts_with("HTTP/1.1 200"));
    assert!(http_get(env.http_port(), "/api/sessions", &[]).starts_with("HTTP/1.1 401"));
    let authorization = env.ui_authorization();
    let with_secret = http_get(env.http_port(), "/api/sessions", &[("Authorization", &authorization)]);
    assert!(with_secret.starts_with("HTTP/1.1 200"), "{with_secret}");
}

/// Issue 23, finding 3: a command the assistant ran fetched
/// `http://127.0.0.1:<gateway port>/api/session?key=…` and printed another chat's transcript,
/// since the UI asked loopback clients for nothing. A client that only knows the port gets no
/// transcript and no status now; a login link is good once; with the secret the same request
/// is served.
#[test]
fn a_local_process_that_only_knows_the_port_reads_no_transcript() {
    let env = web_env();
    let _gateway = start(&env);
    env.llm.push(Reply::Text("Noted.".into()));
    env.chat_once("pin-chat", "my PIN is 4711");
    assert!(env.session_file("websocket:pin-chat").contains("4711"), "the chat was not saved");
    let port = env.http_port();
    for path in ["/api/session?key=websocket:pin-chat", "/api/sessions", "/api/status", "/"] {
        let answer = http_get(port, path, &[]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{path}: {answer}");
        assert!(!answer.contains("4711"), "{path} leaked the transcript");
    }
    let rebound = http_get(port, "/api/session?key=websocket:pin-chat", &[("Host", "evil.example")]);
    assert!(rebound.starts_with("HTTP/1.1 403") && !rebound.contains("4711"), "{rebound}");
    let authorization = env.ui_authorization();
    let foreign = [("Authorization", authorization.as_str()), ("Origin", "http://evil.example")];
    let cross_site = http_get(port, "/api/session?key=websocket:pin-chat", &foreign);
    assert!(cross_site.starts_with("HTTP/1.1 403") && !cross_site.contains("4711"), "{cross_site}");
    let own = http_get(port, "/api/session?key=websocket:pin-chat", &[("Authorization", &authorization)]);
    assert!(own.starts_with("HTTP/1.1 200") && own.contains("4711"), "{own}");

    let link = env.login_url();
    let path = link.split_once(&format!(":{port}")).unwrap().1.to_owned();
    let first = http_get(port, &path, &[]);
    assert!(first.starts_with("HTTP/1.1 303"), "{first}");
    let cookie =
        first.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap().split(';').next().unwrap().to_owned();
    assert!(http_get(port, "/api/sessions", &[("Cookie", &cookie)]).starts_with("HTTP/1.1 200"));
    assert!(http_get(port, &path, &[]).starts_with("HTTP/1.1 401"), "a login link is good once");
}

#[test]
fn a_change_from_another_site_is_refused_and_one_from_the_page_is_saved() {
    let env = web_env();
    let _gateway = start(&env);
    let port = env.http_port();
    let user_md = env.workspace().join("USER.md");
    let before = std::fs::read_to_string(&user_md).ok();
    let body = r#"{"content": "- changed\n"}"#;
    let own = format!("http://127.0.0.1:{port}");
    let authorization = env.ui_authorization();
    let secret = ("Authorization", authorization.as_str());
    let json = ("Content-Type", "application/json");
    let forged = http_request(port, "PUT", "/api/memory?name=USER.md", &[secret, json, ("Origin", &own)], body);
    assert!(forged.starts_with("HTTP/1.1 403") && forged.contains("x-oxibot-request"), "{forged}");
    let headers = [secret, json, ("Origin", "http://evil.example"), ("x-oxibot-request", "1")];
    let cross_origin = http_request(port, "PUT", "/api/memory?name=USER.md", &headers, body);
    assert!(cross_origin.starts_with("HTTP/1.1 403"), "{cross_origin}");
    let text = [secret, ("Content-Type", "text/plain"), ("Origin", own.as_str()), ("x-oxibot-request", "1")];
    let as_text = http_request(port, "PUT", "/api/memory?name=USER.md", &text, body);
    assert!(as_text.starts_with("HTTP/1.1 415"), "{as_text}");
    assert_eq!(std::fs::read_to_string(&user_md).ok(), before, "a refused request wrote the file");
    let headers =
        [secret, json, ("Origin", own.as_str()), ("x-oxibot-request", "1"), ("Sec-Fetch-Site", "same-origin")];
    let saved = http_request(port, "PUT", "/api/memory?name=USER.md", &headers, body);
    assert!(saved.starts_with("HTTP/1.1 200"), "{saved}");
    assert_eq!(std::fs::read_to_string(&user_md).unwrap(), "- changed\n");
    let escape = http_request(port, "PUT", "/api/memory?name=../x.md", &headers, body);
    assert!(escape.starts_with("HTTP/1.1 409") && escape.contains("not a memory file"), "{escape}");
}

fn http_request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// `GET path` with `headers`; a `Host` among them replaces the loopback one.
fn http_get(port: u16, path: &str, headers: &[(&str, &str)]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let host = headers.iter().find(|(n, _)| *n == "Host").map_or(format!("127.0.0.1:{port}"), |(_, v)| v.to_string());
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (name, value) in headers.iter().filter(|(n, _)| *n != "Host") {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Issue 28: a call that asks shows a dialog in the page with the call as it will run; its
/// Approve button sends the answer from the page's own chat, and the call runs; the session's
/// transcript then says who allowed it (the audit record of the session file).
#[test]
fn an_approval_request_shows_a_dialog_whose_approve_button_runs_the_call_and_the_transcript_says_who() {
    let env = web_env();
    env.edit_config(|config| config["tools"] = json!({"approval": {"write_file": "ask"}}));
    let _gateway = start(&env);
    env.llm.push(Reply::ToolCalls(vec![("write_file".into(), json!({"path": "ui.txt", "content": "ui"}).to_string())]));
    env.llm.push(Reply::Text("Done from the page.".into()));
    let browser = signed_in(&env, 1200, 900);
    open_chat(&browser, &env);
    browser.type_into("#chat-input", "save it");
    browser.click("#chat-send");
    let shown = browser.wait_for("the approval dialog", "return document.querySelector('.approval pre')?.innerText;");
    assert!(shown.as_str().unwrap().contains("\"path\": \"ui.txt\""), "{shown}");
    assert!(!env.workspace().join("ui.txt").exists(), "the call ran before the click");
    browser.click(".approval .buttons button");
    let script = "return [...document.querySelectorAll('.msg.assistant.done')].map(n => n.innerText).find(t => t.includes('Done from the page.'));";
    browser.wait_for("the reply after approving", script);
    assert_eq!(std::fs::read_to_string(env.workspace().join("ui.txt")).unwrap(), "ui");

    let chat_id = browser.run("return document.querySelector('#chat-status').dataset.chat;", json!([]));
    let chat_id = chat_id.as_str().unwrap().to_owned();
    browser.open(&page_url(&env, &format!("#sessions/websocket:{chat_id}")));
    let audit = browser.wait_for("the audit line", "return document.querySelector('#transcript .audit')?.innerText;");
    assert!(audit.as_str().unwrap().starts_with("write_file: allowed by "), "{audit}");
    assert!(audit.as_str().unwrap().contains(&format!("on websocket (chat {chat_id})")), "{audit}");
}

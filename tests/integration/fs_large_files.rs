//! `read_file` on a huge file through the real fs plugin (issue 23, finding 10b): a page of a
//! 20 GiB sparse file (a text head, then a hole) comes back from the lines it shows, without
//! counting the lines of the rest, which took minutes before.

use std::time::{Duration, Instant};

use oxibot_tests::{TempDir, context, start_host, tool_spec};
use serde_json::json;

/// A generous bound for a call that reads a few kilobytes; counting the lines of 20 GiB took
/// over two minutes on the test machine, so a regression fails here instead of hanging.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

#[actix_rt::test]
async fn five_lines_of_a_20_gib_sparse_file_come_back_without_reading_the_rest() {
    let ws = TempDir::new("huge-read");
    let head: String = (1..=2000).map(|n| format!("entry {n}: the service started\n")).collect();
    let path = ws.write("huge.log", &head);
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(20 << 30).unwrap();
    let host = start_host(vec![tool_spec("fs")]).await;
    let started = Instant::now();
    let arguments = json!({"path": "huge.log", "limit": 5});
    let result = host.call("read_file", arguments, context(ws.path()), Some(CALL_TIMEOUT)).await;
    let elapsed = started.elapsed();
    let content = result.expect("read_file answers within the timeout").content;
    let lines: String = (1..=5).map(|n| format!("{n}| entry {n}: the service started\n")).collect();
    let footer =
        "(lines 1-5; more lines follow in this 20 GiB file, not counted; call read_file with offset=6 to read on)";
    assert_eq!(content, format!("{lines}\n{footer}"));
    eprintln!("read_file of 5 lines of a 20 GiB sparse file: {elapsed:?}");
    host.shutdown().await;
}

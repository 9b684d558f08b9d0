//! A real OTLP/HTTP metrics receiver for the tests (Phoenix takes traces only): a small Python
//! server on a free loopback port that decodes each `/v1/metrics` post with the reference
//! protobuf classes of PyPI's `opentelemetry-proto` (installed with `arize-phoenix`) and keeps
//! it as one JSON line (the proto3 JSON mapping); `/v1/traces` posts are answered and dropped.
//! Killed when dropped.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::TempDir;
use crate::channels::free_port;

/// The receiver: decodes, then appends one line per metrics post to `metrics.jsonl`.
const RECEIVER: &str = r#"
import http.server, sys
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

port, out = int(sys.argv[1]), sys.argv[2]

class Receiver(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/v1/metrics":
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(body)
            with open(out, "a") as lines:
                lines.write(json_format.MessageToJson(request, indent=None) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

http.server.ThreadingHTTPServer(("127.0.0.1", port), Receiver).serve_forever()
"#;

/// A running receiver and the file it writes.
pub struct MetricsReceiver {
    dir: TempDir,
    port: u16,
    process: Child,
}

impl MetricsReceiver {
    /// Starts the receiver, failing the test with the install line when the protobuf classes
    /// are missing.
    pub fn start() -> MetricsReceiver {
        crate::needs::python_module(
            "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2",
            "opentelemetry-proto",
        );
        let dir = TempDir::new("otlp-metrics");
        let port = free_port();
        let out = dir.path().join("metrics.jsonl");
        let process = Command::new("python3")
            .args(["-c", RECEIVER, &port.to_string(), &out.display().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start python3 ({e}); install Python 3, then run {}", crate::needs::SETUP)
            });
        let receiver = MetricsReceiver { dir, port, process };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "the OTLP metrics receiver did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        receiver
    }

    /// The base URL OTLP/HTTP exporters post to (`/v1/metrics` is added).
    pub fn otlp_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The data points of histogram `name` in the latest post that had it (points are
    /// cumulative, so the latest post holds every call so far).
    pub fn histogram_points(&self, name: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.path().join("metrics.jsonl")).unwrap_or_default();
        let posts = text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap());
        posts.map(|post| points_of(&post, name)).rfind(|points| !points.is_empty()).unwrap_or_default()
    }
}

fn points_of(post: &Value, name: &str) -> Vec<Value> {
    let mut points = Vec::new();
    for resource in post["resourceMetrics"].as_array().into_iter().flatten() {
        for scope in resource["scopeMetrics"].as_array().into_iter().flatten() {
            for metric in scope["metrics"].as_array().into_iter().flatten().filter(|m| m["name"] == name) {
                points.extend(metric["histogram"]["dataPoints"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    points
}

/// A data point's string attribute `key`.
pub fn point_attribute<'a>(point: &'a Value, key: &str) -> Option<&'a str> {
    let attributes = point["attributes"].as_array()?;
    attributes.iter().find(|attribute| attribute["key"] == key)?["value"]["stringValue"].as_str()
}

impl Drop for MetricsReceiver {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

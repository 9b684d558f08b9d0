#!/usr/bin/env python3
"""OpenTelemetry cost benchmark: what exporting traces and metrics adds to `oxibot agent`, and
that nothing is added without an endpoint -- the "OpenTelemetry export" figures in
BENCHMARKS.md.

Three set-ups of the same data dir: no telemetry section, a section without an endpoint, and
`telemetry.otlpEndpoint` pointing at a local OTLP sink (answers every POST with 200). The LLM
is a scripted OpenAI-compatible server in this script that answers at once (SSE when asked),
so the figures are the kernel's own work.

- cold `oxibot agent -m hello`: wall time and CPU time (user + system of the process and its
  plugins, from `resource.getrusage(RUSAGE_CHILDREN)`), median and min-max over RUNS runs;
- per-turn CPU: one interactive `oxibot agent` fed TURNS lines on stdin, its CPU time divided
  by the turns, median over ROUNDS rounds;
- threads: how many threads the kernel has while a turn runs (`/proc/<pid>/status`).

Run: `cargo build -p oxibot-kernel && python3 tests/benches/telemetry_cost.py`
(`--bin-dir` for another build).
"""

import argparse
import http.server
import json
import os
import resource
import statistics
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = 10
TURNS = 30
ROUNDS = 3


class Llm(http.server.BaseHTTPRequestHandler):
    """Answers every chat request with `hi` (one SSE chunk when asked to stream)."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        if body.get("stream"):
            chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}], "usage": usage}
            data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            kind = "text/event-stream"
        else:
            message = {"role": "assistant", "content": "hi"}
            data = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that keeps nothing: 200 and an empty protobuf answer."""

    posts = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Sink.posts += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


def serve(handler) -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def data_dir(llm: int, telemetry) -> Path:
    home = Path(tempfile.mkdtemp(prefix="otel-bench-"))
    config = {
        "agents": {"defaults": {"workspace": str(home / "workspace"), "model": "bench", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "k", "apiBase": f"http://127.0.0.1:{llm}/v1"}},
    }
    if telemetry is not None:
        config["telemetry"] = telemetry
    (home / "config.json").write_text(json.dumps(config))
    return home


def environment(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OXIBOT_HOME"] = str(home)
    return env


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cold(binary: Path, home: Path) -> tuple:
    walls, cpus = [], []
    for run in range(RUNS):
        cpu, start = children_cpu(), time.perf_counter()
        subprocess.run([binary, "agent", "-s", f"cli:cold{run}", "-m", "hello"], env=environment(home),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((children_cpu() - cpu) * 1000)
    return walls, cpus


def per_turn(binary: Path, home: Path) -> tuple:
    """CPU ms per turn (the whole run's CPU minus a one-turn run's, over the extra turns), and
    the kernel's thread count."""
    def run(turns: int) -> tuple:
        cpu = children_cpu()
        process = subprocess.Popen([binary, "agent", "-s", f"cli:turns{time.time_ns()}"], env=environment(home),
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        threads = 0
        for turn in range(turns):
            process.stdin.write(f"hello {turn}\n")
            process.stdin.flush()
            if turn == turns // 2:
                time.sleep(0.3)
                status = Path(f"/proc/{process.pid}/status").read_text()
                threads = int(next(l for l in status.splitlines() if l.startswith("Threads:")).split()[1])
        process.stdin.close()
        process.wait()
        return children_cpu() - cpu, threads

    figures, threads = [], 0
    for _ in range(ROUNDS):
        one, _ = run(1)
        many, threads = run(TURNS + 1)
        figures.append((many - one) * 1000 / TURNS)
    return figures, threads


def show(label: str, values: list, unit: str) -> str:
    return f"{statistics.median(values):.1f} {unit} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    global RUNS, TURNS, ROUNDS
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", default=str(ROOT / "target" / "debug"))
    parser.add_argument("--short", action="store_true", help="a few runs only: checks the benchmark works")
    args = parser.parse_args()
    if args.short:
        RUNS, TURNS, ROUNDS = 2, 3, 1
    binary = Path(args.bin_dir) / "oxibot"
    llm, sink = serve(Llm), serve(Sink)
    setups = [
        ("no telemetry section", None),
        ("section, no endpoint", {"includeContent": False}),
        ("exporting to a local sink", {"otlpEndpoint": f"http://127.0.0.1:{sink}"}),
    ]
    print(f"binary: {binary}; cold runs: {RUNS}; turns: {TURNS} x {ROUNDS} rounds\n")
    print("| set-up | cold wall | cold CPU | CPU per turn | kernel threads |")
    print("|---|---|---|---|---|")
    for label, telemetry in setups:
        home = data_dir(llm, telemetry)
        walls, cpus = cold(binary, home)
        turns, threads = per_turn(binary, home)
        shutil.rmtree(home, ignore_errors=True)
        print(f"| {label} | {show('', walls, 'ms')} | {show('', cpus, 'ms')} | {show('', turns, 'ms')} | {threads} |")
    print(f"\nOTLP posts the sink received: {Sink.posts}")


if __name__ == "__main__":
    main()

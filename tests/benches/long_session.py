#!/usr/bin/env python3
"""Long-session benchmark: kernel CPU and memory per turn over thousands of turns of one
session, through the real `oxibot gateway`, its `api` channel and a streaming LLM.

The LLM is a scripted OpenAI-compatible server in this script (Python standard library, its
own process) that streams every answer in 16-character SSE chunks and, like many servers,
closes the connection after each response (`--keep-alive` keeps connections open instead).
It answers `echo: <the user's message>`, and a short summary to the kernel's consolidation
requests. The client sends the turns one after another to `POST /v1/chat/completions`, all in
one session, and reads the kernel's CPU time around each turn from
`/proc/<pid>/task/*/schedstat` (nanoseconds, every thread) and `/proc/<pid>/stat` (clock
ticks, threads that exited included).

It prints, for windows of turns (1-50, 151-200, 951-1000, ...), the kernel CPU per turn
(median and p90 of the per-turn figures, and the window's total from `/proc/<pid>/stat`), the
RSS, threads and open descriptors of the kernel after given turns, and a JSON line with every
figure.

Run: `cargo build --release -p oxibot-kernel && python3 tests/benches/long_session.py [--turns 1000]
[--context-window 200000] [--keep-alive] [--bin-dir target/release]`
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The api channel takes only requests carrying its key.
API_KEY = "bench-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
TICK = os.sysconf("SC_CLK_TCK")

MOCK = r'''
import json, socket, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEEP_ALIVE = sys.argv[2] == "keep"

def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Headers and body are two writes; without this the second waits for a delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self):
        body = b'{"object":"list","data":[{"id":"mock-model","object":"model"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        messages = request.get("messages") or []
        last = text_of(messages[-1].get("content")) if messages else ""
        marker = last.rfind("BENCH-TURN ")
        text = "echo: " + last[marker:] if marker >= 0 else "- [bench] conversation summarised"
        if not request.get("stream"):
            # The kernel's own calls (the summariser) ask for a whole JSON answer.
            body = json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
                               "model": request.get("model", "mock-model"),
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if KEEP_ALIVE:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": request.get("model", "mock-model")}
        deltas = [{"role": "assistant", "content": ""}]
        deltas += [{"content": text[i:i + 16]} for i in range(0, len(text), 16)]
        chunks = [dict(base, choices=[{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
        chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        chunks.append(dict(base, choices=[], usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}))
        events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
        if KEEP_ALIVE:
            # One write: small writes on a kept-open connection meet Nagle and delayed ACKs.
            self.wfile.write(b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n")
        else:
            for event in events:
                self.wfile.write(event)
        self.wfile.flush()

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
server.serve_forever()
'''


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(check, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"timed out waiting for {what}")


def cpu_ticks(pid):
    """user + system CPU of the whole process in clock ticks, exited threads included."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_ns(pid):
    """On-CPU nanoseconds of the process's live threads."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except OSError:
            pass
    return total


def status(pid):
    """RSS (MiB), threads and open descriptors of a process."""
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
    return {
        "rss_mib": round(int(fields["VmRSS"].split()[0]) / 1024, 2),
        "threads": int(fields["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def chat(port, text):
    body = json.dumps({"model": "oxibot", "session_id": "long", "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body.encode(),
                                     {"Content-Type": "application/json", **AUTH})
    reply = json.loads(urllib.request.urlopen(request, timeout=120).read())
    return reply["choices"][0]["message"]["content"]


def windows(turns, every=0):
    """Turn windows (1-based, inclusive) reported: the first 50, then 50 before each hundred
    mark; with `every`, then consecutive blocks of that many turns too (a block spans the rise
    and fall of the replayed history between consolidations)."""
    marks = [50, 200, 500, 1000, 2000, 3000, 5000, 10000, 20000]
    fixed = [(1, min(50, turns))] + [(m - 49, m) for m in marks[1:] if m <= turns]
    blocks = [(first, min(first + every - 1, turns)) for first in range(1, turns + 1, every)] if every else []
    return fixed + blocks


def checkpoints(turns, every=1000):
    """Turns after which the kernel's RSS is read: early ones, then every `every` turns (a
    soak's flatness shows between them), and the last."""
    marks = sorted(set([t for t in [1, 100, 500] if t <= turns] + list(range(every, turns + 1, every))))
    return marks + ([turns] if turns not in marks else [])


def largest_files(home, count=8):
    """The largest files under the data dir (path relative to it, bytes, lines): what grew."""
    found = []
    for path in Path(home).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found.append((str(path.relative_to(home)), len(data), data.count(b"\n")))
    return sorted(found, key=lambda f: -f[1])[:count]


def config_for(home, llm_port, api_port, health_port, context_window, memory):
    return {
        "memory": memory,
        "agents": {"defaults": {"workspace": os.path.join(home, "workspace"), "model": "mock-model",
                                "provider": "custom", "contextWindowTokens": context_window, "maxTokens": 8192}},
        "providers": {"custom": {"apiKey": "mock", "apiBase": f"http://127.0.0.1:{llm_port}/v1"}},
        "channels": {"api": {"enabled": True, "host": "127.0.0.1", "port": api_port, "allowFrom": "*", "apiKey": API_KEY,
                             "timeoutSecs": 120}},
        "gateway": {"host": "127.0.0.1", "port": health_port},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "target" / "release")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--context-window", type=int, default=200_000)
    parser.add_argument("--keep-alive", action="store_true", help="the LLM keeps connections open")
    parser.add_argument("--memory", default="{}", metavar="JSON",
                        help='the config\'s memory section, e.g. \'{"autoRecall": false}\' (default: its defaults)')
    parser.add_argument("--window-every", type=int, default=0, metavar="N",
                        help="report blocks of N turns too, besides the 50-turn windows at the marks")
    parser.add_argument("--keep", action="store_true", help="leave the data dir in place (its path is printed)")
    parser.add_argument("--rss-every", type=int, default=1000, help="read the kernel's RSS every this many turns")
    parser.add_argument("--perf", metavar="FILE", help="record `perf record` of the kernel into FILE (FILE.<turn> "
                        "for each of several --perf-from turns)")
    parser.add_argument("--perf-from", type=int, nargs="+", default=[300],
                        help="turns at which perf starts recording (one recording each)")
    parser.add_argument("--perf-turns", type=int, default=0, help="turns each recording lasts (default: to the end)")
    parser.add_argument("--perf-call-graph", default="dwarf,16384",
                        help="perf's --call-graph mode: dwarf,SIZE (default) or fp (cheap, self time is exact)")
    args = parser.parse_args()
    oxibot = args.bin_dir / "oxibot"
    if not oxibot.exists():
        sys.exit(f"{oxibot} is missing; build it or pass --bin-dir")
    home = tempfile.mkdtemp(prefix="oxibot-long-session-")
    llm_port, api_port, health_port = free_port(), free_port(), free_port()
    with open(os.path.join(home, "config.json"), "w") as out:
        json.dump(config_for(home, llm_port, api_port, health_port, args.context_window, json.loads(args.memory)), out)
    mock = subprocess.Popen([sys.executable, "-c", MOCK, str(llm_port), "keep" if args.keep_alive else "close"])
    gateway = None
    perf = None
    try:
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{llm_port}/v1/models", timeout=1), 20, "the LLM")
        env = dict(os.environ, OXIBOT_HOME=home, RUST_LOG="warn")
        gateway = subprocess.Popen([str(oxibot), "gateway"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(home, "gateway.log"), "w"))
        models = urllib.request.Request(f"http://127.0.0.1:{api_port}/v1/models", headers=AUTH)
        wait_for(lambda: urllib.request.urlopen(models, timeout=1), 30,
                 "the api channel")
        pid = gateway.pid
        perf_started = 0
        per_turn_ns, ticks_at, seen = [], {0: cpu_ticks(pid)}, {}
        marks = set(checkpoints(args.turns, args.rss_every))
        started = time.perf_counter()
        for turn in range(1, args.turns + 1):
            if perf and args.perf_turns and turn == perf_started + args.perf_turns:
                perf.send_signal(2)
                perf.wait()
                perf = None
            if args.perf and turn in args.perf_from and perf is None:
                output = args.perf if len(args.perf_from) == 1 else f"{args.perf}.{turn}"
                perf = subprocess.Popen(["perf", "record", "--call-graph", args.perf_call_graph, "-F", "2000", "-o", output,
                                         "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                perf_started = turn
                time.sleep(0.5)
            before = cpu_ns(pid)
            answer = chat(api_port, f"BENCH-TURN {turn}: hello there")
            if answer != f"echo: BENCH-TURN {turn}: hello there":
                sys.exit(f"turn {turn}: unexpected answer {answer!r}")
            per_turn_ns.append(cpu_ns(pid) - before)
            ticks_at[turn] = cpu_ticks(pid)
            if turn in marks:
                time.sleep(0.2)
                seen[turn] = status(pid)
                print(f"after turn {turn}: {seen[turn]}, {time.perf_counter() - started:.0f} s", file=sys.stderr)
        wall = time.perf_counter() - started
        if perf:
            perf.send_signal(2)
            perf.wait()
        report(args, per_turn_ns, ticks_at, seen, wall)
        for name, size, lines in largest_files(home):
            print(f"    on disk: {name}: {size:,} bytes, {lines:,} lines")
    finally:
        for process in (gateway, mock):
            if process and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        if args.keep:
            print(f"    data dir kept: {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)


def report(args, per_turn_ns, ticks_at, seen, wall):
    turns = len(per_turn_ns)
    print(f"{turns} turns in one session through `oxibot gateway` + api channel, streaming LLM "
          f"({'keep-alive' if args.keep_alive else 'connection closed after each answer'}), "
          f"contextWindowTokens {args.context_window}; {wall:.1f} s, {wall / turns * 1000:.2f} ms per turn")
    rows = []
    for first, last in windows(turns, args.window_every):
        window = sorted(per_turn_ns[first - 1:last])
        total_ms = (ticks_at[last] - ticks_at[first - 1]) / TICK * 1000 / (last - first + 1)
        row = {"turns": f"{first}-{last}", "p50_ms": round(statistics.median(window) / 1e6, 3),
               "p90_ms": round(window[int(len(window) * 0.9)] / 1e6, 3), "stat_mean_ms": round(total_ms, 2)}
        rows.append(row)
        print(f"    turns {row['turns']:>11}: kernel CPU per turn p50 {row['p50_ms']:.3f} ms, "
              f"p90 {row['p90_ms']:.3f} ms; /proc stat mean {row['stat_mean_ms']:.2f} ms")
    all_sorted = sorted(per_turn_ns)
    overall = {"p50_ms": round(statistics.median(all_sorted) / 1e6, 3),
               "p90_ms": round(all_sorted[int(turns * 0.9)] / 1e6, 3),
               "p99_ms": round(all_sorted[min(turns - 1, int(turns * 0.99))] / 1e6, 3),
               "stat_mean_ms": round((ticks_at[turns] - ticks_at[0]) / TICK * 1000 / turns, 3)}
    print(f"    all turns: p50 {overall['p50_ms']:.3f} ms, p90 {overall['p90_ms']:.3f} ms, "
          f"p99 {overall['p99_ms']:.3f} ms; /proc stat mean {overall['stat_mean_ms']:.3f} ms")
    for turn, figures in seen.items():
        print(f"    after turn {turn:>6}: RSS {figures['rss_mib']:.1f} MiB, {figures['threads']} threads, "
              f"{figures['fds']} descriptors")
    print(json.dumps({"turns": turns, "keep_alive": args.keep_alive, "context_window": args.context_window,
                      "windows": rows, "overall": overall, "after_turn": seen}))


if __name__ == "__main__":
    main()

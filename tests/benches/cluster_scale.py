#!/usr/bin/env python3
"""Cluster throughput benchmark (issue 31): turns per second and added latency with 1, 2 and 3
`oxibot gateway` kernels sharing one data dir and workspace over one NATS JetStream server.

For each kernel count it starts a fresh `nats-server -js` on a free loopback port (its store in
a directory of its own), a scripted OpenAI-compatible LLM in this script (Python standard
library, its own process) that answers every request, streamed or not, after 100 ms, and the
kernels, each with `cluster: {nats, node, ttlSeconds}` and the `api` channel on a port of its
own, listed in `cluster.localChannels` so every kernel runs one. N sessions are spread
round-robin over the kernels' api ports. Two loads:

- burst: every session sends its turns one after another as fast as answers come; turns/s is
  all turns over the wall time of the whole burst.
- steady: an open loop at a fixed rate (turn i is scheduled at start + i/rate, each to session
  i mod N, whatever the answers do); the latency a turn adds over the LLM's 100 ms, p50 and p99.

It prints one Markdown row per kernel count (with the burst's CPU per turn of the kernels, of
nats-server and of the LLM and this client together, and how busy the whole machine was: on a
shared machine the bench's own processes may not be all that runs) and a JSON line with every
figure. `--short`: 20
sessions, 1 and 2 kernels, 2 s of steady load (a check that the bench runs, not a measurement).

Run: `cargo build --release -p oxibot-kernel && python3 tests/benches/cluster_scale.py
[--sessions 300] [--turns 3] [--rate 100] [--seconds 10] [--kernels 1,2,3] [--bin-dir target/release]`
Needs: python3 and nats-server (`apt-get install nats-server`).
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
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The api channel takes only requests carrying its key.
API_KEY = "bench-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
# What the scripted LLM takes to answer; the steady load reports latency over it.
LLM_DELAY_S = 0.1
INSTALL = "apt-get install nats-server"

MOCK = r'''
import json, socket, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DELAY = float(sys.argv[2])

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
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def reply(self, content_type, body):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply("application/json", b'{"object":"list","data":[{"id":"mock-model","object":"model"}]}')

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        messages = request.get("messages") or []
        last = text_of(messages[-1].get("content")) if messages else ""
        marker = last.rfind("BENCH-TURN ")
        text = "echo: " + last[marker:] if marker >= 0 else "- [bench] conversation summarised"
        time.sleep(DELAY)
        base = {"id": "chatcmpl-bench", "created": int(time.time()), "model": request.get("model", "mock-model")}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not request.get("stream"):
            body = dict(base, object="chat.completion", usage=usage,
                        choices=[{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}])
            self.reply("application/json", json.dumps(body).encode())
            return
        base["object"] = "chat.completion.chunk"
        chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]),
                  dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
                  dict(base, choices=[], usage=usage)]
        events = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.reply("text/event-stream", events)

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
server.request_queue_size = 1024
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
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def listening(port):
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def cpu_seconds(processes):
    """user + system CPU of `processes` so far, in seconds."""
    ticks = 0
    for process in processes:
        fields = open(f"/proc/{process.pid}/stat").read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy():
    """(busy, total) jiffies of every CPU of the machine so far, from /proc/stat."""
    fields = [int(f) for f in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def health(port):
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read())


def chat(port, session, text):
    body = json.dumps({"model": "oxibot", "session_id": session, "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body.encode(),
                                     {"Content-Type": "application/json", **AUTH})
    reply = json.loads(urllib.request.urlopen(request, timeout=120).read())
    answer = reply["choices"][0]["message"]["content"]
    if answer != f"echo: {text}":
        raise RuntimeError(f"session {session}: unexpected answer {answer!r} to {text!r}")


class Cluster:
    """One NATS server, one scripted LLM and `kernels` gateways sharing a data dir."""

    def __init__(self, oxibot, nats_server, kernels, sessions):
        self.sessions = sessions
        self.home = tempfile.mkdtemp(prefix="oxibot-cluster-scale-")
        self.processes = []
        self.api_ports = []
        try:
            self.start(oxibot, nats_server, kernels)
        except BaseException:
            print(self.log_tail(), file=sys.stderr)
            self.stop()
            raise

    def start(self, oxibot, nats_server, kernels):
        """nats-server, then the LLM (processes 0 and 1), then the kernels, each once it joined."""
        nats_port, llm_port = free_port(), free_port()
        store = os.path.join(self.home, "nats")
        self.spawn([nats_server, "-js", "-a", "127.0.0.1", "-p", str(nats_port), "-sd", store], "nats.log")
        self.spawn([sys.executable, "-c", MOCK, str(llm_port), str(LLM_DELAY_S)], "llm.log")
        wait_for(lambda: listening(nats_port), 20, "nats-server")
        wait_for(lambda: listening(llm_port), 20, "the scripted LLM")
        for index in range(kernels):
            api_port, http_port = free_port(), free_port()
            config = self.config(index, nats_port, llm_port, api_port, http_port)
            path = os.path.join(self.home, f"config-{index}.json")
            with open(path, "w") as out:
                json.dump(config, out)
            env = dict(os.environ, OXIBOT_HOME=self.home, RUST_LOG="warn")
            self.spawn([str(oxibot), "gateway", "--config", path], f"gateway-{index}.log", env)
            gateway = self.processes[-1]
            wait_for(lambda: self.joined(gateway, http_port), 30, f"kernel {index} joining")
            models = urllib.request.Request(f"http://127.0.0.1:{api_port}/v1/models", headers=AUTH)
            wait_for(lambda: urllib.request.urlopen(models, timeout=1), 30, f"kernel {index}'s api channel")
            self.api_ports.append(api_port)

    @staticmethod
    def joined(gateway, http_port):
        if gateway.poll() is not None:
            raise RuntimeError(f"a gateway exited with status {gateway.returncode}")
        return health(http_port)["cluster"]["connection"] == "connected"

    def config(self, index, nats_port, llm_port, api_port, http_port):
        return {
            "agents": {"defaults": {"workspace": os.path.join(self.home, "workspace"), "model": "mock-model",
                                    "provider": "custom"}},
            "providers": {"custom": {"apiKey": "mock", "apiBase": f"http://127.0.0.1:{llm_port}/v1"}},
            "channels": {"api": {"enabled": True, "host": "127.0.0.1", "port": api_port, "allowFrom": "*",
                                 "apiKey": API_KEY, "timeoutSecs": 120,
                                 # Every session may hold a connection (all on one kernel with 1 kernel).
                                 "maxConnections": max(256, 2 * self.sessions + 64)}},
            "gateway": {"host": "127.0.0.1", "port": http_port, "heartbeat": {"enabled": False}},
            "cluster": {"nats": f"nats://127.0.0.1:{nats_port}", "node": f"kernel-{index}", "ttlSeconds": 10,
                        "localChannels": ["api"]},
        }

    def spawn(self, argv, log, env=None):
        err = open(os.path.join(self.home, log), "w")
        self.processes.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=err))

    def log_tail(self):
        lines = []
        for name in sorted(os.listdir(self.home)):
            if name.startswith("gateway-") and name.endswith(".log"):
                with open(os.path.join(self.home, name)) as log:
                    lines += [f"{name}: {line.rstrip()}" for line in log.readlines()[-5:]]
        return "\n".join(lines)

    def stop(self):
        # The kernels first, while NATS still answers: a kernel that loses it mid-shutdown
        # waits out its timeouts (30 s) before it exits.
        gateways, servers = self.processes[2:], self.processes[:2]
        for group in (gateways, servers):
            for process in group:
                if process.poll() is None:
                    process.terminate()
            for process in group:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        shutil.rmtree(self.home, ignore_errors=True)


def burst(cluster, sessions, turns, tag):
    """Every session sends `turns` turns back to back, all sessions at once: turns per second."""
    ports = cluster.api_ports
    errors = []

    def one_session(index):
        try:
            for turn in range(turns):
                chat(ports[index % len(ports)], f"{tag}-burst-{index}", f"BENCH-TURN {index}.{turn}")
        except Exception as error:  # reported after the burst
            errors.append(error)

    threads = [threading.Thread(target=one_session, args=(i,)) for i in range(sessions)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} burst sessions failed, first: {errors[0]}")
    return sessions * turns / wall, wall


def steady(cluster, sessions, rate, seconds, tag):
    """Turn i starts at start + i/rate to session i mod `sessions`: latency over the LLM's delay."""
    ports = cluster.api_ports
    count = int(rate * seconds)
    added = [None] * count
    errors = []

    def one_turn(index, due):
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        session = index % sessions
        try:
            chat(ports[session % len(ports)], f"{tag}-steady-{session}", f"BENCH-TURN s{index}")
            added[index] = time.perf_counter() - due - LLM_DELAY_S
        except Exception as error:
            errors.append(error)

    # Enough workers that a slow answer never delays the next scheduled start.
    with ThreadPoolExecutor(max_workers=max(64, min(count, sessions))) as pool:
        start = time.perf_counter() + 0.2
        for index in range(count):
            pool.submit(one_turn, index, start + index / rate)
    if errors:
        raise RuntimeError(f"{len(errors)} steady turns failed, first: {errors[0]}")
    ordered = sorted(added)
    return {"p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "target" / "release")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--turns", type=int, default=3, help="turns each session sends in the burst")
    parser.add_argument("--rate", type=float, default=100, help="steady load, turns per second")
    parser.add_argument("--seconds", type=float, default=10, help="steady load duration")
    parser.add_argument("--kernels", default="1,2,3", help="kernel counts to run, comma-separated")
    parser.add_argument("--short", action="store_true", help="20 sessions, 1 and 2 kernels, 2 s steady")
    args = parser.parse_args()
    if args.short:
        args.sessions, args.kernels, args.seconds = 20, "1,2", 2
    oxibot = args.bin_dir / "oxibot"
    if not oxibot.exists():
        sys.exit(f"{oxibot} is missing; build it or pass --bin-dir")
    nats_server = shutil.which("nats-server")
    if not nats_server:
        sys.exit(f"nats-server is missing; install it: {INSTALL}")
    counts = [int(k) for k in args.kernels.split(",")]
    print(f"{args.sessions} sessions round-robin over the kernels' api ports; LLM answers after "
          f"{LLM_DELAY_S * 1000:.0f} ms; burst {args.turns} turns each, steady {args.rate:g} turns/s for "
          f"{args.seconds:g} s; binaries {args.bin_dir}")
    print()
    print("| kernels | burst turns/s | burst wall s | burst CPU ms/turn: kernels, nats-server, LLM + client "
          "| burst machine CPU busy | steady added p50 ms | steady added p99 ms |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    results = []
    for kernels in counts:
        try:
            cluster = Cluster(oxibot, nats_server, kernels, args.sessions)
        except RuntimeError as error:
            sys.exit(f"{kernels} kernels: {error}")
        try:
            tag = f"k{kernels}"
            before = (cpu_seconds(cluster.processes[2:]), cpu_seconds(cluster.processes[:1]), machine_busy(),
                      cpu_seconds(cluster.processes[1:2]) + sum(os.times()[:2]))
            throughput, wall = burst(cluster, args.sessions, args.turns, tag)
            after = (cpu_seconds(cluster.processes[2:]), cpu_seconds(cluster.processes[:1]), machine_busy(),
                     cpu_seconds(cluster.processes[1:2]) + sum(os.times()[:2]))
            latency = steady(cluster, args.sessions, args.rate, args.seconds, tag)
        except Exception as error:
            print(cluster.log_tail(), file=sys.stderr)
            cluster.stop()
            sys.exit(f"{kernels} kernels: {error}")
        cluster.stop()
        row = {"kernels": kernels, "burst_turns_per_s": round(throughput, 1), "burst_wall_s": round(wall, 2),
               "kernel_cpu_ms_per_turn": round((after[0] - before[0]) * 1000 / (args.sessions * args.turns), 2),
               "nats_cpu_ms_per_turn": round((after[1] - before[1]) * 1000 / (args.sessions * args.turns), 2),
               "llm_and_client_cpu_ms_per_turn": round((after[3] - before[3]) * 1000 / (args.sessions * args.turns), 2),
               "machine_busy_pct": round(100 * (after[2][0] - before[2][0]) / max(1, after[2][1] - before[2][1])),
               "steady_p50_ms": round(latency["p50_ms"], 1), "steady_p99_ms": round(latency["p99_ms"], 1)}
        results.append(row)
        print(f"| {kernels} | {row['burst_turns_per_s']} | {row['burst_wall_s']} | "
              f"{row['kernel_cpu_ms_per_turn']}, {row['nats_cpu_ms_per_turn']}, {row['llm_and_client_cpu_ms_per_turn']} | "
              f"{row['machine_busy_pct']} % | "
              f"{row['steady_p50_ms']} | {row['steady_p99_ms']} |", flush=True)
    print(json.dumps({"sessions": args.sessions, "turns": args.turns, "rate": args.rate,
                      "seconds": args.seconds, "rows": results}))


if __name__ == "__main__":
    main()

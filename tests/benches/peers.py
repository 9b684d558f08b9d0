#!/usr/bin/env python3
"""Paired benchmark of oxibot against its peers, nanobot (Python) and NullClaw (Zig), in one run
against one scripted LLM (the mock below speaks OpenAI Chat Completions) -- the "Peers" table
under issue 30 in BENCHMARKS.md.

Figures, each for every peer whose program is given and present:
- cold `agent -m hello`: wall, CPU (user+sys of the process and the children it waited for),
  peak RSS of the process itself (its VmHWM in /proc, read every half millisecond until it
  exits: wait4's figure cannot serve, as Linux keeps the RSS of the forked Python from before
  the exec in it) and the most threads seen in /proc while it ran; median and min-max
  over --runs runs, the runs of the peers interleaved, and the ratio to NullClaw's run of the
  same round (median of the per-round ratios);
- idle gateway with one API-style channel (oxibot: the api channel; nanobot: `serve`;
  NullClaw: its gateway with /webhook): RSS and PSS summed over the process and its
  descendants, read from /proc/PID/smaps_rollup after it has settled;
- what a user installs (oxibot: the shipped executables in --oxibot-bin-dir; nanobot: its
  virtualenv; NullClaw: its binary);
- CPU per turn over --turns turns in one session of a long-running process (oxibot: gateway
  with the api channel over HTTP; nanobot: `serve` over HTTP; NullClaw: interactive `agent`
  fed through stdin): the serving process's own CPU (its threads' schedstat, checked against
  /proc/PID/stat's clock ticks over the whole run), mean of the first and of the last tenth;
  CPU of the children it waited for (NullClaw's `curl`) apart.

A peer whose program is missing is skipped with a line saying so. `--short` takes few runs and
turns (scripts/bench-short runs it so for oxibot alone). Needs: python3 and the programs.
Run: `python3 tests/benches/peers.py --oxibot-bin-dir target/release
--nanobot ~/.cache/oxibot-bench/nanobot/bin/nanobot --nullclaw PATH/zig-out/bin/nullclaw`.
"""

import argparse
import http.server
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TICK = os.sysconf("SC_CLK_TCK")


# ---------- the scripted LLM ----------

class MockLlm(http.server.BaseHTTPRequestHandler):
    """Answers every chat request with `echo: <last user text>`, streamed or not, and counts them."""

    protocol_version = "HTTP/1.0"
    requests = 0

    def log_message(self, *_):
        pass

    def do_GET(self):
        self.reply(200, "application/json", b'{"object":"list","data":[{"id":"mock-model","object":"model"}]}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        MockLlm.requests += 1
        text = "echo: " + last_user_text(body.get("messages", []))[:60]
        if body.get("stream"):
            self.reply(200, "text/event-stream", streamed(text))
        else:
            self.reply(200, "application/json", json.dumps(completion(text)).encode())

    def reply(self, status, kind, payload):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def last_user_text(messages):
    """The text of the last user message (string or content parts)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def completion(text):
    """A whole non-streamed chat completion."""
    message = {"role": "assistant", "content": text}
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "mock-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": USAGE}


def streamed(text):
    """The same answer as SSE chunks of 16 characters, a finish chunk, usage and [DONE]."""
    def chunk(delta, finish=None):
        return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": text[i:i + 16]}) for i in range(0, len(text), 16)]
    events += [chunk({}, "stop"), {**chunk({}), "choices": [], "usage": USAGE}]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


def start_mock():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MockLlm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------- /proc readings ----------

def children_of(pid):
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def tree(pid):
    """The process and every descendant."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children_of(p)
    return found


def status_field(pid, field):
    """The number of `field` in /proc/PID/status (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def threads_of(pid):
    return status_field(pid, "Threads:")


def rollup_kib(pid):
    """Rss and Pss of one process from smaps_rollup, in KiB."""
    rows = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] in ("Rss:", "Pss:"):
                rows[parts[0][:-1]] = int(parts[1])
    except OSError:
        pass
    return rows.get("Rss", 0), rows.get("Pss", 0)


def own_cpu_s(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def threads_cpu_s(pid):
    """On-CPU time of the process's live threads from schedstat, in ns resolution (a thread that
    has ended is left out; /proc/PID/stat counts it, but only in clock ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def waited_children_cpu_s(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


# ---------- the peers ----------

class Peer:
    """One program under test: how to run it one-shot, as a gateway and for many turns."""

    name = ""

    def __init__(self, program, home, llm_port):
        self.program, self.home, self.llm = Path(program), Path(home), llm_port
        self.home.mkdir(parents=True, exist_ok=True)

    def env(self):
        return {**os.environ, "HOME": str(self.home)}


class Oxibot(Peer):
    name = "oxibot"

    def env(self):
        env = {**os.environ, "OXIBOT_HOME": str(self.home)}
        env.pop("RUST_LOG", None)
        return env

    def configure(self):
        subprocess.run([self.program, "onboard"], env=self.env(), stdin=subprocess.DEVNULL, capture_output=True)
        path = self.home / "config.json"
        config = json.loads(path.read_text())
        defaults = config.setdefault("agents", {}).setdefault("defaults", {})
        defaults.update(provider="custom", model="mock-model", contextWindowTokens=200000, maxTokens=8192,
                        workspace=str(self.home / "workspace"))
        config.setdefault("providers", {}).setdefault("custom", {}).update(
            apiBase=f"http://127.0.0.1:{self.llm}/v1", apiKey="mock")
        self.api_port = free_port()
        config.setdefault("channels", {})["api"] = {"enabled": True, "host": "127.0.0.1", "port": self.api_port,
                                                    "allowFrom": "*", "apiKey": "mock"}
        config.setdefault("gateway", {}).update(host="127.0.0.1", port=free_port())
        path.write_text(json.dumps(config, indent=2))

    def one_shot(self, k):
        return [str(self.program), "agent", "-s", f"cold:{k}", "-m", "hello"]

    def gateway(self):
        return [str(self.program), "gateway"], self.api_port

    def turns(self):
        return "http", [str(self.program), "gateway"], self.api_port

    def installed_bytes(self):
        bins = self.program.parent
        return sum(p.stat().st_size for p in bins.iterdir()
                   if (p.name == "oxibot" or p.name.startswith("oxibot-")) and p.is_file()
                   and os.access(p, os.X_OK) and not p.suffix)


class Nanobot(Peer):
    name = "nanobot"

    def env(self):
        venv = self.program.parent.parent
        return {**os.environ, "HOME": str(self.home), "TIKTOKEN_CACHE_DIR": str(venv / "tiktoken"),
                "PYTHONPATH": str(venv / "api-extra")}

    def configure(self):
        subprocess.run([self.program, "onboard"], env=self.env(), stdin=subprocess.DEVNULL, capture_output=True)
        path = self.home / ".nanobot" / "config.json"
        config = json.loads(path.read_text())
        defaults = config.setdefault("agents", {}).setdefault("defaults", {})
        defaults.update(provider="custom", model="mock-model", contextWindowTokens=200000, maxTokens=8192)
        config.setdefault("providers", {}).setdefault("custom", {}).update(
            apiBase=f"http://127.0.0.1:{self.llm}/v1", apiKey="mock")
        path.write_text(json.dumps(config, indent=2))
        self.api_port = free_port()

    def one_shot(self, k):
        return [str(self.program), "agent", "-s", f"cold{k}", "-m", "hello"]

    def gateway(self):
        return [str(self.program), "serve", "--host", "127.0.0.1", "--port", str(self.api_port)], self.api_port

    def turns(self):
        return "http", self.gateway()[0], self.api_port

    def installed_bytes(self):
        return tree_bytes(self.program.parent.parent)


class NullClaw(Peer):
    name = "NullClaw"

    def configure(self):
        subprocess.run([self.program, "onboard", "--api-key", "mock", "--provider", "vllm"], env=self.env(),
                       stdin=subprocess.DEVNULL, capture_output=True)
        path = self.home / ".nullclaw" / "config.json"
        config = json.loads(path.read_text()) if path.exists() else {}
        config.setdefault("models", {}).setdefault("providers", {})["vllm"] = {
            "api_key": "mock", "base_url": f"http://127.0.0.1:{self.llm}/v1"}
        config.setdefault("agents", {}).setdefault("defaults", {})["model"] = {"primary": "vllm/mock-model"}
        self.api_port = free_port()
        config.setdefault("gateway", {}).update(port=self.api_port, host="127.0.0.1", require_pairing=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2))

    def one_shot(self, k):
        return [str(self.program), "agent", "-s", f"cold{k}", "-m", "hello"]

    def gateway(self):
        return [str(self.program), "gateway", "--port", str(self.api_port)], self.api_port

    def turns(self):
        return "stdin", [str(self.program), "agent", "-s", "long"], None

    def installed_bytes(self):
        return self.program.stat().st_size


def tree_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and not f.is_symlink())


# ---------- measurements ----------

def cold_run(peer, k):
    """One one-shot run: wall ms, CPU ms, peak RSS MiB, most threads seen."""
    asked = MockLlm.requests
    started = time.perf_counter()
    proc = subprocess.Popen(peer.one_shot(k), env=peer.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    most, peak_kib = 0, 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        most = max(most, threads_of(proc.pid))
        peak_kib = max(peak_kib, status_field(proc.pid, "VmHWM:"))
        time.sleep(0.0005)
    wall = (time.perf_counter() - started) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{peer.name}: `{' '.join(peer.one_shot(k))}` failed ({proc.returncode})")
    if MockLlm.requests == asked:
        sys.exit(f"{peer.name}: `{' '.join(peer.one_shot(k))}` never asked the scripted LLM (misconfigured?)")
    return {"wall": wall, "cpu": (usage.ru_utime + usage.ru_stime) * 1000, "rss": peak_kib / 1024,
            "threads": most}


def wait_http(port, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def idle_gateway(peer, settle_s):
    """RSS and PSS (MiB) of the gateway's process tree once it has settled, and its process count."""
    command, port = peer.gateway()
    proc = subprocess.Popen(command, env=peer.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not wait_http(port, proc):
            return None
        time.sleep(settle_s)
        pids = tree(proc.pid)
        rss = pss = 0
        for pid in pids:
            r, p = rollup_kib(pid)
            rss, pss = rss + r, pss + p
        return {"rss": rss / 1024, "pss": pss / 1024, "processes": len(pids)}
    finally:
        stop(proc)


def chat(port, text):
    body = json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": text}],
                       "user": "peers-bench", "session_id": "peers-bench"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                     {"Content-Type": "application/json", "Authorization": "Bearer mock",
                                      "X-Session-Id": "peers-bench"})
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()


def per_turn_cpu(peer, turns):
    """CPU ms of the serving process for each turn of one session (own CPU; waited children apart)."""
    mode, command, port = peer.turns()
    stdin = subprocess.PIPE if mode == "stdin" else subprocess.DEVNULL
    proc = subprocess.Popen(command, env=peer.env(), stdin=stdin, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    own, children = [], []
    ticks0 = None
    try:
        if mode == "http" and not wait_http(port, proc):
            return None
        if mode == "stdin":
            time.sleep(0.5)
        ticks0 = own_cpu_s(proc.pid)
        for k in range(turns):
            cpu0, kids0, asked = threads_cpu_s(proc.pid), waited_children_cpu_s(proc.pid), MockLlm.requests
            if mode == "http":
                chat(port, f"turn {k}: hello there")
            else:
                proc.stdin.write(f"turn {k}: hello there\n".encode())
                proc.stdin.flush()
                deadline = time.time() + 60
                while MockLlm.requests == asked and time.time() < deadline and proc.poll() is None:
                    time.sleep(0.002)
                time.sleep(0.05)  # the answer printed and the session saved
            own.append((threads_cpu_s(proc.pid) - cpu0) * 1000)
            children.append((waited_children_cpu_s(proc.pid) - kids0) * 1000)
        ticks = (own_cpu_s(proc.pid) - ticks0) * 1000 / turns
    finally:
        stop(proc)
    tenth = max(1, turns // 10)
    return {"first": statistics.mean(own[:tenth]), "last": statistics.mean(own[-tenth:]),
            "all": statistics.mean(own), "ticks": ticks, "children": statistics.mean(children)}


# ---------- the table ----------

def spread(values, unit, digits=1):
    return f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oxibot-bin-dir", type=Path, default=ROOT / "target" / "release")
    parser.add_argument("--nanobot", type=Path, help="the `nanobot` of its virtualenv (skipped when not given)")
    parser.add_argument("--nullclaw", type=Path, help="the `nullclaw` release binary (skipped when not given)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds an idle gateway settles")
    parser.add_argument("--short", action="store_true", help="3 runs, 10 turns, 1 s settle")
    args = parser.parse_args()
    if args.short:
        args.runs, args.turns, args.settle = 3, 10, 1.0

    llm = start_mock()
    base = Path(tempfile.mkdtemp(prefix="oxibot-peers-"))
    wanted = [(Oxibot, args.oxibot_bin_dir / "oxibot"), (Nanobot, args.nanobot), (NullClaw, args.nullclaw)]
    peers = []
    for kind, program in wanted:
        if program is None:
            print(f"skipped {kind.name}: no path given")
        elif program.exists():
            peers.append(kind(program, base / kind.name, llm))
        else:
            print(f"skipped {kind.name}: {program} is missing")
    if not peers:
        sys.exit("no peer to measure")
    try:
        for peer in peers:
            peer.configure()
        report(peers, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(peers, args):
    cold = {p.name: [] for p in peers}
    for k in range(args.runs):
        for peer in peers:
            cold[peer.name].append(cold_run(peer, k))
    print(f"\npeers, {args.runs} cold runs (interleaved), {args.turns} turns, one scripted LLM\n")
    print("| figure | " + " | ".join(p.name for p in peers) + " |")
    print("|---|" + "---|" * len(peers))
    for key, label, unit in [("wall", "cold `agent -m hello` wall", "ms"), ("cpu", "same: CPU (user+sys, children)", "ms"),
                             ("rss", "same: peak RSS", "MiB"), ("threads", "same: most threads seen", "")]:
        cells = []
        for peer in peers:
            values = [r[key] for r in cold[peer.name]]
            cell = spread(values, unit, 0 if key == "threads" else 1).replace("  ", " ")
            if "NullClaw" in cold and peer.name != "NullClaw" and key != "threads":
                ratios = [a[key] / b[key] for a, b in zip(cold[peer.name], cold["NullClaw"]) if b[key]]
                cell += f", ×{statistics.median(ratios):.2f} NullClaw"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for peer in peers:
        idle = idle_gateway(peer, args.settle)
        cells.append("did not start" if idle is None else
                     f"{idle['rss']:.1f} / {idle['pss']:.1f} MiB ({idle['processes']} processes)")
    print("| idle gateway with an API-style channel, RSS / PSS of the tree | " + " | ".join(cells) + " |")
    print("| what a user installs | " + " | ".join(f"{p.installed_bytes() / 1e6:.2f} MB" for p in peers) + " |")
    cells = []
    for peer in peers:
        turn = per_turn_cpu(peer, args.turns)
        if turn is None:
            cells.append("did not start")
            continue
        extra = f" (+{turn['children']:.2f} ms in children)" if turn["children"] > 0 else ""
        cells.append(f"{turn['first']:.2f} → {turn['last']:.2f} ms (mean {turn['all']:.2f}; {turn['ticks']:.2f} from stat){extra}")
    print(f"| CPU per turn of the serving process, first → last tenth of {args.turns} turns | "
          + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

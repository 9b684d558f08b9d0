#!/usr/bin/env python3
"""Prompt-size benchmark: the bytes and tokens of the first model request for "hello" in a new
session, split into system prompt, tool schemas and the rest, for oxibot and (when installed)
nanobot, against the same recording LLM.

oxibot is measured twice on a freshly onboarded workspace: `oxibot agent -m hello` (the tools
a one-shot run offers) and `oxibot gateway` with the `api` channel, "hello" sent to
`POST /v1/chat/completions` (the full default tool set: the fs, shell and web plugins and the
`spawn`, `memory`, `message` and `cron` built-ins). Each is run in two sessions, and the script
checks that the stable prefix (system prompt and tool schemas) is byte-identical between them.

nanobot (`nanobot agent -m hello`, its default onboarding) offers other tools as well. "nanobot
for the same tools" is its whole request minus the schemas of the tools oxibot does not offer
(its system prompt is counted whole, with the guidance it gives for those tools too); the
tools are paired by what they do (`glob` = `find_files`, oxibot's `memory` has no nanobot
counterpart).

Tokens are counted with tiktoken's `cl100k_base` when the `tiktoken` module can load it (run
the script with nanobot's virtualenv Python, whose `TIKTOKEN_CACHE_DIR` holds the file, see
`../shared/bench/setup_nanobot.sh`); otherwise only bytes are printed. Tokens of a request =
system text + each message's text + the tool array as JSON. "Uncached per turn" is what
follows the stable prefix: what a provider with a prompt cache processes afresh on the first
model call of a turn (the runtime block and the user's message; later turns add the
conversation since the last cache point).

Run: `cargo build --release -p oxibot-kernel && ~/.cache/oxibot-bench/nanobot/bin/python
tests/benches/prompt_size.py [--bin-dir target/release] [--nanobot PATH] [--dump DIR]`
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NANOBOT = Path.home() / ".cache/oxibot-bench/nanobot"
API_KEY = "bench-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}

RECORDER = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUT = sys.argv[2]
COUNT = 0

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "mock-model", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global COUNT
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        COUNT += 1
        with open(f"{OUT}/request-{COUNT}.json", "wb") as f:
            f.write(raw)
        req = json.loads(raw)
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "mock-model"}
        events = [dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]),
                  dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])]
        if req.get("stream"):
            body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            kind = "text/event-stream"
        else:
            body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "mock-model",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                            "finish_reason": "stop"}]}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
'''

# oxibot tool -> nanobot tool that does the same.
SAME_TOOL = {
    "read_file": "read_file", "write_file": "write_file", "edit_file": "edit_file", "list_dir": "list_dir",
    "glob": "find_files", "grep": "grep", "exec": "exec", "web_fetch": "web_fetch", "web_search": "web_search",
    "spawn": "spawn", "message": "message", "cron": "cron",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, seconds=30, headers=None):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing answered at {url}")


def wait_ready(url, seconds=30):
    """Waits until the gateway's health lists every plugin as running or idle (idle: started on
    first use, its tools offered from the manifest it remembers): a turn that starts while a
    tool plugin is still starting is offered fewer tools."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            plugins = json.loads(urllib.request.urlopen(url, timeout=1).read()).get("plugins") or []
            if plugins and all(p.get("state") in ("running", "idle") for p in plugins):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise SystemExit(f"the gateway at {url} did not become ready")


class Recorder:
    """The recording LLM in its own process; each request lands in `dir/request-N.json`."""

    def __init__(self, base):
        self.dir = Path(base) / "requests"
        self.dir.mkdir(parents=True)
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-c", RECORDER, str(self.port), str(self.dir)])
        wait_http(f"http://127.0.0.1:{self.port}/v1/models")

    def url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def count(self):
        return len(list(self.dir.glob("request-*.json")))

    def request(self, n):
        return (self.dir / f"request-{n}.json").read_bytes()

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def point_at(config_path, llm_url, extra=None):
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    defaults = config.setdefault("agents", {}).setdefault("defaults", {})
    defaults.update(provider="custom", model="mock-model", contextWindowTokens=200000, maxTokens=8192)
    config.setdefault("providers", {}).setdefault("custom", {}).update(apiBase=llm_url, apiKey="mock")
    for key, value in (extra or {}).items():
        config.setdefault(key, {}).update(value)
    config_path.write_text(json.dumps(config, indent=2))


def oxibot_one_shot(bins, home, recorder):
    """The first requests of `oxibot agent -m hello` in two new sessions."""
    env = dict(os.environ, OXIBOT_HOME=str(home))
    bodies = []
    for session in ("bench:1", "bench:2"):
        before = recorder.count()
        subprocess.run([bins / "oxibot", "agent", "-s", session, "-m", "hello"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        bodies.append(recorder.request(before + 1))
    return bodies


def oxibot_gateway(bins, home, recorder):
    """The first requests for "hello" in two new sessions of the api channel of `oxibot gateway`."""
    api, health = free_port(), free_port()
    point_at(home / "config.json", recorder.url(), {
        # The api channel serves only requests that carry its key.
        "channels": {"api": {"enabled": True, "host": "127.0.0.1", "port": api, "allowFrom": "*", "apiKey": API_KEY}},
        "gateway": {"host": "127.0.0.1", "port": health},
    })
    env = dict(os.environ, OXIBOT_HOME=str(home))
    gateway = subprocess.Popen([bins / "oxibot", "gateway"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{api}/v1/models", headers=AUTH)
        wait_ready(f"http://127.0.0.1:{health}/health")
        bodies = []
        for session in ("bench-1", "bench-2"):
            before = recorder.count()
            request = urllib.request.Request(
                f"http://127.0.0.1:{api}/v1/chat/completions",
                data=json.dumps({"model": "oxibot", "session_id": session,
                                 "messages": [{"role": "user", "content": "hello"}]}).encode(),
                headers={"Content-Type": "application/json", **AUTH})
            urllib.request.urlopen(request, timeout=60).read()
            bodies.append(recorder.request(before + 1))
        return bodies
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)


def nanobot_one_shot(nanobot, base, recorder):
    """The first request of `nanobot agent -m hello` after `nanobot onboard`."""
    home = base / "nanobot-home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), TIKTOKEN_CACHE_DIR=str(nanobot / "tiktoken"))
    subprocess.run([nanobot / "bin/nanobot", "onboard"], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    point_at(home / ".nanobot/config.json", recorder.url())
    before = recorder.count()
    subprocess.run([nanobot / "bin/nanobot", "agent", "-s", "bench1", "-m", "hello"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return recorder.request(before + 1)


def text_of(content):
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def compact(value):
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def tokenizer():
    try:
        import tiktoken
        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 - any failure means "no token counts"
        return None


def figures(raw, enc, keep_tools=None):
    """Bytes (and tokens) of one request, optionally counting only the tools in `keep_tools`."""
    body = json.loads(raw)
    tools = body.get("tools") or []
    dropped = [t for t in tools if keep_tools is not None and t["function"]["name"] not in keep_tools]
    kept = [t for t in tools if t not in dropped]
    system = [m for m in body["messages"] if m["role"] == "system"]
    others = [m for m in body["messages"] if m["role"] != "system"]
    out = {
        "tools": len(kept),
        "bytes": len(raw) - sum(compact(t) + 1 for t in dropped),
        "system_bytes": sum(len(text_of(m["content"]).encode()) for m in system),
        "tools_bytes": compact(kept),
        "messages_bytes": compact(others),
    }
    if enc:
        out["system_tokens"] = sum(len(enc.encode(text_of(m["content"]))) for m in system)
        out["tools_tokens"] = len(enc.encode(json.dumps(kept, separators=(",", ":")))) if kept else 0
        out["messages_tokens"] = sum(len(enc.encode(text_of(m.get("content")))) for m in others)
        out["tokens"] = out["system_tokens"] + out["tools_tokens"] + out["messages_tokens"]
    return out


def stable_prefix(raw):
    body = json.loads(raw)
    system = [m for m in body["messages"] if m["role"] == "system"]
    return json.dumps([system, body.get("tools")], sort_keys=True)


def row(label, f):
    tokens = f" | {f['tokens']:,} ({f['system_tokens']:,} + {f['tools_tokens']:,} + {f['messages_tokens']:,})" \
        if "tokens" in f else ""
    return (f"| {label} | {f['tools']} | {f['bytes']:,} | {f['system_bytes']:,} | {f['tools_bytes']:,} "
            f"| {f['messages_bytes']:,}{tokens} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=str(ROOT / "target/release"))
    parser.add_argument("--nanobot", default=str(NANOBOT), help="nanobot's virtualenv (skipped when absent)")
    parser.add_argument("--dump", help="copy every recorded request into this directory")
    args = parser.parse_args()
    bins, nanobot = Path(args.bin_dir).resolve(), Path(args.nanobot)
    enc = tokenizer()
    base = Path(tempfile.mkdtemp(prefix="oxibot-prompt-size-"))
    recorder = Recorder(base)
    try:
        home = base / "oxibot-home"
        home.mkdir()
        env = dict(os.environ, OXIBOT_HOME=str(home))
        subprocess.run([bins / "oxibot", "onboard"], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        point_at(home / "config.json", recorder.url())
        results = {"oxibot agent -m": oxibot_one_shot(bins, home, recorder),
                   "oxibot gateway (api)": oxibot_gateway(bins, home, recorder)}
        nanobot_raw = nanobot_one_shot(nanobot, base, recorder) if (nanobot / "bin/nanobot").exists() else None
        if args.dump:
            shutil.copytree(recorder.dir, args.dump, dirs_exist_ok=True)
    finally:
        recorder.stop()
        shutil.rmtree(base, ignore_errors=True)

    head = "| request | tools | bytes | system prompt | tool schemas | messages"
    head += " | tokens cl100k (system + tools + messages) |" if enc else " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    report = {}
    for label, (first, second) in results.items():
        f = figures(first, enc)
        report[label] = f
        print(row(label, f))
        same = stable_prefix(first) == stable_prefix(second)
        report[label]["prefix_identical_across_sessions"] = same
        if not same:
            print(f"WARNING: {label}: the stable prefix differs between two sessions", file=sys.stderr)
    if nanobot_raw:
        full = figures(nanobot_raw, enc)
        print(row("nanobot agent -m (all its tools)", full))
        for label, (first, _) in results.items():
            names = {t["function"]["name"] for t in json.loads(first)["tools"]}
            same = figures(nanobot_raw, enc, {SAME_TOOL[n] for n in names if n in SAME_TOOL})
            print(row(f"nanobot, the tools of {label}", same))
            ratio = report[label]["bytes"] / same["bytes"]
            report[label]["nanobot_same_tools_bytes"] = same["bytes"]
            report[label]["ratio_to_nanobot"] = round(ratio, 3)
            if enc:
                report[label]["nanobot_same_tools_tokens"] = same["tokens"]
    for label, f in report.items():
        line = f"{label}: prefix identical across sessions: {f['prefix_identical_across_sessions']}"
        if "ratio_to_nanobot" in f:
            line += f"; bytes / nanobot's for the same tools: {f['ratio_to_nanobot']:.3f}"
        if enc:
            line += f"; uncached tokens per turn (after the cached prefix): {f['messages_tokens']}"
        print(line)
    print(json.dumps(report))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Idle memory of `oxibot gateway` with the API channel: RSS and PSS (proportional set size,
`Pss` of `/proc/<pid>/smaps_rollup`, summed as smem does) of the gateway and every process
under it, after it has served one `/health` and sat idle. With one executable (issue 30) the
channel process shares the kernel file's pages, which PSS splits between them.

Run: `cargo build --release -p oxibot-kernel && python3 tests/benches/idle_pss.py
[--bin-dir target/release] [--idle 3]`
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


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rollup(pid):
    """(RSS, PSS, PSS of anonymous memory, PSS of file pages) of a process in KiB from its
    smaps_rollup: the heap, stacks and relocated data against the executable's and libraries'
    pages, which the page cache holds and the system can drop and read again."""
    fields = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            fields[parts[0][:-1]] = int(parts[1])
    return fields.get("Rss", 0), fields.get("Pss", 0), fields.get("Pss_Anon", 0), fields.get("Pss_File", 0)


def tree(root):
    """`root` and every process under it, with their command lines."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def cmdline(pid):
    return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()


def start(oxibot, env, api, health, idle):
    """Starts the gateway, waits for its health endpoint and the API channel's, then `idle` s."""
    gateway = subprocess.Popen([str(oxibot), "gateway"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{api}/health", timeout=1).read()
            urllib.request.urlopen(f"http://127.0.0.1:{health}/health", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        stop(gateway)
        sys.exit("the gateway or its API channel did not come up")
    time.sleep(idle)
    return gateway


def stop(gateway):
    gateway.terminate()
    gateway.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=str(ROOT / "target/release"))
    parser.add_argument("--idle", type=float, default=3.0, help="seconds idle before measuring")
    parser.add_argument("--cold", action="store_true", help="measure the first start (tool plugins running)")
    args = parser.parse_args()
    oxibot = (Path(args.bin_dir) / "oxibot").resolve()
    if not oxibot.exists():
        sys.exit(f"{oxibot} is missing: cargo build --release -p oxibot-kernel")
    home = tempfile.mkdtemp(prefix="oxibot-idle-pss-")
    health, api = free_port(), free_port()
    config = {
        "agents": {"defaults": {"workspace": os.path.join(home, "workspace"), "model": "mock-model",
                                "provider": "custom"}},
        "providers": {"custom": {"apiKey": "mock", "apiBase": "http://127.0.0.1:9/v1"}},
        "channels": {"api": {"enabled": True, "host": "127.0.0.1", "port": api, "apiKey": "bench-key"}},
        "gateway": {"host": "127.0.0.1", "port": health},
    }
    with open(os.path.join(home, "config.json"), "w") as out:
        json.dump(config, out)
    env = dict(os.environ, OXIBOT_HOME=home)
    # A first start remembers the tool plugins' manifests; from the second on they start only
    # when called, as on a user's machine (`--cold` measures the first).
    if not args.cold:
        stop(start(oxibot, env, api, health, args.idle))
    gateway = start(oxibot, env, api, health, args.idle)
    try:
        total_rss = total_pss = total_anon = total_file = 0
        print("| process | RSS MiB | PSS MiB | of which anonymous | of which file pages |")
        print("|---|---|---|---|---|")
        for pid in tree(gateway.pid):
            try:
                rss, pss, anon, file = rollup(pid)
                line = cmdline(pid)
            except OSError:
                continue
            total_rss, total_pss, total_anon, total_file = (total_rss + rss, total_pss + pss, total_anon + anon,
                                                            total_file + file)
            name = line.replace(str(oxibot.resolve()), 'oxibot').replace(str(oxibot), 'oxibot')[:70]
            print(f"| `{name}` | {rss / 1024:.2f} | {pss / 1024:.2f} | {anon / 1024:.2f} | {file / 1024:.2f} |")
        print(f"| **tree** | **{total_rss / 1024:.2f}** | **{total_pss / 1024:.2f}** | **{total_anon / 1024:.2f}** "
              f"| **{total_file / 1024:.2f}** |")
    finally:
        stop(gateway)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

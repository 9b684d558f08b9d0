#!/usr/bin/env python3
"""Stalled uploads against the api channel: opens N connections that each send the headers
of a chat-completion request and a few bytes of its body, then stop; prints how many file
descriptors the channel plugin holds while they stall, and again once its body timeout has
passed.

Run: cargo build --workspace && python3 tests/benches/api_stall.py [--connections 1100]
     [--binaries target/debug]
"""

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def find_plugin(role):
    """The process of the bundled plugin `role` (`["__channel", "api"]`), the one executable
    started as that plugin."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                parts = cmdline.read().split(b"\0")
        except OSError:
            continue
        if parts[1:3] == [word.encode() for word in role]:
            return int(pid)
    return None


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_for(check, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            value = check()
        except OSError:  # not listening yet
            value = None
        if value:
            return value
        time.sleep(0.1)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--binaries", default="target/debug")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.connections + 256)), hard))
    binaries = os.path.abspath(args.binaries)
    home = tempfile.mkdtemp(prefix="api-stall-")
    port, health = free_port(), free_port()
    config = {
        "agents": {"defaults": {"workspace": os.path.join(home, "workspace")}},
        "providers": {"custom": {"apiKey": "unused", "apiBase": "http://127.0.0.1:9/v1"}},
        "channels": {"api": {"enabled": True, "port": port, "apiKey": "bench-key", "bodyTimeoutSecs": 5}},
        "gateway": {"port": health},
    }
    with open(os.path.join(home, "config.json"), "w") as out:
        json.dump(config, out)
    env = dict(os.environ, OXIBOT_HOME=home)
    gateway = subprocess.Popen([os.path.join(binaries, "oxibot"), "gateway"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = wait_for(lambda: find_plugin(["__channel", "api"]), 20)
        wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1), 20)
        before = open_fds(pid)
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer bench-key\r\n"
                b"content-type: application/json\r\n"
                b"content-length: 1000\r\n\r\n{\"model\"")
        stalled, refused = [], 0
        for _ in range(args.connections):
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                conn.sendall(head)
                stalled.append(conn)
            except OSError:
                refused += 1
        time.sleep(1)
        during = open_fds(pid)
        time.sleep(7)
        after = open_fds(pid)
        answered = 0
        for conn in stalled:
            conn.settimeout(0.2)
            try:
                if conn.recv(64).startswith(b"HTTP/1.1 408"):
                    answered += 1
            except OSError:
                pass
            conn.close()
        print(f"api channel, {args.connections} stalled uploads (bodyTimeoutSecs 5, maxConnections default):")
        print(f"  plugin fds before: {before}, while stalled: {during}, 7 s later: {after}")
        print(f"  connections refused at connect: {refused}, answered 408: {answered}")
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

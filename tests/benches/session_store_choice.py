#!/usr/bin/env python3
"""Where a cluster keeps its sessions (issue 31): the session files on storage every kernel
shares, or a JetStream stream per session. Measures what each costs on the paths a session
takes: a durable append (every message of a turn) and a load of the whole session (a kernel
taking a session over).

- files: what the session store does per append — open the session's file for appending,
  write one JSON line, `fsync`, close — and, to load, read and parse every line;
- JetStream R1 (one `nats-server -js`) and R3 (three servers in a cluster, the stream on all
  three): publish the same line to `oxibot.session.<key>` and wait for JetStream's
  acknowledgement (stored, on every replica); to load, one ephemeral pull consumer on the
  session's subject fetching every message in one batch.

The NATS client is the protocol itself over a socket (standard library only), the same for
both stream cases; the files case runs in this process too, so the client's own overhead is
alike. Prints one Markdown row per store (append p50 / p99 in ms, load time for the whole
session) and a JSON line. `--short`: 40 appends (a check that the bench runs).

Run: `python3 tests/benches/session_store_choice.py [--appends 500] [--line-bytes 400]`
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
import time

INSTALL = "apt-get install nats-server"
STREAM = "OXIBOT_SESSIONS"
SUBJECT = "oxibot.session.telegram=3A42"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(port, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nats-server never listened on {port}")


class Nats:
    """A minimal NATS client: requests with replies on one inbox, headers understood."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A JetStream still electing its leaders may not answer at all: a request gives up.
        self.sock.settimeout(5)
        self.buf = b""
        self.line()  # INFO
        self.send(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\nPING\r\n')
        while self.line() != b"PONG":
            pass
        self.send(b"SUB _INBOX.bench.* 1\r\n")
        self.count = 0

    def send(self, data):
        self.sock.sendall(data)

    def fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("nats-server closed the connection")
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def take(self, size):
        while len(self.buf) < size + 2:
            self.fill()
        data, self.buf = self.buf[:size], self.buf[size + 2:]
        return data

    def next_message(self):
        """The next MSG or HMSG: (subject, headers bytes, payload bytes)."""
        while True:
            line = self.line()
            if line == b"PING":
                self.send(b"PONG\r\n")
                continue
            parts = line.split()
            if not parts or parts[0] not in (b"MSG", b"HMSG"):
                continue
            if parts[0] == b"MSG":
                return parts[1], b"", self.take(int(parts[-1]))
            header_len, total = int(parts[-2]), int(parts[-1])
            data = self.take(total)
            return parts[1], data[:header_len], data[header_len:]

    def request(self, subject, payload):
        self.count += 1
        inbox = f"_INBOX.bench.{self.count}".encode()
        self.send(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), inbox, len(payload), payload))
        while True:
            got, headers, data = self.next_message()
            if got == inbox:
                return headers, data

    def api(self, subject, body):
        _, data = self.request(subject, json.dumps(body).encode())
        return json.loads(data) if data else {}


def start_servers(replicas, work):
    """One `nats-server -js`, or three in a cluster; answers (processes, client port)."""
    program = shutil.which("nats-server")
    if not program:
        sys.exit(f"nats-server is not installed: {INSTALL}")
    ports = [free_port() for _ in range(replicas)]
    routes = [f"nats://127.0.0.1:{free_port()}" for _ in range(replicas)]
    processes = []
    for index, port in enumerate(ports):
        command = [program, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", os.path.join(work, f"n{index}")]
        if replicas > 1:
            command += ["--server_name", f"n{index}", "--cluster_name", "bench", "--cluster", routes[index],
                        "--routes", ",".join(routes)]
        processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for port in ports:
        wait_listening(port)
    return processes, ports[0]


def make_stream(client, replicas):
    config = {"name": STREAM, "subjects": ["oxibot.session.>"], "storage": "file", "num_replicas": replicas}
    deadline = time.time() + 60
    while True:
        try:
            answer = client.api(f"$JS.API.STREAM.CREATE.{STREAM}", config)
        except (socket.timeout, ValueError) as error:
            answer = {"error": str(error)}
        if "error" not in answer:
            return
        if time.time() > deadline:
            sys.exit(f"the stream was never made: {answer}")
        time.sleep(0.25)


def stream_case(replicas, lines, work):
    processes, port = start_servers(replicas, work)
    try:
        client = Nats(port)
        make_stream(client, replicas)
        took = []
        for line in lines:
            started = time.perf_counter()
            headers, data = client.request(SUBJECT, line)
            took.append(time.perf_counter() - started)
            ack = json.loads(data) if data else {}
            if "seq" not in ack:
                sys.exit(f"a publish was not stored: {headers!r} {data!r}")
        started = time.perf_counter()
        consumer = client.api(f"$JS.API.CONSUMER.CREATE.{STREAM}", {"stream_name": STREAM, "config": {
            "ack_policy": "none", "deliver_policy": "all", "filter_subject": SUBJECT,
            "inactive_threshold": 10_000_000_000, "num_replicas": 1, "mem_storage": True}})
        name = consumer["name"]
        client.count += 1
        inbox = f"_INBOX.bench.{client.count}".encode()
        pull = json.dumps({"batch": len(lines), "expires": 5_000_000_000}).encode()
        client.send(b"PUB $JS.API.CONSUMER.MSG.NEXT.%s.%s %s %d\r\n%s\r\n"
                    % (STREAM.encode(), name.encode(), inbox, len(pull), pull))
        loaded = []
        while len(loaded) < len(lines):
            # Each message comes under its own subject (a status, such as a timeout, as headers).
            got, headers, data = client.next_message()
            if got == SUBJECT.encode():
                loaded.append(json.loads(data))
            elif headers:
                sys.exit(f"the load stopped short: {headers!r}")
        load_s = time.perf_counter() - started
        return took, load_s, len(loaded)
    finally:
        for process in processes:
            process.kill()
            process.wait()


def file_case(lines, work):
    path = os.path.join(work, "session.jsonl")
    took = []
    for line in lines:
        started = time.perf_counter()
        with open(path, "ab") as file:
            file.write(line + b"\n")
            file.flush()
            os.fsync(file.fileno())
        took.append(time.perf_counter() - started)
    started = time.perf_counter()
    with open(path, "rb") as file:
        loaded = [json.loads(row) for row in file]
    return took, time.perf_counter() - started, len(loaded)


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=500, help="messages appended (default 500)")
    parser.add_argument("--line-bytes", type=int, default=400, help="size of one message's line (default 400)")
    parser.add_argument("--short", action="store_true", help="40 appends: a check that the bench runs")
    args = parser.parse_args()
    appends = 40 if args.short else args.appends
    text = "x" * max(0, args.line_bytes - 120)
    lines = [json.dumps({"role": "user", "content": f"{n} {text}", "timestamp": "2026-11-28T05:00:00"}).encode()
             for n in range(appends)]
    rows = []
    work = tempfile.mkdtemp(prefix="oxibot-store-choice-")
    try:
        for store, run in [("files (append + fsync)", lambda: file_case(lines, work)),
                           ("JetStream R1 (one server)", lambda: stream_case(1, lines, os.path.join(work, "r1"))),
                           ("JetStream R3 (three servers)", lambda: stream_case(3, lines, os.path.join(work, "r3")))]:
            took, load_s, loaded = run()
            if loaded != appends:
                sys.exit(f"{store}: loaded {loaded} of {appends} messages")
            rows.append({"store": store, "appends": appends,
                         "append_p50_ms": round(statistics.median(took) * 1000, 3),
                         "append_p99_ms": round(percentile(took, 0.99) * 1000, 3),
                         "load_ms": round(load_s * 1000, 2)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| store | append p50 ms | append p99 ms | load of the whole session ms |")
    print("|---|--:|--:|--:|")
    for row in rows:
        print(f"| {row['store']} | {row['append_p50_ms']} | {row['append_p99_ms']} | {row['load_ms']} |")
    print(json.dumps({"line_bytes": args.line_bytes, "rows": rows}))


if __name__ == "__main__":
    main()

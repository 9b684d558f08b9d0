#!/usr/bin/env python3
"""Whole-command benchmark: wall time of whole `oxibot` commands, the kernel's peak RSS, and
the size of the release binaries -- the "Whole commands" figures in BENCHMARKS.md.

Each command is run RUNS times (30 by default) from the repository root with a fresh, empty
OXIBOT_HOME, timed around Python's `subprocess.run`; the table gives the median and the
min-max. Peak RSS is what `/usr/bin/time -f %M` reports for the `oxibot` process (skipped
when /usr/bin/time is missing). `oxibot tools call ...` starts the kernel, spawns every
plugin (fs, shell), makes one call and shuts everything down.

Run: `python3 tests/benches/whole_commands.py` (builds the release binaries first; pass
`--no-build` to use what is in `--bin-dir`, default `target/release`).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ["oxibot"]
COMMANDS = [
    ["--version"],
    ["tools", "call", "read_file", "--args", '{"path":"notes.md"}'],
    ["tools", "call", "exec", "--args", '{"command":"echo hi"}'],
]
TIME = Path("/usr/bin/time")


def build() -> None:
    """Builds the release binaries the benchmark runs."""
    subprocess.run(["cargo", "build", "--release", "-p", "oxibot-kernel", "--bin", "oxibot"], cwd=ROOT, check=True)


def run(command: list, env: dict) -> subprocess.CompletedProcess:
    """Runs one command from the repository root, failing loudly when it fails."""
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return done


def wall_times_ms(command: list, env: dict, runs: int) -> list:
    """Wall time of each of `runs` runs of `command`, in milliseconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run(command, env)
        times.append((time.perf_counter() - started) * 1000)
    return times


def peak_rss_mb(command: list, env: dict, runs: int) -> list:
    """Peak RSS of each of `runs` runs of `command` as /usr/bin/time reports it, in MB."""
    sizes = []
    for _ in range(runs):
        done = run([str(TIME), "-f", "%M", *command], env)
        kib = int(done.stderr.decode().strip().splitlines()[-1])
        sizes.append(kib * 1024 / 1e6)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "target" / "release")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--no-build", action="store_true", help="use the binaries already in --bin-dir")
    args = parser.parse_args()
    if not args.no_build:
        build()
    oxibot = args.bin_dir / "oxibot"
    if not oxibot.exists():
        sys.exit(f"{oxibot} is missing; build it or pass --bin-dir")
    home = tempfile.mkdtemp(prefix="oxibot-whole-commands-")
    # The file tools read beneath the workspace (`OXIBOT_HOME/workspace` by default).
    os.makedirs(os.path.join(home, "workspace"))
    with open(os.path.join(home, "workspace", "notes.md"), "w") as notes:
        notes.write("# Notes\n\n" + "a line of notes\n" * 200)
    env = {**os.environ, "OXIBOT_HOME": home}
    env.pop("RUST_LOG", None)
    try:
        print(f"whole commands, {args.runs} runs each, binaries in {args.bin_dir}\n")
        print("| command | p50 | min-max | peak RSS (/usr/bin/time) |")
        print("|---|---|---|---|")
        for words in COMMANDS:
            command = [str(oxibot), *words]
            times = wall_times_ms(command, env, args.runs)
            rss = f"{min(s):.1f}-{max(s):.1f} MB" if TIME.exists() and (s := peak_rss_mb(command, env, args.runs)) else ""
            shown = " ".join(["oxibot", *(f"'{w}'" if "{" in w else w for w in words)])
            print(f"| `{shown}` | {statistics.median(times):.2f} ms | {min(times):.2f}-{max(times):.2f} ms | {rss} |")
        print("\nbinary sizes:")
        for name in BINARIES:
            size = (args.bin_dir / name).stat().st_size
            print(f"  {name}: {size / 1e6:.1f} MB ({size} bytes)")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

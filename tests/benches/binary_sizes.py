#!/usr/bin/env python3
"""Sizes of the shipped release binaries: the kernel `oxibot`, the bundled tool plugins and the
channel plugins, one line each and their total, plus which tiktoken vocabularies the kernel
embeds (each is a text file of base64 tokens and ranks linked in as a string).

Run: `cargo build --profile dist -p oxibot-kernel -p oxibot-tool-fs -p oxibot-tool-shell
-p oxibot-tool-web -p oxibot-tool-mcp -p oxibot-channel-telegram -p oxibot-channel-discord
-p oxibot-channel-slack -p oxibot-channel-dingtalk -p oxibot-channel-feishu
-p oxibot-channel-websocket -p oxibot-channel-api && python3 tests/benches/binary_sizes.py
[--bin-dir target/dist]`
"""

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHIPPED = [
    "oxibot",
    "oxibot-tool-fs", "oxibot-tool-shell", "oxibot-tool-web", "oxibot-tool-mcp",
    "oxibot-channel-telegram", "oxibot-channel-discord", "oxibot-channel-slack", "oxibot-channel-dingtalk",
    "oxibot-channel-feishu", "oxibot-channel-websocket", "oxibot-channel-api",
]

# A line of each vocabulary file (" breaking" and its rank there), with the file's size.
VOCABULARIES = {
    "cl100k_base": (b"IGJyZWFraW5n 15061", 1_681_126),
    "o200k_base": (b"IGJyZWFraW5n 24212", 3_613_922),
    "p50k_base / r50k_base": (b"IGJyZWFraW5n 7163", 836_186),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=str(ROOT / "target/dist"))
    args = parser.parse_args()
    bins = Path(args.bin_dir)
    total = 0
    print("| binary | bytes | MB |")
    print("|---|---|---|")
    for name in SHIPPED:
        path = bins / name
        if not path.exists():
            print(f"| {name} | missing | |")
            continue
        size = path.stat().st_size
        total += size
        print(f"| {name} | {size:,} | {size / 1e6:.2f} |")
    print(f"| **all shipped binaries** | {total:,} | **{total / 1e6:.2f}** |")
    kernel = bins / "oxibot"
    if kernel.exists():
        data = kernel.read_bytes()
        for vocabulary, (marker, size) in VOCABULARIES.items():
            found = marker in data
            print(f"kernel embeds {vocabulary}: {'yes' if found else 'no'}" + (f" ({size / 1e6:.2f} MB)" if found else ""))


if __name__ == "__main__":
    main()

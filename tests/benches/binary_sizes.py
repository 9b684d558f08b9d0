#!/usr/bin/env python3
"""Size of what a user installs: the one `oxibot` executable, with the bundled tool plugins and
channels built in (issue 30), plus which tiktoken vocabularies it embeds (each is a text file of
base64 tokens and ranks linked in as a string).

Run: `cargo build --profile dist -p oxibot-kernel --bin oxibot && python3
tests/benches/binary_sizes.py [--bin-dir target/dist]` (or `--release` and `--bin-dir
target/release`).
"""

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHIPPED = ["oxibot"]

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

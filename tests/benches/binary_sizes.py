#!/usr/bin/env python3
"""Size of what a user installs: the one `oxibot` executable, with the bundled tool plugins and
channels built in (issue 30), plus which tiktoken vocabularies it embeds (each is a text file of
base64 tokens and ranks linked in as a string).

Run: `cargo build --profile dist -p oxibot-kernel --bin oxibot && python3
tests/benches/binary_sizes.py [--bin-dir target/dist]` (or `--release` and `--bin-dir
target/release`).

`--by-crate [N]` also says where the bytes go, which needs a binary that keeps its symbols
(`CARGO_PROFILE_RELEASE_STRIP=false cargo build --release`): the sizes `nm -S` gives every
symbol, summed by crate. A Rust symbol counts for the first crate named in it that is not
`std`, `core` or `alloc` (`core::ptr::drop_in_place<tokio::...>` is tokio's), so a crate's
figure includes the library code instantiated for its types. C and assembly symbols count for
the static library under `<bin-dir>/build` that defines them (libgit2, SQLite, ring). Data
without a symbol (string literals, most constant tables) is in no crate's figure: the section
sizes (`size -A`) are printed for that.

`--map FILE [N]` sums a linker map of the same link instead, by the crate whose object file
each input section came from: `cargo rustc --release -p oxibot-kernel --bin oxibot -- -C
link-arg=-Wl,-Map=oxibot.map` relinks the binary and writes one (only the last step reruns).
There, generic code counts for the crate that instantiated it, string literals and constant
tables for the crate they are in, and C objects bundled in a `-sys` crate's rlib for that
crate with "(C)".
"""

import argparse
import re
import subprocess
from collections import defaultdict
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
    parser.add_argument("--by-crate", type=int, nargs="?", const=20, default=0, metavar="N",
                        help="also sum the kernel's symbols by crate and print the N largest (20)")
    parser.add_argument("--map", metavar="FILE", help="also sum this linker map of the kernel by the crate of each object")
    parser.add_argument("--top", type=int, default=20, help="rows of the --map table (20)")
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
        if args.by_crate:
            print_by_crate(kernel, bins, args.by_crate)
    if args.map:
        print_map_by_crate(Path(args.map), args.top)


# The standard library's crates: a symbol of theirs counts for the crate it was instantiated for.
STD_CRATES = {"std", "core", "alloc", "compiler_builtins", "hashbrown", "std_detect", "panic_unwind", "addr2line", "gimli", "miniz_oxide", "rustc_demangle", "object"}

# A path segment followed by `::`: the first one of a demangled Rust name is its crate.
PATH_START = re.compile(r"(?<![A-Za-z0-9_:])([A-Za-z_][A-Za-z0-9_]*)::")

# Sections that are code, and sections that are data, for the totals (`size -A`).
SECTION_ORDER = [".text", ".rodata", ".data.rel.ro", ".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".data", ".bss"]


def print_by_crate(binary, bins, top):
    """Prints the section sizes of `binary` and its symbols' bytes summed by crate, `top` rows."""
    print()
    print("| section | bytes |")
    print("|---|---|")
    sections = section_sizes(binary)
    for name in SECTION_ORDER:
        if name in sections:
            print(f"| {name} | {sections[name]:,} |")
    c_owner = c_symbol_owners(bins / "build")
    code, data = defaultdict(int), defaultdict(int)
    listing = subprocess.run(["nm", "-S", "--size-sort", "-C", str(binary)], capture_output=True, text=True, check=True)
    for line in listing.stdout.splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4:
            continue
        _, size, kind, name = parts
        crate = c_owner.get(name) or rust_crate(name)
        (code if kind in "tTwW" else data)[crate] += int(size, 16)
    total_code, total_data = sum(code.values()), sum(data.values())
    print()
    print(f"symbols: {total_code:,} bytes of code, {total_data:,} of data (crates by code + data, top {top})")
    print()
    print("| crate | code | data | MB |")
    print("|---|---|---|---|")
    ranked = sorted(set(code) | set(data), key=lambda crate: -(code[crate] + data[crate]))
    for crate in ranked[:top]:
        print(f"| {crate} | {code[crate]:,} | {data[crate]:,} | {(code[crate] + data[crate]) / 1e6:.2f} |")
    rest = ranked[top:]
    print(f"| {len(rest)} others | {sum(code[c] for c in rest):,} | {sum(data[c] for c in rest):,} | {sum(code[c] + data[c] for c in rest) / 1e6:.2f} |")


def section_sizes(binary):
    """The size of each section of `binary`, by name."""
    listing = subprocess.run(["size", "-A", str(binary)], capture_output=True, text=True, check=True)
    sizes = {}
    for line in listing.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def c_symbol_owners(build_dir):
    """Which static library (built by a `-sys` crate's build script) defines each C symbol."""
    owners = {}
    for archive in sorted(build_dir.glob("*/out/**/*.a")):
        if archive.name.endswith("_test.a"):
            continue
        library = f"{archive.stem.removeprefix('lib')} (C)"
        listing = subprocess.run(["nm", "--defined-only", str(archive)], capture_output=True, text=True)
        for line in listing.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                owners.setdefault(parts[2], library)
    return owners


def rust_crate(name):
    """The crate a demangled Rust symbol counts for (see the module's doc), or `?` for none."""
    crates = PATH_START.findall(name)
    for crate in crates:
        if crate not in STD_CRATES:
            return crate
    return crates[0] if crates else "?"



# A line of an lld map: address, load address, size, alignment, then the output section (one
# space), an input section (9 spaces) or a symbol (17 spaces).
MAP_LINE = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (.*)$")

# The object an input section came from: `…/libNAME-HASH.rlib(MEMBER):(SECTION)`.
MAP_INPUT = re.compile(r"/lib([A-Za-z0-9_]+)-[0-9a-f]+\.rlib\(([^)]*)\)")

# An object of the binary's own crate, outside any rlib: `…/deps/NAME-HASH.….rcgu.o`.
MAP_OWN_OBJECT = re.compile(r"/deps/([A-Za-z0-9_]+)-[0-9a-f]+\.[^/]*\.rcgu\.o:")

# Output sections the map table counts, in the order of its columns.
MAP_COLUMNS = [".text", ".rodata", ".data.rel.ro", ".eh_frame", ".gcc_except_table"]


def print_map_by_crate(map_file, top):
    """Prints the bytes of each output section of a linker map summed by the input's crate."""
    sizes = defaultdict(lambda: defaultdict(int))
    section = None
    with map_file.open() as lines:
        for line in lines:
            match = MAP_LINE.match(line)
            if not match:
                continue
            size, rest = int(match.group(1), 16), match.group(2)
            if not rest.startswith(" "):
                section = rest.strip()
            elif not rest.startswith(" " * 16) and section in MAP_COLUMNS:
                sizes[map_owner(rest.strip())][section] += size
    totals = {column: sum(row[column] for row in sizes.values()) for column in MAP_COLUMNS}
    ranked = sorted(sizes, key=lambda crate: -sum(sizes[crate].values()))
    print()
    print(f"linker map {map_file.name}: bytes by the crate each input section came from (top {top})")
    print()
    print("| crate | " + " | ".join(MAP_COLUMNS) + " | MB |")
    print("|---|" + "---|" * (len(MAP_COLUMNS) + 1))
    for crate in ranked[:top]:
        row = sizes[crate]
        print(f"| {crate} | " + " | ".join(f"{row[c]:,}" for c in MAP_COLUMNS) + f" | {sum(row.values()) / 1e6:.2f} |")
    rest = ranked[top:]
    print(f"| {len(rest)} others | " + " | ".join(f"{sum(sizes[r][c] for r in rest):,}" for c in MAP_COLUMNS)
          + f" | {sum(sum(sizes[r].values()) for r in rest) / 1e6:.2f} |")
    print("| **all** | " + " | ".join(f"{totals[c]:,}" for c in MAP_COLUMNS) + f" | {sum(totals.values()) / 1e6:.2f} |")


def map_owner(input_section):
    """The crate an input section of the map belongs to; C objects in an rlib get "(C)"."""
    match = MAP_INPUT.search(input_section)
    if not match:
        own = MAP_OWN_OBJECT.search(input_section)
        if own:
            return f"{own.group(1)} (the binary's crate)"
        return "merged by the linker" if input_section.startswith("<internal>") else "C runtime"
    crate, member = match.groups()
    return crate if member.endswith(".rcgu.o") else f"{crate} (C)"


if __name__ == "__main__":
    main()

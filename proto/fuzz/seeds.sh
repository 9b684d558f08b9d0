#!/usr/bin/env bash
# Writes the hand-made seed inputs of both fuzz targets into seeds/<target>/: every golden frame
# of proto/golden/ plus a few frames a broken plugin could send. afl-fuzz starts from these; the
# minimised corpus in corpus/<target>/ is what afl found from them (see README.md).
set -euo pipefail
cd "$(dirname "$0")"
golden=../golden
out=${1:-seeds}
rm -rf "$out" && mkdir -p "$out/decode_body" "$out/frame_decoder"

hex() { xxd -r -p; }                        # hex text on stdin -> bytes on stdout
body() { printf '%s' "$1" | hex > "$out/decode_body/$2"; }
# Frame-target input: control byte (frame limit), cut seed, then the stream.
stream() { printf '%s%s%s' "$1" "$2" "$3" | hex > "$out/frame_decoder/$4"; }

all=""
for file in "$golden"/*.hex; do
    name=$(basename "$file" .hex)
    frame=$(tr -d '\n' < "$file")
    body "${frame:8}" "golden_$name"        # the body is the frame without its 4-byte prefix
    stream 00 00 "$frame" "golden_$name"    # the real limit, one read
    all+=$frame
done

# Every golden frame in one stream, read in pieces of up to 8 bytes with interruptions, and
# in pieces of up to 64 bytes under a 2032-byte limit.
stream 00 83 "$all" all_golden_small_reads
stream ff 06 "$all" all_golden_small_limit

# Truncated: the stream stops inside a prefix, inside a body.
stream 00 00 "000000" truncated_prefix
stream 00 01 "$(tr -d '\n' < "$golden/ping.hex" | head -c -2)" truncated_body
# Oversize: the largest prefix under the real limit, and 32 bytes announced under a 16-byte limit.
stream 00 00 "ffffffff" oversize_prefix
stream 81 01 "0000002000" oversize_small_limit
# A frame of exactly the limit (16 bytes), and an empty body.
stream 81 00 "00000010$(printf 'c0%.0s' $(seq 16))" frame_at_limit
stream 00 00 "00000000" empty_body
# Garbage bodies: reserved marker, a list instead of a map, a map without `type`.
stream 00 00 "00000004c1ff0013" garbage_body
body "c1ff0013" garbage_reserved_marker
body "93010203" garbage_list
body "81a26964" garbage_map_without_type
# Shapes serde accepts besides a named map: an unknown type, a struct as a list, a numeric tag.
body "82a474797065a8746570656c706f7274a5776865726581a161c0" unknown_type
body "92a470696e672a" ping_as_list
body "82a47479706506a56e6f6e63652a" ping_numeric_tag
# A call whose arguments nest 1000 lists deep: before the depth limit of 256 this overflowed a
# 2 MiB stack in a debug build (see proto/tests/fuzz_corpus.rs).
deep="84a474797065a463616c6ca2696401a4746f6f6ca178a9617267756d656e7473$(printf '91%.0s' $(seq 1000))c0"
body "$deep" deep_nesting
stream 00 00 "$(printf '%08x' $((${#deep} / 2)))$deep" deep_nesting

#!/usr/bin/env bash
# One afl-fuzz instance per target, one after the other, each for SECONDS seconds (default 1800),
# starting from the checked-in corpus; results land in out/<target>/. See README.md.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-1800}
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
cargo afl build --release
for target in ${TARGETS:-frame_decoder decode_body}; do
    rm -rf "out/$target"
    mkdir -p out
    cargo afl fuzz -i "corpus/$target" -o "out/$target" -x msgpack.dict -V "$seconds" \
        "target/release/$target" > "out/$target.log" 2>&1
    grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|stability|bitmap_cvg)' \
        "out/$target/default/fuzzer_stats" | sed "s/^/$target: /"
done

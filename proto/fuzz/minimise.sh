#!/usr/bin/env bash
# Folds what the last run found (out/<target>/default/queue/) into corpus/<target>/: afl-cmin keeps
# the smallest set of files that reaches the same coverage as the corpus and the queue together.
# Hand-made seeds (any name not starting with `afl_`) are always kept; afl's finds are renamed
# afl_<first 16 hex digits of their sha256>, so names are stable and portable. See README.md.
set -euo pipefail
cd "$(dirname "$0")"
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
for target in ${TARGETS:-frame_decoder decode_body}; do
    all=$(mktemp -d) min=$(mktemp -d)
    cp "corpus/$target"/* "$all/"
    if [ -d "out/$target/default/queue" ]; then
        for file in "out/$target/default/queue"/id:*; do
            cp "$file" "$all/afl_$(sha256sum < "$file" | head -c 16)"
        done
    fi
    rmdir "$min" && cargo afl cmin -i "$all" -o "$min" -- "target/release/$target" > "out/$target.cmin.log" 2>&1
    rm -f "corpus/$target"/afl_*
    cp -n "$min"/afl_* "corpus/$target/" 2>/dev/null || true
    echo "$target: $(ls "corpus/$target" | wc -l) files, $(du -sb "corpus/$target" | cut -f1) bytes"
    rm -rf "$all" "$min"
done

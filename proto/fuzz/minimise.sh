#!/usr/bin/env bash
# Folds what the last run found (out/<target>/default/queue/) into corpus/<target>/, small:
# afl-cmin keeps the fewest files that reach every edge the corpus and the queue reach together,
# and of afl's finds only those of at most 2 KiB are kept (the larger ones add a few edges, which
# afl finds again quickly, for most of the bytes). Hand-made seeds (any name not starting with
# `afl_`) are always kept as they are; afl's finds are named afl_<first 16 hex digits of their
# sha256>, stable and portable. See README.md.
set -euo pipefail
cd "$(dirname "$0")"
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
# The AFL++ that `cargo afl config --build` built. Its afl-cmin.bash is used rather than the
# Python afl-cmin that `cargo afl cmin` runs, which recorded no coverage at all with these targets;
# it looks for afl-showmap on PATH first, where an older one (Debian's afl++ 4.04c) may be.
afl_bin=$(ls -dt "${XDG_DATA_HOME:-$HOME/.local/share}"/afl.rs/rustc-*/afl.rs-*/afl/bin | head -n 1)
export PATH="$afl_bin:$PATH"
cargo afl build --release
for target in ${TARGETS:-frame_decoder decode_body}; do
    work=$(mktemp -d)
    mkdir "$work/all"
    cp "corpus/$target"/* "$work/all/"
    for file in "out/$target/default/queue"/id:*; do
        # Queue entries marked orig: are the corpus files afl started from.
        case "$file" in *,orig:*) continue ;; esac
        [ -e "$file" ] && cp "$file" "$work/all/afl_$(sha256sum < "$file" | head -c 16)"
    done
    "$afl_bin/afl-cmin.bash" -e -i "$work/all" -o "$work/min" -- "target/release/$target" \
        > "out/$target.cmin.log" 2>&1
    rm -f "corpus/$target"/afl_*
    find "$work/min" -name 'afl_*' -size -2049c -exec cp {} "corpus/$target/" \;
    echo "$target: $(ls "corpus/$target" | wc -l) files, $(du -sb "corpus/$target" | cut -f1) bytes"
    rm -rf "$work"
done

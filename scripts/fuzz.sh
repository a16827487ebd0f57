#!/usr/bin/env bash
# Builds and runs the fuzz targets in fuzz/ (libFuzzer through libfuzzer-sys, on the
# nightly toolchain, with AddressSanitizer).
#
#   bash scripts/fuzz.sh replay            every target over its committed corpus (seeds and
#                                          crash reproducers): a regression test
#   bash scripts/fuzz.sh short SECONDS     replay, then each target for SECONDS (CI)
#   bash scripts/fuzz.sh long SECONDS [TARGET...]
#                                          replay, then each target (or those named) for
#                                          SECONDS, keeping what it learns in
#                                          fuzz/work/TARGET (not committed)
#   bash scripts/fuzz.sh build             build only
#
# Environment: FUZZ_JOBS (targets run at once, default 1), FUZZ_NICE (nice level, default
# 0), FUZZ_SANITIZER (address or none, default address), FUZZ_PROFILE (release, default, or
# fuzz-ci: opt-level 1, a quicker build for CI's short runs).
#
# It drives libfuzzer-sys directly with the flags cargo-fuzz uses, so a fresh machine
# needs nothing but the nightly toolchain (`cargo fuzz run TARGET fuzz/corpus/TARGET` works
# too where cargo-fuzz is installed). Without nightly it prints "SKIPPED" and exits 0:
# the fuzz step did not run, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-replay}
scratch=
secs=${2:-20}
TARGETS=(properties pib cib framing race sctp_input capi svcb)
TRIPLE=x86_64-unknown-linux-gnu
PROFILE=${FUZZ_PROFILE:-release}
BIN=${CARGO_TARGET_DIR:-fuzz/target}/$TRIPLE/$PROFILE
NICE=${FUZZ_NICE:-0}

if ! cargo +nightly --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1 && [ "${FUZZ_INSTALL_NIGHTLY:-0}" = 1 ]; then
        rustup toolchain install nightly --profile minimal
    else
        echo "=================================================================="
        echo "fuzz: SKIPPED: no nightly toolchain (rustup toolchain install nightly)"
        echo "=================================================================="
        exit 0
    fi
fi

build() {
    local flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
    flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
    flags+=" -Cllvm-args=-sanitizer-coverage-pc-table"
    flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares"
    flags+=" --cfg fuzzing -Cdebug-assertions -Coverflow-checks -Cforce-frame-pointers"
    if [ "${FUZZ_SANITIZER:-address}" = address ]; then
        flags+=" -Zsanitizer=address"
    fi
    echo "fuzz: building ${#TARGETS[@]} targets (nightly, $PROFILE, ${FUZZ_SANITIZER:-address})"
    # --target: the flags apply to the targets, not to build scripts and proc macros.
    RUSTFLAGS="$flags" nice -n "$NICE" cargo +nightly build --quiet --profile "$PROFILE" \
        --manifest-path fuzz/Cargo.toml --target "$TRIPLE" --bins
}

# Every target over its corpus: seeds plus minimised crash reproducers.
replay() {
    local t dirs
    for t in "${TARGETS[@]}"; do
        dirs=(fuzz/corpus/$t)
        [ -d fuzz/crashes/$t ] && dirs+=(fuzz/crashes/$t)
        local n
        n=$(find "${dirs[@]}" -type f | wc -l)
        if ! "$BIN/$t" -runs=0 "${dirs[@]}" >/tmp/taps-fuzz-$t.log 2>&1; then
            tail -40 /tmp/taps-fuzz-$t.log
            echo "fuzz: $t FAILED on its corpus (log: /tmp/taps-fuzz-$t.log)"
            exit 1
        fi
        echo "fuzz: replay $t: $n inputs ok"
    done
}

# One target for $2 seconds; new corpus entries go to a scratch copy of the corpus, so the
# committed seeds stay small. Artifacts (crashes) land in fuzz/artifacts/TARGET/.
run_one() {
    local t=$1 s=$2 work=$3
    mkdir -p "$work" "fuzz/artifacts/$t"
    local log=fuzz/artifacts/$t/$mode.log
    if nice -n "$NICE" "$BIN/$t" -max_total_time="$s" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
        local execs corpus
        execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
        corpus=$(grep -ao 'DONE .* corp: [0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
        echo "fuzz: $t: ${s}s, $execs execs, corpus $corpus, no crash"
    else
        tail -60 "$log"
        echo "fuzz: $t CRASHED (log: $log; input in fuzz/artifacts/$t/)"
        return 1
    fi
}

fuzz_all() {
    local s=$1 keep=$2
    shift 2
    local list=("$@")
    [ ${#list[@]} -eq 0 ] && list=("${TARGETS[@]}")
    local jobs=${FUZZ_JOBS:-1} failed=0 pids=() t work
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    for t in "${list[@]}"; do
        if [ "$keep" = 1 ]; then work=fuzz/work/$t; else work=$scratch/$t; fi
        run_one "$t" "$s" "$work" &
        pids+=($!)
        if [ ${#pids[@]} -ge "$jobs" ]; then
            wait "${pids[0]}" || failed=1
            pids=("${pids[@]:1}")
        fi
    done
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    return $failed
}

case "$mode" in
    build) build ;;
    replay) build; replay ;;
    short) build; replay; fuzz_all "$secs" 0 ;;
    long) shift 2 || true; build; replay; fuzz_all "$secs" 1 "$@" ;;
    *) echo "usage: $0 replay | short SECONDS | long SECONDS [TARGET...] | build" >&2; exit 2 ;;
esac

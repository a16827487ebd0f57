#!/usr/bin/env bash
# Runs the usrsctp crate's tests (basic, churn/cleanup, bulk/load, interop, scheduling,
# source addresses, and the unit tests) under AddressSanitizer and ThreadSanitizer.
#
#   bash scripts/sanitizers.sh            both
#   bash scripts/sanitizers.sh address    ASan only
#   bash scripts/sanitizers.sh thread     TSan only
#
# Needs the nightly toolchain (-Zsanitizer); TSan also needs its standard library rebuilt
# with the sanitizer (-Zbuild-std, the rust-src component: installed here if missing).
# Without nightly it prints "SKIPPED" and exits 0.
#
# What is instrumented: our Rust code and the Rust dependencies. Debian's libusrsctp is a
# prebuilt C library and is NOT instrumented: ASan still catches our side writing past a
# buffer we hand to usrsctp only when the bad access happens in instrumented code, and
# heap corruption *inside* libusrsctp shows only if it later trips an instrumented access
# or the allocator (ASan replaces malloc/free for the whole process, so double frees and
# frees of foreign pointers in libusrsctp are still reported). TSan sees no accesses made
# inside libusrsctp (its own threads and the state it shares with our callbacks), so it
# can only report races between accesses in Rust code; races inside usrsctp are invisible
# to it. Our process-wide lock around every usrsctp call (crates/usrsctp/src/ffi/library.rs)
# is what keeps usrsctp single-threaded; TSan checks that the Rust side around it is sound.
#
# Suppressions: scripts/tsan.supp, one reason per entry.
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-both}
TRIPLE=x86_64-unknown-linux-gnu
export CARGO_TARGET_DIR=${SAN_TARGET_DIR:-target/sanitizers}

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "=================================================================="
    echo "sanitizers: SKIPPED: no nightly toolchain (rustup toolchain install nightly)"
    echo "=================================================================="
    exit 0
fi

status=0

asan() {
    echo "sanitizers: usrsctp tests under AddressSanitizer"
    # detect_leaks: LeakSanitizer too, at each test binary's exit (none reported so far;
    # scripts/lsan.supp takes entries with a reason each if one ever must be accepted).
    if RUSTFLAGS="-Zsanitizer=address -Cforce-frame-pointers" \
        RUSTDOCFLAGS="-Zsanitizer=address" \
        ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1" \
        LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0" \
        cargo +nightly test -p usrsctp --target "$TRIPLE" --tests --no-fail-fast -- --test-threads=2 2>&1 \
        | tee /tmp/taps-asan.log | grep -E '^(test result|running|ERROR|SUMMARY)|FAILED|panicked'; then :; fi
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|test result: FAILED|error: test failed' /tmp/taps-asan.log; then
        echo "sanitizers: AddressSanitizer FOUND something (log: /tmp/taps-asan.log)"
        status=1
    else
        echo "sanitizers: AddressSanitizer clean"
    fi
}

tsan() {
    echo "sanitizers: usrsctp tests under ThreadSanitizer"
    if ! rustup +nightly component list --installed 2>/dev/null | grep -q rust-src; then
        rustup component add rust-src --toolchain nightly
    fi
    if RUSTFLAGS="-Zsanitizer=thread -Cforce-frame-pointers" \
        RUSTDOCFLAGS="-Zsanitizer=thread" \
        TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp:halt_on_error=0:report_signal_unsafe=0" \
        cargo +nightly test -Zbuild-std -p usrsctp --target "$TRIPLE" --tests --no-fail-fast -- --test-threads=2 2>&1 \
        | tee /tmp/taps-tsan.log | grep -E '^(test result|running|SUMMARY)|WARNING: ThreadSanitizer|FAILED|panicked'; then :; fi
    if grep -qE 'WARNING: ThreadSanitizer|test result: FAILED|error: test failed' /tmp/taps-tsan.log; then
        echo "sanitizers: ThreadSanitizer FOUND something (log: /tmp/taps-tsan.log)"
        status=1
    else
        echo "sanitizers: ThreadSanitizer clean"
    fi
}

case "$which" in
    both) asan; tsan ;;
    address) asan ;;
    thread) tsan ;;
    *) echo "usage: $0 [both|address|thread]" >&2; exit 2 ;;
esac
exit $status

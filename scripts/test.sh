#!/usr/bin/env bash
# Runs the whole taps test suite on a fresh machine of this kind (root, apt available):
# installs what the build needs, then format check, clippy, and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "test.sh: please install: ${need_apt[*]}" >&2
    fi
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace 2>&1 | tee /tmp/taps-test.log
# One summary line over every test binary, in the form CI reads.
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, i }' /tmp/taps-test.log

#!/usr/bin/env bash
# The NEAT C API's cost against a plain epoll client (issue 13's benchmark).
#
#   bash crates/taps-capi/bench/run.sh [FLOWS=256] [RUNS=11]
#
# Builds libneat, the `taps` command and the plain tokio client in release mode, compiles
# bench/{server,epoll_client,neat_client}.c, starts the epoll server on 127.0.0.1, then
# runs four clients in turn RUNS times each, every one doing the same work (connect FLOWS
# TCP flows, write 1 byte each, shut down, wait for the server's close): the C epoll
# client (the baseline), taps-tokio-client (tokio alone: the floor of any tokio program),
# `taps connect` (taps' Rust API) and neat_client (the C API). It reports the median
# whole-process CPU (user + sys from wait4's rusage of the child) and wall time of each,
# and each one's ratio of CPU medians to the epoll client's. The goal is the C API's.
set -euo pipefail
cd "$(dirname "$0")/../../.."
FLOWS=${1:-256}
RUNS=${2:-11}
PORT=${BENCH_PORT:-27200}

cargo build --release -p taps-capi -p taps-cli --quiet
cargo build --release -p taps-bench --bin taps-tokio-client --quiet
LIB=target/release
WORK=$(mktemp -d /tmp/taps-capi-bench.XXXXXX)
trap 'kill "${SERVER_PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
ln -sf "$PWD/$LIB/libneat.so" "$WORK/libneat.so.1"
SRC=crates/taps-capi/bench
for p in server epoll_client; do
    cc -O2 -Wall -Werror "$SRC/$p.c" -o "$WORK/$p"
done
cc -O2 -Wall -Werror -I crates/taps-capi/include "$SRC/neat_client.c" -o "$WORK/neat_client" \
    -L "$LIB" -lneat -luv

"$WORK/server" "$PORT" > "$WORK/server.out" &
SERVER_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/server.out" 2>/dev/null && break; sleep 0.05; done

LD_LIBRARY_PATH="$WORK" python3 - "$WORK" "$PORT" "$FLOWS" "$RUNS" <<'PY'
import os, statistics, subprocess, sys, time
work, port, flows, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
props = '{"transport":{"value":"TCP","precedence":2}}'
argv = {
    "epoll_client": [os.path.join(work, "epoll_client"), "127.0.0.1", port, flows],
    "tokio_client": ["target/release/taps-tokio-client", "127.0.0.1", port, flows],
    "taps_connect": ["target/release/taps", "connect", "127.0.0.1", port, "--flows", flows,
                     "--send-bytes", "1", "--props", props],
    "neat_client": [os.path.join(work, "neat_client"), "127.0.0.1", port, flows],
}
progs = list(argv)
cpu = {p: [] for p in progs}
wall = {p: [] for p in progs}
for i in range(runs + 1):            # the first round warms caches and is dropped
    for p in (progs if i % 2 == 0 else progs[::-1]):
        t = time.monotonic()
        child = subprocess.Popen(argv[p], stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(child.pid, 0)
        w = time.monotonic() - t
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{p} failed (status {status})")
        if i > 0:
            cpu[p].append(ru.ru_utime + ru.ru_stime)
            wall[p].append(w)
        time.sleep(0.2)              # let TIME_WAIT and the server settle
for p in progs:
    print(f"{p:13s} {flows} flows: CPU median {statistics.median(cpu[p])*1e3:7.2f} ms "
          f"(min {min(cpu[p])*1e3:.2f}, max {max(cpu[p])*1e3:.2f}), "
          f"wall median {statistics.median(wall[p])*1e3:7.2f} ms, {runs} runs")
base = statistics.median(cpu["epoll_client"])
for p in progs[1:]:
    print(f"CPU ratio {p} / epoll_client: {statistics.median(cpu[p]) / base:.2f}x")
ratio = statistics.median(cpu["neat_client"]) / base
print(f"goal neat_client <= 1.5x the epoll client: {ratio:.2f}x, "
      f"{'met' if ratio <= 1.5 else 'NOT met'} (NEAT measured 4.4x)")
PY

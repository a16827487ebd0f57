#!/usr/bin/env bash
# The NEAT C API's cost against a plain epoll client (issue 13's benchmark).
#
#   bash crates/taps-capi/bench/run.sh [FLOWS=256] [RUNS=11]
#
# Builds libneat in release mode, compiles bench/{server,epoll_client,neat_client}.c,
# starts the epoll server on 127.0.0.1, then runs the two clients alternately RUNS times
# each (connect FLOWS TCP flows, write 1 byte each, shut down, wait for the server's
# close) and reports the median whole-process CPU (user + sys from wait4's rusage of
# the child) and wall time of each, and the ratio of the CPU medians.
set -euo pipefail
cd "$(dirname "$0")/../../.."
FLOWS=${1:-256}
RUNS=${2:-11}
PORT=${BENCH_PORT:-27200}

cargo build --release -p taps-capi --quiet
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
progs = ["epoll_client", "neat_client"]
cpu = {p: [] for p in progs}
wall = {p: [] for p in progs}
for i in range(runs + 1):            # the first round warms caches and is dropped
    for p in (progs if i % 2 == 0 else progs[::-1]):
        t = time.monotonic()
        child = subprocess.Popen([os.path.join(work, p), "127.0.0.1", port, flows],
                                 stdout=subprocess.DEVNULL)
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
ratio = statistics.median(cpu["neat_client"]) / statistics.median(cpu["epoll_client"])
print(f"CPU ratio neat_client / epoll_client: {ratio:.2f}x (goal <= 1.5x; NEAT measured 4.4x)")
PY

#!/usr/bin/env bash
# Builds NEAT's own example programs against taps' NEAT C API (crates/taps-capi:
# include/neat.h and libneat.so) and runs them in client/server pairs on loopback,
# checking that the data really arrived (strings, byte counts, sha256), not only exit codes.
#
#   bash scripts/neat-examples.sh NEAT_SRC_DIR      (or NEAT_SRC=... bash scripts/neat-examples.sh)
#
# Fetches nothing: bring NEAT's sources yourself (https://github.com/NEAT-project/neat).
# Only NEAT_SRC/examples/*.c, its prop_*.json and tests/test.txt are read, never NEAT's
# neat.h; nothing of NEAT is copied into this repository. Prints `PASS name` or
# `FAIL name: reason (logs: DIR)` per pair and `neat-examples: N passed, M failed`; exits 0
# only when every pair passes. Logs stay in the directory printed at the start.
# Environment: NEAT_SRC, KEEP_SCRATCH=1 (keep the build/run directory), ONLY="echo-tcp ..."
# (run only the named pairs), DAYTIME_RUNS (50), PORT_WAIT (180: seconds to wait for a
# fixed port, or UDP 9899, which SCTP needs to itself, to be let go by other programs).
set -uo pipefail

usage() {
    cat >&2 <<'EOF'
usage: bash scripts/neat-examples.sh NEAT_SRC_DIR   (or set NEAT_SRC)

NEAT_SRC_DIR must be a checkout of NEAT's sources with its examples/ directory, e.g.
    git clone https://github.com/NEAT-project/neat /tmp/neat-src
    bash scripts/neat-examples.sh /tmp/neat-src
This script downloads nothing and never copies NEAT's files into this repository.
EOF
}

NEAT_SRC=${1:-${NEAT_SRC:-}}
if [ -z "$NEAT_SRC" ]; then
    echo "neat-examples: no NEAT source directory given" >&2
    usage
    exit 2
fi
if [ ! -d "$NEAT_SRC" ]; then
    echo "neat-examples: $NEAT_SRC does not exist" >&2
    usage
    exit 2
fi
NEAT_SRC=$(cd "$NEAT_SRC" && pwd)
EX=$NEAT_SRC/examples
if [ ! -d "$EX" ] || [ ! -f "$EX/client.c" ] || [ ! -f "$EX/util.c" ]; then
    echo "neat-examples: $NEAT_SRC has no examples/ with NEAT's example programs (client.c, util.c, ...)" >&2
    usage
    exit 2
fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
INC=$REPO/crates/taps-capi/include
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
DAYTIME_RUNS=${DAYTIME_RUNS:-50}
SERVER_MAX=900 # seconds: a safety net for every background program (killed earlier normally)

# ---------------------------------------------------------------------------------------
# Tools. scripts/deps.sh installs the system packages when something is missing.
missing=()
command -v cc >/dev/null 2>&1 || missing+=(cc)
[ -e /usr/include/uv.h ] || missing+=(libuv1-dev)
[ -e /usr/include/jansson.h ] || missing+=(libjansson-dev)
for t in ss python3 openssl; do command -v $t >/dev/null 2>&1 || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "neat-examples: missing ${missing[*]}; running scripts/deps.sh" >&2
    bash "$REPO/scripts/deps.sh" || exit 1
fi
for t in cc ss python3 openssl timeout stdbuf sha256sum cargo; do
    command -v $t >/dev/null 2>&1 || { echo "neat-examples: $t not found" >&2; exit 1; }
done
HAVE_STRACE=0
command -v strace >/dev/null 2>&1 && HAVE_STRACE=1

# ---------------------------------------------------------------------------------------
# Scratch (removed on exit) and logs (kept).
SCRATCH=$(mktemp -d /tmp/neat-examples-scratch.XXXXXX)
LOGS=$(mktemp -d /tmp/neat-examples-logs.XXXXXX)
LIBDIR=$SCRATCH/lib
BIN=$SCRATCH/bin
mkdir -p "$LIBDIR" "$BIN" "$SCRATCH/run"
BG_PIDS=()   # background programs (each a `timeout` leading its own process group)
AUX_PIDS=()  # helpers (stdin holders)

cleanup() {
    local p
    for p in $FG_PID "${BG_PIDS[@]}"; do
        kill -KILL -- "-$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    for p in "${AUX_PIDS[@]}"; do
        pkill -KILL -P "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ "${KEEP_SCRATCH:-0}" = 1 ]; then
        echo "neat-examples: scratch kept in $SCRATCH" >&2
    else
        rm -rf "$SCRATCH"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "neat-examples: NEAT sources $NEAT_SRC, logs in $LOGS"

# ---------------------------------------------------------------------------------------
# Helpers.

# alive PID: the process exists and is not a zombie.
alive() {
    local s
    [ -n "$1" ] || return 1
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    [ "${s:0:1}" != Z ]
}

# start_bg DIR LOG CMD...: runs CMD in DIR in the background under `timeout` (which leads
# its own process group), stdout line-buffered, stdout and stderr into LOG. BG_PID is
# timeout's pid; a subshell waits for it and keeps its exit status for `died` (and takes
# the shell's "Aborted"-style notices into LOG).
declare -A BG_STATUS=()
start_bg() {
    local dir=$1 log=$2 pidf i
    shift 2
    pidf=$(mktemp "$SCRATCH/bg.XXXXXX")
    (
        cd "$dir" || exit 1
        timeout -k 5 "$SERVER_MAX" stdbuf -oL -eL "$@" </dev/null &
        echo $! >"$pidf"
        wait $!
        echo $? >"$pidf.status"
    ) >"$log" 2>&1 &
    for ((i = 0; i < 200; i++)); do [ -s "$pidf" ] && break; sleep 0.05; done
    BG_PID=$(cat "$pidf")
    BG_PIDS+=("$BG_PID")
    BG_STATUS[$BG_PID]=$pidf.status
}

# died PID: how a background program ended ("exit N", "killed by SIGX"); fails while it runs.
died() {
    local st i
    alive "$1" && return 1
    for ((i = 0; i < 20; i++)); do [ -s "${BG_STATUS[$1]:-/}" ] && break; sleep 0.1; done
    st=$(cat "${BG_STATUS[$1]:-/}" 2>/dev/null)
    case $st in
        "") echo "ended" ;;
        124) echo "timed out" ;;
        13[0-9] | 1[4-5][0-9]) echo "killed by SIG$(kill -l $((st - 128)))" ;;
        *) echo "exit $st" ;;
    esac
}

# state PID: died's answer, or "still running".
state() { died "$1" || echo "still running"; }

# stop_bg PID: SIGINT (NEAT programs exit on it), then SIGKILL to the group after 10 s.
stop_bg() {
    local pid=$1 i keep=()
    if alive "$pid"; then
        kill -INT "$pid" 2>/dev/null
        for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.2; done
        alive "$pid" && { kill -KILL -- "-$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; }
    fi
    for i in "${BG_PIDS[@]}"; do [ "$i" != "$pid" ] && keep+=("$i"); done
    BG_PIDS=("${keep[@]}")
}

# stdin_holder FIFO CMD...: runs CMD (a command or function) in the background with its
# stdout on a new named pipe FIFO, the stdin of the program to run next; the pipe stays
# open (no EOF, which would make NEAT's client close its flow) until CMD ends. HOLDER
# is its pid.
stdin_holder() {
    local f=$1
    shift
    rm -f "$f"
    mkfifo "$f"
    ("$@") >"$f" &
    HOLDER=$!
    AUX_PIDS+=("$HOLDER")
}

# run_client SECONDS DIR STDIN OUT ERR CMD...: runs CMD in DIR under `timeout`, in the
# background so that the script's traps run at once (bash defers them while a foreground
# command runs), and waits for it; returns its exit status (124: timed out).
FG_PID=""
run_client() {
    local t=$1 dir=$2 in=$3 out=$4 err=$5 rc
    shift 5
    (cd "$dir" && exec timeout -k 5 "$t" "$@") <"$in" >"$out" 2>"$err" &
    FG_PID=$!
    wait "$FG_PID"
    rc=$?
    FG_PID=""
    return $rc
}

# say_then_wait LINE FILE REGEX SECONDS: writes LINE (a client's stdin), then holds the
# pipe open until FILE (the client's stdout) has a line matching REGEX.
say_then_wait() {
    printf '%s\n' "$1"
    wait_for "$2" "$3" "$4"
}

# stop_aux PID: ends a stdin holder and its children.
stop_aux() {
    pkill -KILL -P "$1" 2>/dev/null
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# listening PID PROTO PORT: PID's process tree owns a listening TCP socket (tcp) or a
# bound UDP socket (udp) on PORT; sctp: a bound UDP socket on any port (SCTP runs over
# UDP in taps, so its port does not show in ss).
listening() {
    local pid=$1 proto=$2 port=$3 pids
    pids=$(pgrep -g "$pid" 2>/dev/null | tr '\n' ' ')
    [ -n "$pids" ] || pids=$pid
    local out p
    case $proto in
        tcp) out=$(ss -Hltnp "sport = :$port" 2>/dev/null) ;;
        udp) out=$(ss -Hlunp "sport = :$port" 2>/dev/null) ;;
        sctp) out=$(ss -Hlunp 2>/dev/null) ;;
    esac
    for p in $pids; do
        grep -q "pid=$p," <<<"$out" && return 0
    done
    return 1
}

# wait_listen PID PROTO PORT [SECONDS]: polls until listening (or PID died / timeout).
wait_listen() {
    local pid=$1 proto=$2 port=$3 max=${4:-60} i
    for ((i = 0; i < max * 5; i++)); do
        alive "$pid" || return 1
        if listening "$pid" "$proto" "$port"; then
            # SCTP's port is inside the process: neat_accept binds it synchronously right
            # after the UDP socket exists, so give that a moment.
            [ "$proto" = sctp ] && sleep 0.5
            return 0
        fi
        sleep 0.2
    done
    return 1
}

# serve NAME PROTO PORT CMD...: starts CMD in $RUN in the background (log
# $LOG/NAME.log) and waits until it listens on PROTO PORT; its pid in SRV. When it does
# not listen, REASON says so with the log's last lines, and the status is 1.
serve() {
    local name=$1 proto=$2 port=$3
    shift 3
    start_bg "$RUN" "$LOG/$name.log" "$@"
    SRV=$BG_PID
    wait_listen "$SRV" "$proto" "$port" && return 0
    REASON="$name is not listening on $proto $port ($(state "$SRV")): $(lastlines "$LOG/$name.log")"
    return 1
}

# port_free PROTO PORT: nobody listens on it (TCP) or has it bound (UDP).
port_free() {
    case $1 in
        tcp) [ -z "$(ss -Hltn "sport = :$2" 2>/dev/null)" ] ;;
        udp) [ -z "$(ss -Hlun "sport = :$2" 2>/dev/null)" ] ;;
    esac
}

# free_port: a TCP and UDP port nobody uses now.
free_port() {
    local p i
    for ((i = 0; i < 100; i++)); do
        p=$((20000 + RANDOM % 30000))
        [ -z "$(ss -Hantu "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return; }
    done
    echo 23232
}

# need_ports PORT...: the fixed ports these examples use are free (TCP and UDP), waiting up
# to PORT_WAIT seconds for other programs to let go of them. UDP 9899 is SCTP's encapsulation
# port: taps' SCTP runs in each process (usrsctp), so only one process per host can serve
# SCTP on it, and another program's SCTP listener (a test run, say) must end first.
PORT_WAIT=${PORT_WAIT:-180}
need_ports() {
    local p i
    for p in "$@"; do
        for ((i = 0; i < PORT_WAIT * 5; i++)); do
            port_free tcp "$p" && port_free udp "$p" && break
            sleep 0.2
        done
        if ! { port_free tcp "$p" && port_free udp "$p"; }; then
            REASON="port $p is in use by another program: $(ss -Hlntup "sport = :$p" 2>/dev/null | grep -o 'users:.*' | head -2 | tr '\n' ' ')"
            return 1
        fi
    done
}

# wait_for FILE REGEX SECONDS: polls until FILE has a line matching REGEX (grep -E).
wait_for() {
    local f=$1 re=$2 max=$3 i
    for ((i = 0; i < max * 5; i++)); do
        grep -qE -- "$re" "$f" 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}

# wait_count FILE REGEX N SECONDS: polls until FILE has at least N lines matching REGEX.
wait_count() {
    local f=$1 re=$2 n=$3 max=$4 i c
    for ((i = 0; i < max * 5; i++)); do
        c=$(grep -cE -- "$re" "$f" 2>/dev/null)
        [ "${c:-0}" -ge "$n" ] && return 0
        sleep 0.2
    done
    return 1
}

# wait_size FILE BYTES SECONDS: polls until FILE holds at least BYTES.
wait_size() {
    local f=$1 n=$2 max=$3 i
    for ((i = 0; i < max * 5; i++)); do
        [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -ge "$n" ] && return 0
        sleep 0.2
    done
    return 1
}

# rundir NAME: a fresh working directory for a pair; LOG is the pair's log directory.
rundir() {
    RUN=$SCRATCH/run/$1
    LOG=$LOGS/$1
    rm -rf "$RUN"
    mkdir -p "$RUN" "$LOG"
}

# need_bins PROG...: the examples were compiled.
need_bins() {
    local p
    for p in "$@"; do
        [ -x "$BIN/$p" ] || { REASON="$p did not compile (see $LOGS/build/$p.log)"; return 1; }
    done
}

# lastlines FILE: the last non-empty lines of a log, on one line, for a reason.
lastlines() {
    local t
    t=$(grep -v '^\s*$' "$1" 2>/dev/null | tail -n "${2:-2}" | tr '\n\t' '  ')
    [ ${#t} -gt 300 ] && t="...${t: -300}"
    printf '%s' "$t"
}

PASSED=0
FAILED=0
# pair NAME FUNC: runs FUNC (which sets REASON on failure) and prints PASS/FAIL.
pair() {
    local name=$1 fn=$2
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
    REASON=""
    rundir "$name"
    if "$fn" && [ -z "$REASON" ]; then
        echo "PASS $name"
        PASSED=$((PASSED + 1))
    else
        echo "FAIL $name: ${REASON:-failed} (logs: $LOG)"
        FAILED=$((FAILED + 1))
    fi
    # Nothing of a pair survives it.
    local p
    for p in "${BG_PIDS[@]}"; do stop_bg "$p"; done
    for p in "${AUX_PIDS[@]}"; do stop_aux "$p"; done
    AUX_PIDS=()
}

# ---------------------------------------------------------------------------------------
# Build libneat (release) and make libneat.so.1 available in the scratch directory.
mkdir -p "$LOGS/build"
echo "neat-examples: cargo build --release -p taps-capi (log: $LOGS/build/cargo.log)"
if ! (cd "$REPO" && cargo build --release -p taps-capi) >"$LOGS/build/cargo.log" 2>&1; then
    echo "neat-examples: building libneat failed:" >&2
    tail -n 20 "$LOGS/build/cargo.log" >&2
    exit 1
fi
LIB=$TARGET_DIR/release/libneat.so
[ -f "$LIB" ] || { echo "neat-examples: $LIB not found after the build" >&2; exit 1; }
ln -s "$LIB" "$LIBDIR/libneat.so.1"
ln -s "$LIB" "$LIBDIR/libneat.so"

# Compile each example against OUR header only (NEAT's neat.h is in NEAT_SRC's root, never
# on the include path; examples/ has none). Each links what it uses: libuv and jansson.
PROGS=(client client_data client_dtls_echo client_http_get client_http_run_once
    minimal_client minimal_server2 msbench peer server_chargen server_daytime
    server_discard server_dtls_echo server_echo server_http tneat)
[ -e "$EX/neat.h" ] && { echo "neat-examples: $EX/neat.h exists; refusing to build against it" >&2; exit 1; }
built=0
for p in "${PROGS[@]}"; do
    if [ ! -f "$EX/$p.c" ]; then
        echo "$EX/$p.c not found" >"$LOGS/build/$p.log"
        continue
    fi
    if cc -O2 -g -I"$INC" -o "$BIN/$p" "$EX/$p.c" "$EX/util.c" "$EX/picohttpparser.c" \
        -L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -lneat -luv -ljansson >"$LOGS/build/$p.log" 2>&1; then
        built=$((built + 1))
    fi
done
echo "neat-examples: compiled $built of ${#PROGS[@]} examples against $INC/neat.h"

# Properties. NEAT's own files are used for the clients; servers of the "over TCP/SCTP"
# pairs are pinned to that one transport (precedence 2), so the flow cannot run over
# another stack even where taps treats precedence 1 as a mere preference.
PROPS=$SCRATCH/props
mkdir -p "$PROPS"
echo '{"transport":{"value":"TCP","precedence":2}}' >"$PROPS/tcp-only.json"
echo '{"transport":{"value":["SCTP","SCTP/UDP"],"precedence":2}}' >"$PROPS/sctp-only.json"
# NEAT's prop_tcp_security.json, plus verification off for a self-signed certificate.
echo '{"transport":{"value":"TCP","precedence":1},"security":{"value":true,"precedence":2},"verification":{"value":false}}' >"$PROPS/tls-client.json"
# client_dtls_echo's built-in properties, without the trailing ';' that makes them invalid.
echo '{"transport":{"value":"UDP","precedence":1},"security":{"value":true,"precedence":2},"verification":{"value":false,"precedence":2}}' >"$PROPS/dtls-client.json"

# A fresh self-signed certificate and key in one PEM (server_http's cert.pem, NEAT_CERT_KEY_PEM).
CERT=$SCRATCH/cert.pem
if ! openssl req -x509 -newkey rsa:2048 -nodes -keyout "$SCRATCH/key.pem" -out "$SCRATCH/crt.pem" \
    -days 2 -subj /CN=localhost >"$LOGS/build/openssl.log" 2>&1; then
    echo "neat-examples: openssl could not make a certificate ($LOGS/build/openssl.log)" >&2
    exit 1
fi
cat "$SCRATCH/crt.pem" "$SCRATCH/key.pem" >"$CERT"
# The DTLS server gets an ECDSA P-256 one: taps' DTLS takes ECDSA keys only (an RSA key
# fails its listen with "DTLS needs an ECDSA P-256 or P-384 key").
CERT_EC=$SCRATCH/cert-ec.pem
if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$SCRATCH/key-ec.pem" \
    -out "$SCRATCH/crt-ec.pem" -days 2 -subj /CN=localhost >>"$LOGS/build/openssl.log" 2>&1; then
    echo "neat-examples: openssl could not make an ECDSA certificate ($LOGS/build/openssl.log)" >&2
    exit 1
fi
cat "$SCRATCH/crt-ec.pem" "$SCRATCH/key-ec.pem" >"$CERT_EC"

# ---------------------------------------------------------------------------------------
# The pairs.

# 1. echo: server_echo + client; a line piped into client comes back on its stdout.
#    The client's stats JSON (printed after each write) names the transport used.
echo_pair() {
    local proto=$1 sprops=$2 cprops=$3 line
    need_bins server_echo client || return 1
    need_ports 8080 9899 || return 1
    serve server_echo "$( [ "$proto" = TCP ] && echo tcp || echo sctp)" 8080 "$BIN/server_echo" -P "$sprops" || return 1
    line="hello neat over $proto $$"
    local rc
    stdin_holder "$RUN/stdin" say_then_wait "$line" "$LOG/client.out" "^$line\$" 60
    run_client 90 "$RUN" "$RUN/stdin" "$LOG/client.out" "$LOG/client.err" \
        "$BIN/client" -P "$cprops" 127.0.0.1 8080
    rc=$?
    stop_aux "$HOLDER"
    if ! grep -qx -- "$line" "$LOG/client.out"; then
        REASON="the echo did not come back (client exit $rc): $(lastlines "$LOG/client.err")"
        return 1
    fi
    [ "$rc" = 0 ] || { REASON="echo arrived but client exited $rc"; return 1; }
    local used
    used=$(grep -m1 -o '"transport": "[^"]*"' "$LOG/client.out" | sed 's/.*: "//; s/"//')
    [ "$used" = "$proto" ] || { REASON="echo arrived over '${used:-?}', not $proto"; return 1; }
}
pair_echo_tcp() { echo_pair TCP "$PROPS/tcp-only.json" "$EX/prop_tcp.json"; }
pair_echo_sctp() { echo_pair SCTP "$PROPS/sctp-only.json" "$EX/prop_sctp.json"; }

# 2. daytime x50 over SCTP: each client run must print the date string the server wrote
#    right before closing, then its own "flow closed" (issue 35, bug 1: write-then-close).
pair_daytime_sctp() {
    need_bins server_daytime client || return 1
    need_ports 8080 9899 || return 1
    serve server_daytime sctp 8080 "$BIN/server_daytime" -P "$PROPS/sctp-only.json" || return 1
    local srv=$SRV i rc fails=0 nodate=0 noclose=0 badrc=0 first=""
    for ((i = 1; i <= DAYTIME_RUNS; i++)); do
        # stdin stays open (the client would close the flow at EOF) until it exits.
        stdin_holder "$RUN/stdin" sleep 60
        run_client 30 "$RUN" "$RUN/stdin" "$LOG/client.$i.out" "$LOG/client.$i.err" \
            "$BIN/client" -P "$EX/prop_sctp.json" 127.0.0.1 8080
        rc=$?
        stop_aux "$HOLDER"
        local ok=1
        grep -qE '^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}$' "$LOG/client.$i.out" ||
            { ok=0; nodate=$((nodate + 1)); }
        grep -q 'flow closed OK' "$LOG/client.$i.err" || { ok=0; noclose=$((noclose + 1)); }
        [ "$rc" = 0 ] || { ok=0; badrc=$((badrc + 1)); }
        if [ $ok = 0 ]; then
            fails=$((fails + 1))
            [ -z "$first" ] && first="run $i exit $rc"
        fi
        alive "$srv" || { REASON="server_daytime ended ($(died "$srv")) after run $i: $(lastlines "$LOG/server_daytime.log")"; return 1; }
    done
    if [ $fails -gt 0 ]; then
        REASON="$fails of $DAYTIME_RUNS runs failed ($nodate without the date, $noclose without the close, $badrc exit!=0 or timeout; first: $first)"
        return 1
    fi
}

# 3. chargen: server_chargen + client; the client must receive chargen's rotating lines.
pair_chargen() {
    need_bins server_chargen client || return 1
    need_ports 8080 9899 || return 1
    serve server_chargen tcp 8080 "$BIN/server_chargen" -P "$EX/prop_tcp.json" || return 1
    local rc
    # stdin stays open until 20,000 bytes came in (or 60 s); at its EOF the client closes.
    stdin_holder "$RUN/stdin" wait_size "$LOG/client.out" 20000 60
    run_client 120 "$RUN" "$RUN/stdin" "$LOG/client.out" "$LOG/client.err" \
        "$BIN/client" -P "$EX/prop_tcp.json" 127.0.0.1 8080
    rc=$?
    stop_aux "$HOLDER"
    local check
    check=$(python3 - "$LOG/client.out" <<'EOF'
import sys
data = open(sys.argv[1], 'rb').read()
lines = data.split(b'\r\n')[:-1]  # complete lines only
good = 0
for ln in lines:
    # a chargen line: printable ASCII 33..104, each character the next one mod 72
    if ln.startswith(b'json') or not ln:
        continue
    s = ln.split(b'\n')[-1]
    if len(s) >= 2 and all(33 <= c <= 104 for c in s) and \
       all(s[k + 1] - 33 == (s[k] - 33 + 1) % 72 for k in range(len(s) - 1)):
        good += 1
    else:
        print('bad line %r' % s[:40]); sys.exit(0)
print('ok %d bytes, %d lines' % (len(data), good) if good >= 10 else 'only %d chargen lines in %d bytes' % (good, len(data)))
EOF
)
    case $check in
        ok*) [ "$rc" = 0 ] || { REASON="$check received, but client exited $rc"; return 1; } ;;
        *) REASON="$check (client exit $rc): $(lastlines "$LOG/client.err")"; return 1 ;;
    esac
}

# 4. discard + client_data: 100,000 bytes; the server's "received data" lines must add up.
discard_pair() {
    local proto=$1 sprops=$2 cprops=$3 rc total
    need_bins server_discard client_data || return 1
    need_ports 8080 9899 || return 1
    serve server_discard "$( [ "$proto" = TCP ] && echo tcp || echo sctp)" 8080 "$BIN/server_discard" -P "$sprops" || return 1
    run_client 120 "$RUN" /dev/null "$LOG/client_data.out" "$LOG/client_data.err" \
        "$BIN/client_data" -P "$cprops" -D 100000 127.0.0.1 8080
    rc=$?
    total=0
    local i
    for ((i = 0; i < 150; i++)); do
        total=$(awk '/^received data - [0-9]+ byte/ {s += $4} END {print s + 0}' "$LOG/server_discard.log")
        [ "$total" -ge 100000 ] && break
        sleep 0.2
    done
    [ "$total" = 100000 ] || { REASON="server received $total of 100000 bytes (client_data exit $rc)"; return 1; }
    [ "$rc" = 0 ] || { REASON="server got all 100000 bytes, but client_data exited $rc"; return 1; }
}
pair_discard_tcp() { discard_pair TCP "$PROPS/tcp-only.json" "$EX/prop_tcp.json"; }
pair_discard_sctp() { discard_pair SCTP "$PROPS/sctp-only.json" "$EX/prop_sctp.json"; }

# tneat_blocks FILE ROLE BYTES: how many "flow closed - statistics" blocks of ROLE (rcv:
# passive side, snd: active side) report exactly BYTES.
tneat_blocks() {
    awk -v role="$2" -v want="$3" '
        /^\tbytes\t\t: / { b = $NF; next }
        $0 ~ "^\t" role "-calls" { if (b == want) n++ }
        END { print n + 0 }' "$1"
}

# 5a. tneat -L: tneat talks to itself (10 flows of 128 x 4096 bytes); every passive flow
#     must report all 524,288 bytes, and the program exit 0.
pair_tneat_loop() {
    need_bins tneat && need_ports 9899 || return 1
    local port rc n
    port=$(free_port)
    run_client 180 "$RUN" /dev/null "$LOG/tneat.out" "$LOG/tneat.err" \
        "$BIN/tneat" -L -p "$port"
    rc=$?
    n=$(tneat_blocks "$LOG/tneat.err" rcv 524288)
    [ "$n" = 10 ] || { REASON="$n of 10 flows received 524288 bytes (exit $rc): $(lastlines "$LOG/tneat.err")"; return 1; }
    [ "$rc" = 0 ] || { REASON="all data arrived but tneat -L exited $rc"; return 1; }
}

# 5b. a tneat server and `tneat -f 256 -n 1 -l 1` client: 256 flows of one byte each;
#     the client reports 256 flows sent 1 byte, the server 256 flows received 1 byte.
pair_tneat_256() {
    need_bins tneat && need_ports 9899 || return 1
    local port rc ns nc
    port=$(free_port)
    serve tneat-server tcp "$port" "$BIN/tneat" -p "$port" || return 1
    run_client 180 "$RUN" /dev/null "$LOG/tneat-client.out" "$LOG/tneat-client.err" \
        "$BIN/tneat" -f 256 -n 1 -l 1 -p "$port" 127.0.0.1
    rc=$?
    nc=$(tneat_blocks "$LOG/tneat-client.err" snd 1)
    local i
    for ((i = 0; i < 150; i++)); do
        ns=$(tneat_blocks "$LOG/tneat-server.log" rcv 1)
        [ "$ns" -ge 256 ] && break
        sleep 0.2
    done
    [ "$nc" = 256 ] || { REASON="client: $nc of 256 flows sent their byte (exit $rc): $(lastlines "$LOG/tneat-client.err")"; return 1; }
    [ "$ns" = 256 ] || { REASON="server: $ns of 256 flows received their byte (client exit $rc)"; return 1; }
    [ "$rc" = 0 ] || { REASON="all flows done, but the client exited $rc"; return 1; }
}

# 6. server_http + client_http_get, a 1 MiB random file: client_http_get -v 1 writes the
#    response to stdout; its body must be the file (sha256) and "# protocol:" the stack.
HTTP_SRV=""
http_server() {
    # one server_http (ports 8080 TCP/SCTP and 8081 TLS) in its own directory.
    mkdir -p "$RUN/htdocs"
    head -c 1048576 /dev/urandom >"$RUN/htdocs/index.html"
    cp "$CERT" "$RUN/cert.pem"
    need_ports 8080 8081 9899 || return 1
    start_bg "$RUN" "$LOG/server_http.log" "$BIN/server_http"
    HTTP_SRV=$BG_PID
    wait_listen "$HTTP_SRV" tcp 8080 && wait_listen "$HTTP_SRV" tcp 8081 ||
        { REASON="server_http is not listening on 8080 and 8081 ($(state "$HTTP_SRV")): $(lastlines "$LOG/server_http.log")"; return 1; }
}
http_pair() {
    local proto=$1 props=$2 port=$3 rc check
    need_bins server_http client_http_get || return 1
    http_server || return 1
    run_client 120 "$RUN" /dev/null "$LOG/client_http_get.out" "$LOG/client_http_get.err" \
        "$BIN/client_http_get" -P "$props" -p "$port" -v 1 127.0.0.1
    rc=$?
    check=$(python3 - "$LOG/client_http_get.out" "$RUN/htdocs/index.html" <<'EOF'
import hashlib, re, sys
out = open(sys.argv[1], 'rb').read()
want = open(sys.argv[2], 'rb').read()
i = out.find(b'HTTP/1.1 200 OK\r\n')
if i < 0:
    print('no HTTP response in the output (%d bytes)' % len(out)); sys.exit()
j = out.find(b'\r\n\r\n', i)
m = re.search(rb'Content-Length: (\d+)', out[i:j])
if j < 0 or not m:
    print('no Content-Length header'); sys.exit()
n = int(m.group(1))
body = out[j + 4:j + 4 + n]
if n != len(want) or len(body) != n:
    print('got %d of %d bytes (Content-Length %d)' % (len(body), len(want), n)); sys.exit()
if hashlib.sha256(body).digest() != hashlib.sha256(want).digest():
    print('the 1 MiB body differs from the file (sha256)'); sys.exit()
if b'transfer finished' not in out[j + 4 + n:]:
    print('body intact but no "transfer finished" report after it'); sys.exit()
p = re.search(rb'# protocol:\t(\S+)', out[j + 4 + n:])
print('ok %s' % (p.group(1).decode() if p else '?'))
EOF
)
    case $check in
        "ok $proto") ;;
        ok*) REASON="1 MiB arrived intact, but over '${check#ok }', not $proto"; return 1 ;;
        *) REASON="$check; client exit $rc: $(lastlines "$LOG/client_http_get.err")"
           alive "$HTTP_SRV" || REASON="$REASON; server_http $(died "$HTTP_SRV"): $(lastlines "$LOG/server_http.log")"
           return 1 ;;
    esac
    [ "$rc" = 0 ] || { REASON="1 MiB arrived intact, but client_http_get exited $rc"; return 1; }
    alive "$HTTP_SRV" || { REASON="server_http $(died "$HTTP_SRV") during the transfer: $(lastlines "$LOG/server_http.log")"; return 1; }
}
pair_http_tcp() { http_pair TCP "$EX/prop_tcp.json" 8080; }
pair_http_tls() { http_pair TCP "$PROPS/tls-client.json" 8081; }
pair_http_sctp() { http_pair SCTP "$EX/prop_sctp.json" 8080; }

# 7. client_http_run_once (RUN_ONCE/NOWAIT driving, 3 contexts) against a local HTTP
#    server on port 80: all 6 flows end, none errs, and the server served 6 GETs.
pair_http_run_once() {
    need_bins client_http_run_once || return 1
    need_ports 80 || return 1
    mkdir -p "$RUN/www"
    echo "hello from the local HTTP server" >"$RUN/www/index.html"
    serve http.server tcp 80 python3 -u -m http.server 80 --bind 127.0.0.1 --directory "$RUN/www" || return 1
    local rc ended
    run_client 120 "$RUN" /dev/null "$LOG/client_http_run_once.out" "$LOG/client_http_run_once.err" \
        "$BIN/client_http_run_once" -t -n 6 -c 3 127.0.0.1
    rc=$?
    ended=$(grep -oE '^\[Flow [0-9]+ ended' "$LOG/client_http_run_once.err" | sort -u | wc -l)
    local served
    served=$(grep -c '"GET / HTTP/1.0" 200' "$LOG/http.server.log")
    grep -q '^on_error' "$LOG/client_http_run_once.err" &&
        { REASON="on_error (exit $rc): $(grep -m2 -A1 '^on_error' "$LOG/client_http_run_once.err" | tr '\n' ' ')"; return 1; }
    [ "$ended" = 6 ] || { REASON="$ended of 6 flows ended (exit $rc): $(lastlines "$LOG/client_http_run_once.err")"; return 1; }
    [ "$served" = 6 ] || { REASON="the HTTP server answered $served of 6 requests"; return 1; }
    [ "$rc" = 0 ] || { REASON="6 flows ended but the client exited $rc"; return 1; }
}

# 8. msbench over SCTP: 6 flows (one bulk, five single messages of 100,000 bytes, each
#    ended by a reset message); the server prints "client disconnected - statistics" for
#    every flow at the peer's end of stream, with whole 100,000-byte messages (>= 2 each).
pair_msbench_sctp() {
    need_bins msbench && need_ports 9899 || return 1
    local port rc reports bad
    port=$(free_port)
    serve msbench-server sctp "$port" "$BIN/msbench" -P "$PROPS/sctp-only.json" -p "$port" || return 1
    run_client 180 "$RUN" /dev/null "$LOG/msbench-client.out" "$LOG/msbench-client.err" \
        "$BIN/msbench" -P "$EX/prop_sctp.json" -p "$port" -T 3 127.0.0.1
    rc=$?
    wait_count "$LOG/msbench-server.log" '^client disconnected - statistics' 6 20
    reports=$(grep -c '^client disconnected - statistics' "$LOG/msbench-server.log" 2>/dev/null)
    bad=$(awk '/^client disconnected - statistics/ {r = 1; next}
               r && /^\tbytes\t\t: / { if ($NF < 200000 || $NF % 100000) n++; r = 0 }
               END { print n + 0 }' "$LOG/msbench-server.log")
    local werr
    werr=$(grep -m1 'neat_write error' "$LOG/msbench-client.err")
    [ "$reports" = 6 ] || { REASON="server reported $reports of 6 flows (client exit $rc)${werr:+; client: $werr}"; return 1; }
    [ "$bad" = 0 ] || { REASON="$bad of 6 reports with a byte count that is not whole 100,000-byte messages${werr:+; client: $werr}"; return 1; }
    [ "$rc" = 0 ] || { REASON="6 reports, but the msbench client exited $rc"; return 1; }
}

# 9. peer over UDP: a receiver (peer -p) and a sender (peer -f test.txt) run NEAT's
#    stop-and-wait file transfer; the received file must have the sender's sha256. peer's
#    properties are built in: {"transport":{"value":["UDP"]}} (it has no -P).
pair_peer_udp() {
    need_bins peer && need_ports 9899 || return 1
    [ -f "$NEAT_SRC/tests/test.txt" ] || { REASON="$NEAT_SRC/tests/test.txt not found"; return 1; }
    local port rc i
    port=$(free_port)
    mkdir -p "$RUN/recv" "$RUN/send"
    cp "$NEAT_SRC/tests/test.txt" "$RUN/send/test.txt"
    start_bg "$RUN/recv" "$LOG/peer-receiver.log" "$BIN/peer" -p "$port" -v 1
    local srv=$BG_PID
    if ! wait_listen "$srv" udp "$port" 30; then
        REASON="the receiver has no UDP socket on $port (its sockets: $(ss -Hlntup 2>/dev/null | grep -E "pid=($(pgrep -g "$srv" | paste -sd'|')),.*" | awk '{print $1":"$5}' | sort -u | tr '\n' ' '))"
        return 1
    fi
    # With strace, the sender's sockets show which transport carried the file.
    local tracer=()
    [ $HAVE_STRACE = 1 ] && tracer=(strace -f -qq -e trace=socket,connect,sendto,sendmsg -e signal=none -xx -s 4 -o "$LOG/peer-sender.strace")
    run_client 120 "$RUN/send" /dev/null "$LOG/peer-sender.out" "$LOG/peer-sender.err" \
        "${tracer[@]}" "$BIN/peer" -h 127.0.0.1 -p "$port" -f test.txt -v 1
    rc=$?
    wait_size "$RUN/recv/test.txt" "$(stat -c %s "$RUN/send/test.txt")" 20
    [ -f "$RUN/recv/test.txt" ] || { REASON="no file received (sender exit $rc): $(lastlines "$LOG/peer-sender.err")"; return 1; }
    local a b
    a=$(sha256sum <"$RUN/send/test.txt")
    b=$(sha256sum <"$RUN/recv/test.txt")
    [ "$a" = "$b" ] || { REASON="received file differs: $(stat -c %s "$RUN/recv/test.txt") of $(stat -c %s "$RUN/send/test.txt") bytes, sha256 mismatch"; return 1; }
    if [ $HAVE_STRACE = 1 ]; then
        # the socket types the sender used towards the receiver's port (UDP = SOCK_DGRAM)
        local used
        used=$(awk -v port="htons($port)" '
            match($0, /(socket)\(AF_INET6?, SOCK_[A-Z]+/) && / = [0-9]+$/ {
                split(substr($0, RSTART, RLENGTH), a, ", "); type[$NF] = a[2]; next }
            index($0, port) && match($0, /(connect|sendto|sendmsg)\([0-9]+/) {
                fd = substr($0, RSTART, RLENGTH); sub(/.*\(/, "", fd); seen[type[fd]] = 1 }
            END { for (t in seen) printf "%s ", t }' "$LOG/peer-sender.strace")
        [ "$used" = "SOCK_DGRAM " ] || { REASON="file intact, but the sender reached port $port with sockets: ${used:-none seen}(not only UDP)"; return 1; }
    fi
    [ "$rc" = 0 ] || { REASON="file intact, but the sender exited $rc"; return 1; }
}

# 10. minimal_server2 + minimal_client (port 5000): the client reads the server's
#     "Hello, this is NEAT!", the server reads the client's "Hi!".
pair_minimal() {
    need_bins minimal_server2 minimal_client || return 1
    need_ports 5000 9899 || return 1
    serve minimal_server2 tcp 5000 "$BIN/minimal_server2" || return 1
    local rc
    run_client 60 "$RUN" /dev/null "$LOG/minimal_client.out" "$LOG/minimal_client.err" \
        "$BIN/minimal_client"
    rc=$?
    grep -q '^Read 20 bytes:' "$LOG/minimal_client.out" && grep -qx 'Hello, this is NEAT!' "$LOG/minimal_client.out" ||
        { REASON="client did not read the server's greeting (exit $rc): $(lastlines "$LOG/minimal_client.out")"; return 1; }
    wait_for "$LOG/minimal_server2.log" '^Hi!$' 10 && grep -q '^Read 3 bytes:' "$LOG/minimal_server2.log" ||
        { REASON="server did not read the client's Hi!: $(lastlines "$LOG/minimal_server2.log")"; return 1; }
    [ "$rc" = 0 ] || { REASON="data exchanged, but minimal_client exited $rc"; return 1; }
}

# 11. DTLS echo: server_dtls_echo (UDP + security, cert.pem) upper-cases what
#     client_dtls_echo sends. The flow must be DTLS over UDP: the client's stats say
#     "transport": "UDP", and (with strace) its first datagram is a DTLS handshake
#     record (0x16 0xfe 0xfd/0xff), not QUIC.
pair_dtls_echo() {
    need_bins server_dtls_echo client_dtls_echo || return 1
    need_ports 8080 9899 || return 1
    cp "$CERT_EC" "$RUN/cert.pem"
    serve server_dtls_echo udp 8080 "$BIN/server_dtls_echo" -v 1 -p cert.pem || return 1
    local rc line
    line="hello dtls $$"
    local up=${line^^}
    local tracer=()
    [ $HAVE_STRACE = 1 ] && tracer=(strace -f -qq -e trace=sendto,sendmsg,sendmmsg -e signal=none -xx -s 4 -o "$LOG/client.strace")
    stdin_holder "$RUN/stdin" say_then_wait "$line" "$LOG/client.out" "^$up\$" 60
    run_client 90 "$RUN" "$RUN/stdin" "$LOG/client.out" "$LOG/client.err" \
        "${tracer[@]}" "$BIN/client_dtls_echo" -J -P "$PROPS/dtls-client.json" 127.0.0.1 8080
    rc=$?
    stop_aux "$HOLDER"
    grep -qx -- "$up" "$LOG/client.out" ||
        { REASON="no upper-cased echo (client exit $rc): $(lastlines "$LOG/client.err") $(lastlines "$LOG/server_dtls_echo.log")"; return 1; }
    local used first
    used=$(grep -m1 -o '"transport": "[^"]*"' "$LOG/client.out" | sed 's/.*: "//; s/"//')
    if [ $HAVE_STRACE = 1 ]; then
        first=$(grep -v -e AF_NETLINK -e AF_UNIX "$LOG/client.strace" | grep -m1 -oE '(iov_base=|sendto\([0-9]+, )"(\\x[0-9a-f]{2})+' | sed 's/.*"//')
        if ! grep -qE '"\\x16\\xfe\\xf[df]' "$LOG/client.strace"; then
            REASON="echo arrived, but not over DTLS: stats transport '${used}', first datagram $first$( [[ $first == \\xc* || $first == \\xd* ]] && echo ' (a QUIC long header)')"
            return 1
        fi
    fi
    [ "$used" = UDP ] || { REASON="echo arrived, but the stats name transport '${used}', not UDP (DTLS)"; return 1; }
    [ "$rc" = 0 ] || { REASON="echo arrived over DTLS, but the client exited $rc"; return 1; }
}

pair echo-tcp pair_echo_tcp
pair echo-sctp pair_echo_sctp
pair daytime-sctp-x$DAYTIME_RUNS pair_daytime_sctp
pair chargen pair_chargen
pair discard-tcp pair_discard_tcp
pair discard-sctp pair_discard_sctp
pair tneat-loop pair_tneat_loop
pair tneat-256 pair_tneat_256
pair http-tcp pair_http_tcp
pair http-tls pair_http_tls
pair http-sctp pair_http_sctp
pair http-run-once pair_http_run_once
pair msbench-sctp pair_msbench_sctp
pair peer-udp pair_peer_udp
pair minimal pair_minimal
pair dtls-echo pair_dtls_echo

echo "neat-examples: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]

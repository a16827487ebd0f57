#!/usr/bin/env bash
# The taps demo: show how properties rank candidates, then start a listener on IPv4 only
# and race a connection to `localhost` against it: ::1 is refused, 127.0.0.1 starts at
# once, and the trace shows it.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-7400}
bash scripts/deps.sh
cargo build --quiet -p taps-cli
taps=target/debug/taps

echo "== taps candidates localhost $port (SCTP or TCP required, SCTP first)"
$taps candidates localhost "$port" --props '{"transport":{"value":["SCTP","TCP"],"precedence":2}}'
echo
echo "== taps listen $port --local 127.0.0.1 --echo   (in the background)"
$taps listen "$port" --local 127.0.0.1 --echo --count 1 &
listener=$!
trap 'kill $listener 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
    sleep 0.1
done
echo
echo "== taps connect localhost $port --trace --message 'hello, taps'"
$taps connect localhost "$port" --trace --message 'hello, taps'
wait $listener

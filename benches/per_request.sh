#!/usr/bin/env bash
# What grows with the processor count, per request: numa_rt's own counters
# (polls, stolen and migrated polls, parks, unparks, spurious wake-ups) from
# its schedtrace, and the server's CPU and context switches from /proc, for
# examples/hello_http under wrk at a few connection counts and P counts.
# Counts, not speed: they mean the same on 2 CPUs and on 64, which is how a
# cost that grows with P shows on a small machine.
#
#   benches/per_request.sh                          # CONNS="1 4 64" PROCS="2 8 16"
#   NUMA_BIN=path/to/hello_http CONNS=64 PROCS=16 DURATION=3 benches/per_request.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-"1 4 64"}
PROCS=${PROCS:-"2 8 16"}
DURATION=${DURATION:-3}
PORT=${PORT:-3290}
if [ -z "${NUMA_BIN:-}" ]; then
    cargo build -q --release --features hyper --example hello_http
    NUMA_BIN=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/examples/hello_http
fi
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
HZ=$(getconf CLK_TCK)
LOG=$(mktemp)
PID=""
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -f "$LOG"' EXIT
snap() { # ticks cs
    local f; read -r -a f <<<"$(cut -d')' -f2- /proc/$1/stat)"
    echo "$((f[11] + f[12])) $(cat /proc/$1/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s + 0}')"
}
node() { grep '  node=0 ' "$LOG" | tail -1; }
field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }
printf '%-6s %-5s %9s %8s %8s %8s %8s %8s %8s %8s %8s\n' conns procs "req/s" "cpu-us" "cs" polls stolen migrated parks unparks spurious
for c in $CONNS; do for p in $PROCS; do
    : >"$LOG"
    NUMA_RT_MAXPROCS=$p NUMA_RT_SCHEDTRACE=250 "$NUMA_BIN" $PORT 2>"$LOG" >/dev/null & PID=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done
    t=$((c < 2 ? c : 2))
    wrk -t$t -c$c -d1s http://127.0.0.1:$PORT/ >/dev/null
    sleep 0.6; a=$(node); s0=$(snap $PID)
    out=$(wrk -t$t -c$c -d${DURATION}s http://127.0.0.1:$PORT/)
    s1=$(snap $PID); sleep 0.6; b=$(node)
    kill $PID; wait $PID 2>/dev/null || true; PID=""
    n=$(echo "$out" | awk '/ requests in / {print $1}')
    per() { awk -v x="$(field "$b" "$1")" -v y="$(field "$a" "$1")" -v n="$n" 'BEGIN {printf "%8.3f", (x - y) / n}'; }
    read -r t0 c0 <<<"$s0"; read -r t1 c1 <<<"$s1"
    printf '%-6s %-5s %9.0f %8.2f %8.3f %s %s %s %s %s %s\n' "$c" "$p" "$(echo "$n / $DURATION" | bc -l)" \
        "$(echo "($t1 - $t0) * 1000000 / $HZ / $n" | bc -l)" "$(echo "($c1 - $c0) / $n" | bc -l)" \
        "$(per polls)" "$(per steals)" "$(per migrated)" "$(per parks)" "$(per unparks)" "$(per spurious)"
    PORT=$((PORT + 1))
done; done

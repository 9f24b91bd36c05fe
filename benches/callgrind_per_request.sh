#!/usr/bin/env bash
# Instructions per request of a hyper hello-world server under callgrind:
# total Ir of the server process over the requests wrk completed in SECS
# (start-up, under 1M Ir, is left in). valgrind runs one thread at a time,
# so this counts the code paths a request takes at a given P count, not
# contention: the way to see on 2 CPUs what grows with the processor count.
#
#   benches/callgrind_per_request.sh BIN PROCS CONNS [SECS] [numa|tokio]
#   benches/callgrind_per_request.sh target/release/examples/hello_http 16 4
#   benches/callgrind_per_request.sh target/release/examples/hello_http_tokio 16 4 3 tokio
#
# Prints: requests, instructions, instructions per request, the callgrind
# file (read it with callgrind_annotate). Needs valgrind and wrk. With
# ATOMICS=1 also the locked instructions per request (start-up included;
# see benches/callgrind_atomics.py).
set -euo pipefail
BIN=$1; P=$2; C=$3; S=${4:-3}; KIND=${5:-numa}
PORT=$((4000 + RANDOM % 1000))
OUT=$(mktemp /tmp/callgrind.XXXXXX)
if [ "$KIND" = tokio ]; then ARGS=("$PORT" "$P"); else ARGS=("$PORT"); fi
NUMA_RT_MAXPROCS=$P valgrind --tool=callgrind ${ATOMICS:+--dump-instr=yes} --callgrind-out-file="$OUT" "$BIN" "${ARGS[@]}" >/dev/null 2>"$OUT.log" &
VP=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
T=$((C < 2 ? C : 2))
N=$(wrk -t$T -c"$C" -d"${S}s" "http://127.0.0.1:$PORT/" | awk '/ requests in / {print $1}')
kill -TERM $VP; wait $VP 2>/dev/null || true
IR=$(callgrind_annotate "$OUT" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "requests=$N instructions=$IR per_request=$((IR / (N > 0 ? N : 1))) file=$OUT"
if [ -n "${ATOMICS:-}" ]; then
    python3 "$(dirname "$0")/callgrind_atomics.py" "$OUT" - "${N:-1}" --top 12 2>/dev/null
fi

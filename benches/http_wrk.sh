#!/usr/bin/env bash
# HTTP/1.1 "Hello, world!" under wrk: numa_rt (examples/hello_http.rs) against
# tokio (examples/hello_http_tokio.rs), both hyper 1.x servers on loopback
# with the same number of worker threads, one after the other.
#
#   benches/http_wrk.sh                    # 2 workers, wrk -t2 -c64 -d5s
#   WORKERS=4 CONNS=256 DURATION=10s benches/http_wrk.sh
#
# Prints requests/s for each server and the ratio numa_rt / tokio. Installs
# wrk with apt-get if it is missing. The servers are killed on exit.
set -euo pipefail

WORKERS=${WORKERS:-2}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
DURATION=${DURATION:-5s}
NUMA_PORT=${NUMA_PORT:-3080}
TOKIO_PORT=${TOKIO_PORT:-3081}

cd "$(dirname "$0")/.."

if ! command -v wrk >/dev/null 2>&1; then
    echo "== installing wrk"
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get install -y wrk >/dev/null || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y wrk >/dev/null; }
fi

echo "== building the servers (release)"
cargo build --release --features hyper --example hello_http --example hello_http_tokio
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BIN="$TARGET_DIR/release/examples"

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT INT TERM

# Waits until something answers HTTP on the port (at most 10 s).
wait_for() {
    local port=$1
    for _ in $(seq 100); do
        if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null \
            || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "server on port $port did not start" >&2
    return 1
}

# Runs wrk against the port; prints wrk's output and sets RPS.
run_wrk() {
    local name=$1 port=$2 out
    echo "== $name: wrk -t$THREADS -c$CONNS -d$DURATION http://127.0.0.1:$port/"
    # A short warm-up, then the measured run.
    wrk -t"$THREADS" -c"$CONNS" -d1s "http://127.0.0.1:$port/" >/dev/null
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$port/")
    echo "$out"
    if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
        echo "warning: $name had errors (see above)" >&2
    fi
    RPS=$(echo "$out" | awk '/^Requests\/sec:/ {print $2}')
}

NUMA_RT_MAXPROCS=$WORKERS "$BIN/hello_http" "$NUMA_PORT" &
PIDS+=($!)
wait_for "$NUMA_PORT"
run_wrk "numa_rt ($WORKERS processors)" "$NUMA_PORT"
NUMA_RPS=$RPS
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true

"$BIN/hello_http_tokio" "$TOKIO_PORT" "$WORKERS" &
PIDS+=($!)
wait_for "$TOKIO_PORT"
run_wrk "tokio ($WORKERS workers)" "$TOKIO_PORT"
TOKIO_RPS=$RPS

echo
echo "== requests/s with $WORKERS workers, wrk -t$THREADS -c$CONNS -d$DURATION"
printf '%-8s %12s\n' numa_rt "$NUMA_RPS" tokio "$TOKIO_RPS"
python3 -c "print(f'ratio numa_rt / tokio: {float(\"$NUMA_RPS\") / float(\"$TOKIO_RPS\"):.3f}')"

#!/usr/bin/env bash
# Light-load cost of numa_rt against tokio: the hyper "Hello, world!" servers
# (examples/hello_http.rs, examples/hello_http_tokio.rs) under wrk at few
# connections and growing processor counts, side by side in one run.
#
#   benches/light_load.sh
#   CONNS="1 64" PROCS="2 16" DURATION=3s IDLE_SECS=3 benches/light_load.sh
#   NUMA_BIN=... TOKIO_BIN=... NUMA_BIN_B=... benches/light_load.sh   # prebuilt
#
# For every cell (connections in CONNS x processors in PROCS) each server is
# started fresh (numa_rt, then tokio, then numa_rt(B) if NUMA_BIN_B is set, so
# all see the same machine state), warmed up with wrk for 1 s, then measured
# with `wrk -tT -cC -d$DURATION` (T = 1 for one connection, else min(2, C)).
#
# Where the figures come from (measured wrk window only):
#   req/s       wrk's "Requests/sec".
#   CPU us/req  delta of utime+stime of the server process, /proc/PID/stat
#               fields 14 and 15 (clock ticks, / `getconf CLK_TCK`), read right
#               before and right after the measured run, divided by the number
#               of requests wrk reports ("N requests in").
#   cs/req      delta of the sum over /proc/PID/task/*/status of
#               voluntary_ctxt_switches + nonvoluntary_ctxt_switches, read right
#               before and right after the measured run, divided by requests
#               (threads that exit in between take their counts with them).
#
# Also: a BUSY set (one busy-loop process per online CPU running beside the
# server, BUSY_CONNS connections at BUSY_PROCS processors), and an IDLE check
# (server at the largest PROCS, one request, then IDLE_SECS with no traffic:
# context switches and CPU ticks used in that window; ideal 0).
#
# Knobs (environment):
#   CONNS="1 4 64"  PROCS="2 8 16"  DURATION=5s  IDLE_SECS=10  PORT=3180 (base)
#   ROUNDS=1        runs per cell and runtime, alternated; the table shows medians
#   BUSY_CONNS=64   BUSY_PROCS=<largest PROCS>   SKIP_BUSY=1  SKIP_IDLE=1
#   NUMA_BIN, TOKIO_BIN   prebuilt server binaries (no cargo build when both set)
#   NUMA_BIN_B            optional second numa_rt build, run as "numa_rt(B)"
#   NUMA_ENV              extra VAR=value words for the numa_rt server(s)
#   NUMA_ENV_B            the same for numa_rt(B) only (default: NUMA_ENV)
#
# Servers and busy loops are killed on exit. Installs wrk with apt-get if missing.
set -euo pipefail

CONNS=${CONNS:-"1 4 64"}
PROCS=${PROCS:-"2 8 16"}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-1}
IDLE_SECS=${IDLE_SECS:-10}
PORT=${PORT:-3180}
SKIP_BUSY=${SKIP_BUSY:-0}
SKIP_IDLE=${SKIP_IDLE:-0}
NUMA_ENV=${NUMA_ENV:-}
NUMA_ENV_B=${NUMA_ENV_B:-$NUMA_ENV}
NUMA_BIN_B=${NUMA_BIN_B:-}

MAX_PROCS=$(printf '%s\n' $PROCS | sort -n | tail -1)
BUSY_CONNS=${BUSY_CONNS:-64}
BUSY_PROCS=${BUSY_PROCS:-$MAX_PROCS}
HZ=$(getconf CLK_TCK)
NCPU=$(getconf _NPROCESSORS_ONLN)

cd "$(dirname "$0")/.."

if ! command -v wrk >/dev/null 2>&1; then
    echo "== installing wrk"
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get install -y wrk >/dev/null || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y wrk >/dev/null; }
fi

if [ -z "${NUMA_BIN:-}" ] || [ -z "${TOKIO_BIN:-}" ]; then
    echo "== building the servers (release)"
    cargo build --release --features hyper --example hello_http --example hello_http_tokio
    TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    NUMA_BIN=${NUMA_BIN:-$TARGET_DIR/release/examples/hello_http}
    TOKIO_BIN=${TOKIO_BIN:-$TARGET_DIR/release/examples/hello_http_tokio}
fi
for b in "$NUMA_BIN" "$TOKIO_BIN" ${NUMA_BIN_B:+"$NUMA_BIN_B"}; do
    [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 1; }
done

RUNTIMES=(numa_rt tokio)
[ -n "$NUMA_BIN_B" ] && RUNTIMES+=("numa_rt(B)")

LOGDIR=$(mktemp -d)
SERVER_PID=""
BUSY_PIDS=()
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    for pid in ${BUSY_PIDS[@]+"${BUSY_PIDS[@]}"}; do kill "$pid" 2>/dev/null || true; done
    for pid in ${BUSY_PIDS[@]+"${BUSY_PIDS[@]}"}; do wait "$pid" 2>/dev/null || true; done
    BUSY_PIDS=()
    rm -rf "$LOGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

NEXT_PORT=$PORT
# Starts server $1 (runtime label) with $2 processors on a fresh port; sets
# SERVER_PID and SERVER_PORT and waits until it answers HTTP (at most 10 s).
start_server() {
    local rt=$1 procs=$2 port=$NEXT_PORT
    NEXT_PORT=$((NEXT_PORT + 1))
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
        echo "port $port is already in use; set PORT=" >&2; exit 1
    fi
    case $rt in
        numa_rt)      env $NUMA_ENV NUMA_RT_MAXPROCS="$procs" "$NUMA_BIN" "$port" >"$LOGDIR/server.log" 2>&1 & ;;
        "numa_rt(B)") env $NUMA_ENV_B NUMA_RT_MAXPROCS="$procs" "$NUMA_BIN_B" "$port" >"$LOGDIR/server.log" 2>&1 & ;;
        tokio)        "$TOKIO_BIN" "$port" "$procs" >"$LOGDIR/server.log" 2>&1 & ;;
    esac
    SERVER_PID=$!
    SERVER_PORT=$port
    for _ in $(seq 100); do
        if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "$rt server on port $port did not start:" >&2; cat "$LOGDIR/server.log" >&2; exit 1
}

stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# Prints "<utime+stime ticks> <ctx switches> <threads> <state>" of process $1.
snap() {
    local pid=$1 stat rest f ticks cs threads
    stat=$(<"/proc/$pid/stat")
    rest=${stat##*) }           # fields from 3 on; comm may contain spaces
    read -r -a f <<<"$rest"
    ticks=$((f[11] + f[12]))    # fields 14 (utime) and 15 (stime)
    cs=$( { cat /proc/"$pid"/task/*/status 2>/dev/null || true; } |
        awk '/^(non)?voluntary_ctxt_switches:/ {s += $2} END {print s + 0}')
    threads=${f[17]}            # field 20 (num_threads)
    echo "$ticks $cs $threads ${f[0]}"
}

ROWS=()     # "load|procs|runtime|rps|cpu_us|cs"
# Measures one server: runtime $1, processors $2, connections $3, load label $4.
measure() {
    local rt=$1 procs=$2 conns=$3 load=$4 threads out s0 s1 reqs rps cpu cs
    threads=$((conns < 2 ? conns : 2))   # 1 for one connection, else min(2, conns)
    start_server "$rt" "$procs"
    local url="http://127.0.0.1:$SERVER_PORT/"
    wrk -t"$threads" -c"$conns" -d1s "$url" >/dev/null
    s0=$(snap "$SERVER_PID")
    out=$(wrk -t"$threads" -c"$conns" -d"$DURATION" "$url")
    s1=$(snap "$SERVER_PID" 2>/dev/null || echo "dead")
    case $s1 in *" Z"|*" X") s1=dead ;; esac
    stop_server
    echo "-- $load procs=$procs $rt: wrk -t$threads -c$conns -d$DURATION"
    echo "$out" | sed 's/^/   /'
    if [ "$s1" = dead ]; then echo "warning: $rt server died" >&2; ROWS+=("$load|$procs|$rt|died|-|-"); return; fi
    if echo "$out" | grep -q "Non-2xx\|Socket errors"; then echo "warning: $rt had errors (see above)" >&2; fi
    reqs=$(echo "$out" | awk '/ requests in / {print $1; exit}')
    rps=$(echo "$out" | awk '/^Requests\/sec:/ {print $2}')
    read -r cpu cs < <(awk -v a="$s0" -v b="$s1" -v n="${reqs:-0}" -v hz="$HZ" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        if (n <= 0) { print "- -"; exit }
        printf "%.2f %.3f\n", (y[1] - x[1]) / hz * 1e6 / n, (y[2] - x[2]) / n }')
    echo "   => requests=$reqs req/s=$rps [ticks cs threads state] before=[$s0] after=[$s1] CPU_us/req=$cpu cs/req=$cs"
    ROWS+=("$load|$procs|$rt|$rps|$cpu|$cs")
}

echo "== light load: CONNS=\"$CONNS\" PROCS=\"$PROCS\" DURATION=$DURATION, $NCPU online CPUs, CLK_TCK=$HZ"
echo "== numa_rt: $NUMA_BIN${NUMA_ENV:+ (env: $NUMA_ENV)}"
[ -n "$NUMA_BIN_B" ] && echo "== numa_rt(B): $NUMA_BIN_B${NUMA_ENV_B:+ (env: $NUMA_ENV_B)}"
echo "== tokio: $TOKIO_BIN"

for conns in $CONNS; do
    for procs in $PROCS; do
        for _ in $(seq "$ROUNDS"); do
            for rt in "${RUNTIMES[@]}"; do
                measure "$rt" "$procs" "$conns" "c$conns"
            done
        done
    done
done

if [ "$SKIP_BUSY" != 1 ]; then
    echo "== busy: $NCPU busy-loop processes beside the server"
    for _ in $(seq "$NCPU"); do
        sh -c 'while :; do :; done' &
        BUSY_PIDS+=($!)
    done
    for _ in $(seq "$ROUNDS"); do
        for rt in "${RUNTIMES[@]}"; do
            measure "$rt" "$BUSY_PROCS" "$BUSY_CONNS" "busy c$BUSY_CONNS"
        done
    done
    for pid in "${BUSY_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${BUSY_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    BUSY_PIDS=()
fi

IDLE_ROWS=()
if [ "$SKIP_IDLE" != 1 ]; then
    for rt in "${RUNTIMES[@]}"; do
        start_server "$rt" "$MAX_PROCS"
        curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$SERVER_PORT/"
        sleep 0.2
        s0=$(snap "$SERVER_PID")
        sleep "$IDLE_SECS"
        s1=$(snap "$SERVER_PID")
        stop_server
        read -r t0 c0 _ <<<"$s0"; read -r t1 c1 n1 _ <<<"$s1"
        echo "-- idle ${IDLE_SECS}s procs=$MAX_PROCS $rt: ctx switches $c0->$c1, CPU ticks $t0->$t1, threads $n1"
        IDLE_ROWS+=("$rt|$MAX_PROCS|$n1|$((c1 - c0))|$((t1 - t0))")
    done
fi

echo
echo "## Light load: wrk -d$DURATION after 1 s warm-up, $NCPU online CPUs"
echo
echo "CPU µs/req: server utime+stime delta (/proc/PID/stat fields 14+15, CLK_TCK=$HZ) / requests."
echo "cs/req: delta of sum of voluntary+nonvoluntary_ctxt_switches over /proc/PID/task/*/status / requests."
echo "Both read right before and right after the measured wrk run."
echo
echo "Medians of $ROUNDS run(s) per cell and runtime (runs alternate between the runtimes)."
echo
# Medians per (load, procs, runtime), then the table and the ratios.
printf '%s\n' "${ROWS[@]}" | python3 -c '
import sys, statistics
rows, order = {}, []
for line in sys.stdin:
    load, procs, rt, rps, cpu, cs = line.rstrip("\n").split("|")
    key = (load, procs)
    if key not in order:
        order.append(key)
    rows.setdefault((key, rt), []).append((rps, cpu, cs))
def med(vals):
    nums = [float(v) for v in vals if v not in ("-", "died", "")]
    return statistics.median(nums) if nums else None
def fmt(x, d):
    return "-" if x is None else f"{x:.{d}f}"
rts = []
for (_, rt) in rows:
    if rt not in rts:
        rts.append(rt)
table = {}
print("| load | procs | runtime | req/s | CPU µs/req | cs/req |")
print("|---|---:|---|---:|---:|---:|")
for key in order:
    for rt in rts:
        if (key, rt) not in rows:
            continue
        runs = rows[(key, rt)]
        m = tuple(med([r[i] for r in runs]) for i in range(3))
        table[(key, rt)] = m
        print(f"| {key[0]} | {key[1]} | {rt} | {fmt(m[0], 0)} | {fmt(m[1], 2)} | {fmt(m[2], 3)} |")
def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"
print()
print("Ratios per cell (req/s: higher is better; CPU/req, cs/req: lower is better):")
pairs = [("numa_rt", "tokio")]
if "numa_rt(B)" in rts:
    pairs += [("numa_rt(B)", "tokio"), ("numa_rt(B)", "numa_rt")]
for key in order:
    for a, b in pairs:
        if (key, a) in table and (key, b) in table:
            x, y = table[(key, a)], table[(key, b)]
            cell = key[0] + " procs=" + key[1]
            print(f"  {cell:<20} {a}/{b}: req/s {ratio(x[0], y[0])}  CPU/req {ratio(x[1], y[1])}  cs/req {ratio(x[2], y[2])}")
'

if [ ${#IDLE_ROWS[@]} -gt 0 ]; then
    echo
    echo "## Idle: one request, then ${IDLE_SECS}s with no traffic (ideal: 0)"
    echo
    echo "| runtime | procs | threads | ctx switches | CPU ticks (1/$HZ s) |"
    echo "|---|---:|---:|---:|---:|"
    for row in "${IDLE_ROWS[@]}"; do
        IFS='|' read -r rt procs n cs t <<<"$row"
        printf '| %s | %s | %s | %s | %s |\n' "$rt" "$procs" "$n" "$cs" "$t"
    done
fi

#!/usr/bin/env bash
# Instructions per spawned task (spawn + run + complete) under callgrind, for
# numa_rt, tokio and the Go twin, at each P count, split into the parts of
# issue 39 by benches/callgrind_spawn_split.py.
#
# Each cell runs a one-shot binary twice under callgrind, with K and 2K timed
# iterations (after one untimed warm-up iteration in both), and reports
#
#     (Ir(2K) - Ir(K)) / (K x tasks per iteration)
#
# with Ir the whole process's instructions (every thread): start-up,
# shutdown and the warm-up drop out, as in benches/channels_per_message.sh.
# The Rust side is examples/spawn_cost.rs (benches/common's workloads, run
# without criterion); the Go side is benches/go/rt_multi_threaded.go with
# GOMAXPROCS=<workers>. valgrind runs one thread at a time, so these count
# the code paths a task takes, not contention or cache misses; hardware
# counters (`perf stat -e instructions`) are not available on this VM.
#
#   bash benches/spawn_per_task.sh
#   WORKERS="1 2 16" WORKLOADS="spawn_from_task chained_spawn" RUNTIMES="numa_rt go" \
#       bash benches/spawn_per_task.sh
#
# Workloads: spawn_from_task (spawn_many_local's 10,000 spawns from a task on
# a worker), spawn_many_local (the same from block_on: on numa_rt and tokio
# block_on's thread is no worker), spawn_many_remote_idle, chained_spawn,
# ping_pong (2,000 spawns per iteration). On Go the first two are the same
# program (its main goroutine is a goroutine).
#
# Environment: WORKERS (default "1 16"), WORKLOADS ("spawn_from_task
# spawn_many_local"), RUNTIMES ("numa_rt tokio go"), K (2; GO_K, 5, for Go), OUT (where the
# callgrind files stay; default /tmp/spawn-callgrind), GO (go command),
# CG_EXTRA (more callgrind options: `--dump-instr=yes` for
# benches/callgrind_atomics.py's locked instructions per task).
# Prints each cell's split and a markdown table of the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-"1 16"}
WORKLOADS=${WORKLOADS:-"spawn_from_task spawn_many_local"}
RUNTIMES=${RUNTIMES:-"numa_rt tokio go"}
K=${K:-2}
GO_K=${GO_K:-5}
OUT=${OUT:-/tmp/spawn-callgrind}
GO=${GO:-go}
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install -y valgrind)" >&2; exit 1; }
cargo build --profile bench --example spawn_cost 2>&1 | grep -E '^(error|warning: unused)' >&2 || true
RUST=target/release/examples/spawn_cost
GOBIN=$OUT/go-rt
case " $RUNTIMES " in *" go "*)
    (cd benches/go && GOCACHE=${GOCACHE:-/tmp/go-cache} GOPATH=${GOPATH:-/tmp/go-path} \
        "$GO" build -o "$GOBIN" rt_multi_threaded.go) ;;
esac

tasks_per_iter() {
    case $1 in
        spawn_*) echo 10000 ;;
        chained_spawn) echo 1000 ;;
        ping_pong) echo 2000 ;;
        *) echo "no task count for $1" >&2; exit 1 ;;
    esac
}

# cg FILE CMD... -> the file's total Ir
cg() {
    local f=$1; shift
    # shellcheck disable=SC2086 # CG_EXTRA is a list of options
    valgrind --tool=callgrind ${CG_EXTRA:-} --callgrind-out-file="$f" "$@" >"$f.stdout" 2>"$f.log"
    sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$f" | head -1
}

ROWS=()
for w in $WORKERS; do
    for wl in $WORKLOADS; do
        line="| \`$wl\` | $w |"
        for rt in $RUNTIMES; do
            base="$OUT/$wl.$rt.${w}p"
            if [ "$rt" = go ]; then
                gwl=$wl; [ "$wl" = spawn_from_task ] && gwl=spawn_many_local
                # Async preemption's signals trip callgrind up (an assertion in
                # its signal handling); GC cycles differ run to run, so Go
                # runs more iterations (GO_K) to average them.
                k=$GO_K
                long=$(GODEBUG=asyncpreemptoff=1 GOMAXPROCS=$w cg "$base.long.out" "$GOBIN" "$gwl" $((2 * k)))
                short=$(GODEBUG=asyncpreemptoff=1 GOMAXPROCS=$w cg "$base.short.out" "$GOBIN" "$gwl" "$k")
            else
                k=$K
                long=$(cg "$base.long.out" "$RUST" "$wl" "$rt" "$w" $((2 * k)))
                short=$(cg "$base.short.out" "$RUST" "$wl" "$rt" "$w" "$k")
            fi
            tasks=$((k * $(tasks_per_iter "$wl")))
            per=$(((long - short) / tasks))
            echo "== $wl $rt workers=$w: Ir $long - $short over $tasks tasks = $per per task"
            python3 benches/callgrind_spawn_split.py "$base.long.out" "$base.short.out" "$tasks" --top 12 ${INCLUSIVE:+--inclusive $INCLUSIVE} || true
            line="$line $(printf "%'d" "$per") |"
        done
        ROWS+=("$line")
    done
done
echo
header="| workload | P's |"
sep="|---|---|"
for rt in $RUNTIMES; do header="$header $rt |"; sep="$sep---|"; done
echo "Instructions per task (callgrind, whole process, (Ir(2K) - Ir(K)) / tasks, K=$K for Rust, $GO_K for Go):"
echo
echo "$header"
echo "$sep"
printf '%s\n' "${ROWS[@]}"

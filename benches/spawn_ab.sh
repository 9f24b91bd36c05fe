#!/usr/bin/env bash
# Issue 39's comparison in one alternated loop, without criterion: each
# round runs examples/spawn_cost (benches/common's workloads, one process per
# cell) on numa_rt as built before a change (OLD) and after (NEW), on tokio
# (NEW's tokio side), and the Go twin (benches/go/rt_multi_threaded.go, with
# GOMAXPROCS=<workers>); µs per iteration, medians of ROUNDS, and the ratios
# new/old, new/tokio and new/Go.
#
#   cargo build --release --example spawn_cost      # NEW
#   (a worktree of the older commit, built the same way: OLD)
#   OLD=/tmp/spawn_cost.old NEW=target/release/examples/spawn_cost bash benches/spawn_ab.sh
#   WORKERS="2 16" WORKLOADS="chained_spawn" ROUNDS=15 OLD=... NEW=... bash benches/spawn_ab.sh
#
# OLD may be NEW itself (a run-to-run noise check). spawn_from_task is
# spawn_many_local with the spawning loop inside a task; Go's twin of both
# is its spawn_many_local (its main goroutine is a goroutine). One process
# per cell and round: start-up is outside the timed iterations (spawn_cost
# times after one warm-up iteration).
#
# Environment: OLD, NEW (required), WORKERS ("2 4 16"), WORKLOADS (the five
# below), ROUNDS (9), GO (go command), GOBIN (a built Go twin; default:
# built here into /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${OLD:?OLD=<spawn_cost binary before>}
NEW=${NEW:?NEW=<spawn_cost binary after>}
ROUNDS=${ROUNDS:-9}
WORKERS=${WORKERS:-"2 4 16"}
WORKLOADS=${WORKLOADS:-"spawn_many_local spawn_from_task chained_spawn ping_pong spawn_many_remote_idle"}
GO=${GO:-go}
if [ -z "${GOBIN:-}" ]; then
    GOBIN=/tmp/go-rt-multi-threaded
    (cd benches/go && GOCACHE=${GOCACHE:-/tmp/go-cache} GOPATH=${GOPATH:-/tmp/go-path} \
        "$GO" build -o "$GOBIN" rt_multi_threaded.go)
fi
iters() {
    case $1 in
        spawn_*) echo 60 ;;
        chained_spawn) echo 600 ;;
        ping_pong) echo 200 ;;
        *) echo "unknown workload $1" >&2; exit 1 ;;
    esac
}
us() { sed -n 's/.*(\([0-9.]*\) µs\/iter).*/\1/p' | tail -1; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| workload | workers | old µs | new µs | tokio µs | Go µs | new/old | new/tokio | new/Go |"
echo "|---|---|---|---|---|---|---|---|---|"
for w in $WORKERS; do
    for wl in $WORKLOADS; do
        n=$(iters "$wl")
        gwl=$wl
        [ "$wl" = spawn_from_task ] && gwl=spawn_many_local
        : >"$tmp/o"; : >"$tmp/n"; : >"$tmp/t"; : >"$tmp/g"
        for _ in $(seq "$ROUNDS"); do
            "$OLD" "$wl" numa_rt "$w" "$n" 2>/dev/null | us >>"$tmp/o"
            "$NEW" "$wl" numa_rt "$w" "$n" 2>/dev/null | us >>"$tmp/n"
            "$NEW" "$wl" tokio "$w" "$n" 2>/dev/null | us >>"$tmp/t"
            GOMAXPROCS=$w "$GOBIN" "$gwl" "$n" 2>/dev/null | us >>"$tmp/g"
        done
        o=$(median <"$tmp/o"); nw=$(median <"$tmp/n"); t=$(median <"$tmp/t"); g=$(median <"$tmp/g")
        echo "| $wl | $w | $o | $nw | $t | $g | $(ratio "$nw" "$o") | $(ratio "$nw" "$t") | $(ratio "$nw" "$g") |"
    done
done

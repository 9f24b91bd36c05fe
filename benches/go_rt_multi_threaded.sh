#!/usr/bin/env bash
# benches/rt_multi_threaded.rs's workloads on numa_rt and tokio beside their
# Go twins (benches/go/rt_multi_threaded.go), alternated in one loop, µs per
# iteration, medians of ROUNDS rounds, and the ratios (issue 39).
#
#   bash benches/go_rt_multi_threaded.sh
#   WORKERS="2" WORKLOADS="chained_spawn ping_pong" ROUNDS=5 bash benches/go_rt_multi_threaded.sh
#
# rt_multi_threaded.rs has no one-shot mode, so each Rust cell is one run of
# the criterion bench binary filtered to one function (`^<group>/<runtime>$`,
# BENCH_WORKERS=<workers>, --warm-up-time WARM --measurement-time MEASURE,
# its own CRITERION_HOME so no baseline is shared) and the figure is
# criterion's median (estimates.json). The Go cell is the Go twin with
# GOMAXPROCS=<workers>: one untimed warm-up iteration, then GO_ITERS timed
# ones (default per workload, ~0.5-1 s), µs per iteration. Each round runs
# numa_rt, tokio, Go in turn. Go's "remote" spawns come from the main
# goroutine (Go has no thread outside its scheduler): the same spawn as the
# local one plus a join channel per goroutine.
#
# Environment: WORKERS (default "1 2 16"), WORKLOADS (the six), ROUNDS (3),
# WARM (0.5), MEASURE (1), GO_ITERS (per workload), BIN (the Rust bench
# binary; default: built by cargo), GO (Debian's golang-go: `apt-get install
# -y golang-go`). Prints one line per cell and a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-"1 2 16"}
WORKLOADS=${WORKLOADS:-"spawn_many_local spawn_many_remote_idle spawn_many_remote_busy1 yield_many ping_pong chained_spawn"}
ROUNDS=${ROUNDS:-3}
WARM=${WARM:-0.5}
MEASURE=${MEASURE:-1}
GO=${GO:-go}
command -v "$GO" >/dev/null || { echo "needs Go (apt-get install -y golang-go)" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
    BIN=$(cargo bench --bench rt_multi_threaded --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*rt_multi_threaded-[0-9a-f]*\)).*/\1/p' | tail -1)
    [ -x "$BIN" ] || { echo "could not build or find the rt_multi_threaded bench binary" >&2; exit 1; }
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
GOBIN=$TMP/go-rt
(cd benches/go && GOCACHE=${GOCACHE:-/tmp/go-cache} GOPATH=${GOPATH:-/tmp/go-path} \
    "$GO" build -o "$GOBIN" rt_multi_threaded.go)

go_iters() {
    case $1 in
        spawn_many_*) echo 100 ;;
        yield_many) echo 30 ;;
        ping_pong) echo 500 ;;
        chained_spawn) echo 3000 ;;
    esac
}

# criterion_median WORKLOAD RUNTIME WORKERS -> µs
criterion_median() {
    local group=$1 home=$TMP/criterion
    [ "$3" = 2 ] || group="$1/$3proc"
    rm -rf "$home"
    CRITERION_HOME=$home BENCH_WORKERS=$3 "$BIN" --bench "^$group/$2\$" --noplot \
        --warm-up-time "$WARM" --measurement-time "$MEASURE" >"$TMP/log" 2>&1 ||
        { cat "$TMP/log" >&2; exit 1; }
    local est
    est=$(find "$home" -path "*/$2/new/estimates.json" | head -1)
    [ -n "$est" ] || { echo "no estimates for $group/$2" >&2; cat "$TMP/log" >&2; exit 1; }
    python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["median"]["point_estimate"] / 1e3))' "$est"
}

med() { python3 -c 'import sys,statistics; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.1f}")' "$@"; }
ratio() { python3 -c 'import sys; print(f"{float(sys.argv[1])/float(sys.argv[2]):.2f}")' "$1" "$2"; }

ROWS=()
for w in $WORKERS; do
    for wl in $WORKLOADS; do
        n=() t=() g=()
        for _ in $(seq "$ROUNDS"); do
            n+=("$(criterion_median "$wl" numa_rt "$w")")
            t+=("$(criterion_median "$wl" tokio "$w")")
            g+=("$(GOMAXPROCS=$w "$GOBIN" "$wl" "${GO_ITERS:-$(go_iters "$wl")}" |
                sed -n 's/.*(\([0-9.]*\) µs\/iter).*/\1/p')")
        done
        mn=$(med "${n[@]}") mt=$(med "${t[@]}") mg=$(med "${g[@]}")
        echo "$wl workers=$w: numa_rt ${n[*]} | tokio ${t[*]} | go ${g[*]}" >&2
        ROWS+=("| \`$wl\` | $w | $mn | $mt | $mg | $(ratio "$mn" "$mg") | $(ratio "$mt" "$mg") | $(ratio "$mn" "$mt") |")
    done
done
echo
echo "µs per iteration, median of $ROUNDS alternated rounds (Rust: criterion's median, ${MEASURE}s; Go: GO_ITERS iterations after one warm-up):"
echo
echo "| workload | workers | numa_rt | tokio | Go | numa_rt/Go | tokio/Go | numa_rt/tokio |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"

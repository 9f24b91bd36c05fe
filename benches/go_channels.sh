#!/usr/bin/env bash
# benches/channels.rs's workloads on numa_rt, tokio and async-executor beside
# their Go twins (benches/go/channels.go), alternated in one loop, ns per
# message, medians (and minimums) of ROUNDS rounds.
#
#   bash benches/go_channels.sh
#   WORKERS="1 2 16" WORKLOADS="pipeline fan_in" ROUNDS=9 bash benches/go_channels.sh
#
# Each cell runs each binary once per round: the Rust bench binary in its
# CHANNELS_ONCE mode (`<workload>,<family>,<runtime>,<workers>,,ITERS`, poll
# counting off) for numa_rt and tokio with tokio's channels and with
# async-channel and for async-executor with async-channel, and the Go twin
# with GOMAXPROCS=<workers> and ITERS iterations. Each process measures ITERS
# iterations of the workload after its runtime has started; neither side has
# a warm-up run. Go's channels are the runtime's own (a send to a waiting
# receiver hands the value over and readies the receiver into `runnext`), so
# the Go column compares whole systems, not schedulers alone.
#
# Environment: WORKERS (default "1 2"), WORKLOADS ("ping_pong pipeline fan_in
# req_resp"), ROUNDS (5), ITERS (3), BIN (the Rust bench binary; default:
# built by cargo), GO (the go command; Debian's golang-go: `apt-get install -y
# golang-go`). Prints one line per cell and a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-"1 2"}
WORKLOADS=${WORKLOADS:-"ping_pong pipeline fan_in req_resp"}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-3}
GO=${GO:-go}
command -v "$GO" >/dev/null || { echo "needs Go (apt-get install -y golang-go)" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
    BIN=$(cargo bench --bench channels --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*channels-[0-9a-f]*\)).*/\1/p' | tail -1)
    [ -x "$BIN" ] || { echo "could not build or find the channels bench binary" >&2; exit 1; }
fi
GOBIN=$(mktemp -d)/go-channels
trap 'rm -rf "$(dirname "$GOBIN")"' EXIT
(cd benches/go && "$GO" build -o "$GOBIN" channels.go)

# The columns: label, then how to run it ("rust <family> <runtime>" or "go").
COLUMNS=(
    "numa_rt/tokio-ch|rust tokio numa_rt"
    "numa_rt/async-ch|rust async numa_rt"
    "tokio/tokio-ch|rust tokio tokio"
    "tokio/async-ch|rust async tokio"
    "async-executor/async-ch|rust async async_executor"
    "go|go"
)

ns_of() { sed -n 's/.*(\([0-9.]*\) ns\/message).*/\1/p'; }

median_min() {
    python3 -c 'import sys,statistics; v=[float(x) for x in sys.argv[1:]]; print(f"{statistics.median(v):.1f} ({min(v):.1f})")' "$@"
}

ROWS=()
for w in $WORKERS; do
    for wl in $WORKLOADS; do
        declare -A got=()
        for _ in $(seq "$ROUNDS"); do
            for col in "${COLUMNS[@]}"; do
                label=${col%%|*}
                read -r kind fam rt <<<"${col#*|}"
                if [ "$kind" = go ]; then
                    v=$(GOMAXPROCS=$w "$GOBIN" "$wl" "$ITERS" | ns_of)
                else
                    v=$(CHANNELS_PROBE=0 CHANNELS_ONCE="$wl,$fam,$rt,$w,,$ITERS" "$BIN" 2>&1 | ns_of)
                fi
                got[$label]="${got[$label]:-} $v"
            done
        done
        line="| \`$wl\` | $w |"
        for col in "${COLUMNS[@]}"; do
            label=${col%%|*}
            # shellcheck disable=SC2086
            line="$line $(median_min ${got[$label]}) |"
        done
        echo "$wl workers=$w: $line" >&2
        ROWS+=("$line")
        unset got
    done
done
echo
echo "ns per message, median (minimum) of $ROUNDS alternated rounds, $ITERS iterations per process:"
echo
header="| workload | workers |"
sep="|---|---|"
for col in "${COLUMNS[@]}"; do header="$header ${col%%|*} |"; sep="$sep---|"; done
echo "$header"
echo "$sep"
printf '%s\n' "${ROWS[@]}"

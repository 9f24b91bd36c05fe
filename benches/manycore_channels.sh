#!/usr/bin/env bash
# The channel workloads (benches/channels.rs) and HTTP on the lent 16-core
# machine, in one device call: a build under test ("new") beside an older
# one ("head", optional), tokio, and Go's twin (optional), alternated.
# Device time is scarce (15 minutes a session, starts included), so this is
# sized to ~150 s; PARTS picks a subset.
#
# Preparing .manycore (on the 2-CPU machine, from the project's root):
#   BENCHES="channels" bash ../shared/manycore/bundle.sh   # deletes .manycore first
#   cp benches/manycore_channels.sh .manycore/
#   # the older build, if wanted: its channels bench and hello_http, e.g. from a
#   # worktree of that commit: .manycore/bench/channels-head, .manycore/hello_http_head
#   (cd benches/go && go build -o ../../.manycore/go-channels channels.go)
# Running (device tool):
#   run(command="bash .manycore/manycore_channels.sh 2>&1 | tee $OUT/ch.txt | tail -40",
#       carry=[".manycore"])
#
# Environment: PARTS (default "pairs fan0 fanwork http"), WORKERS (default
# "16 8"). Lines: "<workload>[/<family>] w=<workers> <build> <ns per message>
# [counters]"; benches/channels_summary.py reads the raw lines.
#   pairs   ping_pong, pipeline, req_resp; both channel families; 16 workers
#   fan0    the 64-producer fan-in without work, 5 runs per build with the
#           keep/spread decision and what the measurement read per hub wake
#           (batch_last_work_per_wake_ns): the one-in-four wrong "spread"
#   fanwork the fan-in with ~5 us and ~1.7 us of work per value
#   http    hello_http busy (12 workers, 256 connections) and light (4)
set -u
D=$(cd "$(dirname "$0")" && pwd)
PARTS=${PARTS:-"pairs fan0 fanwork http"}
WORKERS=${WORKERS:-"16 8"}
ns() { sed -n 's/.*(\([0-9.]*\) ns\/message).*/\1/p' | head -1; }
T0=$(date +%s)
# The host: req_resp at 16 workers ran 1.4x tokio with each pair alone on its
# P; whether 16 vCPUs are 8 cores' hyperthreads was never printed.
lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\))' | tr -s ' '
# "label:binary:runtime" for each build present.
BUILDS=()
[ -x "$D/bench/channels-head" ] && BUILDS+=("head:channels-head:numa_rt")
BUILDS+=("new:channels:numa_rt" "tokio:channels:tokio")
go() { [ -x "$D/go-channels" ] && echo "$1 w=$2 go $(GOMAXPROCS=$2 "$D/go-channels" "$3" 3 2>&1 | ns)"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

if has pairs; then
  for spec in "ping_pong,10000,5" "pipeline,100000,3" "req_resp,1000,3"; do
    IFS=, read -r wl n rounds <<<"$spec"
    for _ in $(seq "$rounds"); do for fam in async tokio; do for c in "${BUILDS[@]}"; do
      IFS=: read -r label bin rt <<<"$c"
      echo "$wl/$fam w=16 $label $(CHANNELS_PROBE=0 CHANNELS_ONCE=$wl,$fam,$rt,16,$n,3 "$D/bench/$bin" 2>&1 | ns)"
    done; done; done
    go "$wl/go" 16 "$wl"
  done
  echo "t=$(($(date +%s) - T0))s"
fi

if has fan0; then
  for w in $WORKERS; do
    for _ in 1 2 3 4 5; do for c in "${BUILDS[@]}"; do
      IFS=: read -r label bin rt <<<"$c"
      [ "$rt" = numa_rt ] || continue
      out=$(CHANNELS_ONCE=fan_in,async,numa_rt,$w,1000,3 "$D/bench/$bin" 2>&1)
      echo "fan0 w=$w $label $(echo "$out" | ns) $(echo "$out" | tail -1 | tr ' ' '\n' |
        grep -E '^(batch_keeps|batch_spreads|long_poll_offers|batch_last_work_per_wake_ns|tasks_stolen)=' | tr '\n' ' ')"
    done; done
    echo "fan0 w=$w tokio $(CHANNELS_PROBE=0 CHANNELS_ONCE=fan_in,async,tokio,$w,1000,3 "$D/bench/channels" 2>&1 | ns)"
    go fan0 "$w" fan_in
  done
  echo "t=$(($(date +%s) - T0))s"
fi

if has fanwork; then
  for w in $WORKERS; do
    for spec in "3000,100" "1000,200"; do
      IFS=, read -r pw n <<<"$spec"
      for _ in 1 2 3; do for c in "${BUILDS[@]}"; do
        IFS=: read -r label bin rt <<<"$c"
        echo "fan_in/work$pw w=$w $label $(CHANNELS_WORK=$pw,0 CHANNELS_PROBE=0 CHANNELS_ONCE=fan_in,async,$rt,$w,$n,3 "$D/bench/$bin" 2>&1 | ns)"
      done; done
    done
  done
  echo "probe new work3000 w=16: $(CHANNELS_WORK=3000,0 CHANNELS_ONCE=fan_in,async,numa_rt,16,100,3 "$D/bench/channels" 2>&1 |
    tail -1 | tr ' ' '\n' | grep -E '^(long_poll_offers|tasks_stolen|batch_keeps|batch_spreads|p[0-9]+_busy_us)=' | tr '\n' ' ')"
  echo "t=$(($(date +%s) - T0))s"
fi

if has http && [ -f "$D/run.sh" ]; then
  # shellcheck source=/dev/null
  source "$D/run.sh" none
  tri() { for _ in 1 2 3; do
    [ -x "$D/hello_http_head" ] &&
      serve head 18083 "$3" "$4" "$5" env NUMA_RT_MAXPROCS="$1" taskset -c "$2" "$D/hello_http_head" 18083
    serve new 18084 "$3" "$4" "$5" env NUMA_RT_MAXPROCS="$1" taskset -c "$2" "$D/hello_http" 18084
    serve tokio 18081 "$3" "$4" "$5" taskset -c "$2" "$D/hello_http_tokio" 18081 "$1"
  done; }
  echo "== busy 12 workers, 256 conns"; tri 12 0-11 256 12-15 4
  echo "== light 16 workers, 4 conns"; tri 16 0-15 4 15 3
  echo "t=$(($(date +%s) - T0))s"
fi

#!/usr/bin/env bash
# Is the 16-core busy-HTTP gap the server's or wrk's? On the lent 16-core
# machine (from .manycore/, see ../shared/manycore/README.md), numa_rt's
# hello_http beside its tokio twin, alternated, reporting what run.sh does
# (req/s, the server's CPU us per request, context switches per request)
# plus wrk's own CPU (user+sys seconds over the run, per wrk CPU): when wrk's
# CPUs are saturated, requests/s measure the client's cost per response.
#   bash .manycore/manycore_http_client.sh     (~50 s a cell)
# CELLS (default "busy12 busy8 light"; add "burst"): busy12, 12 workers on CPUs 0-11 with
# wrk -t4 -c256 on 12-15 (run.sh's "busy"); busy8, 8 workers on 0-7 with wrk
# -t8 -c256 on 8-15; busy4, 4 workers on 0-3 with wrk -t12 -c256 on 4-15 (a
# client with headroom); light, 16 workers, wrk -t1 -c4 on CPU 15 (run.sh's
# "light"); burst, 16 workers on 0-14 and examples/burst_client on CPU 15 (4
# and then 8 requests at once into an idle server, 200 us apart: the first
# and last answer of each burst; copy the binary into .manycore first:
# `cargo build --release --example burst_client`, then
# `cp target/release/examples/burst_client .manycore/`).
set -u
# The host: req_resp at 16 workers ran 1.4x tokio with each pair alone on its
# P; whether 16 vCPUs are 8 cores' hyperthreads was never printed.
lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\))' | tr -s ' '
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$D/lib
hz=$(getconf CLK_TCK)
ready() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
cs() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
cpu() { awk '{print $14 + $15}' /proc/"$1"/stat; }
serve() { # NAME PORT CONNS WRK_THREADS WRK_CPUS SECONDS CMD...
  local name=$1 port=$2 conns=$3 thr=$4 wcpus=$5 dur=$6; shift 6
  "$@" >/dev/null 2>&1 & local pid=$!
  ready "$port" || { echo "$name: server did not start"; kill $pid; wait $pid 2>/dev/null; return; }
  taskset -c "$wcpus" "$D/wrk" -t"$thr" -c"$conns" -d1s "http://127.0.0.1:$port/" >/dev/null 2>&1
  local c0 t0 c1 t1 out wc
  c0=$(cs $pid); t0=$(cpu $pid)
  local TIMEFORMAT='%U %S'
  wc=$( { time taskset -c "$wcpus" "$D/wrk" -t"$thr" -c"$conns" -d"${dur}s" "http://127.0.0.1:$port/" > /tmp/wrk.out 2>&1; } 2>&1 )
  out=$(cat /tmp/wrk.out)
  c1=$(cs $pid); t1=$(cpu $pid)
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  local ncpu; ncpu=$(taskset -c "$wcpus" nproc)
  echo "$out" | awk -v name="$name" -v dc=$((c1 - c0)) -v dt=$((t1 - t0)) -v hz="$hz" -v d="$dur" -v wc="$wc" -v nc="$ncpu" '
    /requests in/ { n = $1 } /Latency/ { lat = $2 }
    END { if (n == 0) { printf "%-8s no requests served\n", name; exit }
          split(wc, w, " ");
          printf "%-8s %9.0f req/s  %6.1f cpu-us/req  %6.3f cs/req  avg-lat %-9s wrk %4.0f%% of its %d CPUs, %5.2f us/req\n",
            name, n / d, dt / hz * 1e6 / n, dc / n, lat, (w[1] + w[2]) / d / nc * 100, nc, (w[1] + w[2]) * 1e6 / n }'
}
cell() { # PROCS SERVER_CPUS CONNS WRK_THREADS WRK_CPUS SECONDS
  for _ in 1 2 3; do
    serve numa_rt 18083 "$3" "$4" "$5" "$6" env NUMA_RT_MAXPROCS="$1" taskset -c "$2" "$D/hello_http" 18083
    serve tokio 18081 "$3" "$4" "$5" "$6" taskset -c "$2" "$D/hello_http_tokio" 18081 "$1"
  done
}
has() { case " ${CELLS:-busy12 busy8 light} " in *" $1 "*) return 0 ;; esac; return 1; }
has busy12 && { echo "== busy: 12 workers on 0-11, wrk -t4 -c256 on 12-15"; cell 12 0-11 256 4 12-15 5; }
has busy8 && { echo "== busy: 8 workers on 0-7, wrk -t8 -c256 on 8-15"; cell 8 0-7 256 8 8-15 5; }
has busy4 && { echo "== busy: 4 workers on 0-3, wrk -t12 -c256 on 4-15"; cell 4 0-3 256 12 4-15 5; }
has light && { echo "== light: 16 workers on 0-15, wrk -t1 -c4 on 15"; cell 16 0-15 4 1 15 4; }
burst() { # NAME PORT CONNS CMD...
  local name=$1 port=$2 conns=$3; shift 3
  "$@" >/dev/null 2>&1 & local pid=$!
  ready "$port" || { echo "$name: server did not start"; kill $pid; wait $pid 2>/dev/null; return; }
  local t0 c0; t0=$(cpu $pid); c0=$(cs $pid)
  local out; out=$(taskset -c 15 "$D/burst_client" "$port" "$conns" 5000 200)
  echo "$name cpu-ticks $(( $(cpu $pid) - t0 )) cs $(( $(cs $pid) - c0 ))"
  echo "$out" | grep -E ' (request|first|last) '
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
}
if has burst; then
  if [ -x "$D/burst_client" ]; then
    for c in 4 8; do
      echo "== burst: 16 workers on 0-14, $c requests at once from CPU 15, 5,000 bursts 200 us apart"
      for _ in 1 2 3; do
        burst numa_rt 18083 $c env NUMA_RT_MAXPROCS=16 taskset -c 0-14 "$D/hello_http" 18083
        burst tokio 18081 $c taskset -c 0-14 "$D/hello_http_tokio" 18081 16
      done
    done
  else
    echo "== burst: skipped, no $D/burst_client (see the header)"
  fi
fi

#!/usr/bin/env bash
# Instructions per message of benches/channels.rs's workloads under callgrind,
# for each workload x channel family x runtime x worker count.
#
# Each cell runs the bench binary's CHANNELS_ONCE mode twice under callgrind:
# once at the workload's scale N and once at N/2 (same runtime, same tasks,
# half the messages), and reports
#
#     (Ir(N) - Ir(N/2)) / (messages(N) - messages(N/2))
#
# with Ir the whole process's instructions (every thread). The difference
# removes what does not grow with the messages: process and runtime start-up
# and shutdown, spawning the workload's tasks, criterion's code (not run in
# CHANNELS_ONCE mode). The poll-counting wrapper is off (CHANNELS_PROBE=0),
# as in criterion runs. valgrind runs one thread at a time, so these count
# the code paths a message takes, not contention; an idle worker's
# spinning shows up only as far as valgrind's thread switches let it run.
#
#   bash benches/channels_per_message.sh
#   WORKERS="1 2" FAMILIES="tokio" WORKLOADS="fan_in" RUNTIMES="numa_rt tokio" \
#       bash benches/channels_per_message.sh
#
# ATOMICS=1 also records every instruction's address (--dump-instr=yes) and
# reports, beside the instructions, the locked instructions per message
# (`lock`-prefixed read-modify-writes, `xchg` with memory, `mfence`; see
# benches/callgrind_atomics.py): what a message costs on a many-core Xeon
# is as much these as its instruction count.
#
# Environment: WORKERS (default "1 2"), FAMILIES ("tokio async"), WORKLOADS
# ("ping_pong pipeline fan_in req_resp"), RUNTIMES ("numa_rt tokio
# async_executor"), SCALE (N as a fraction of the bench's default scale,
# default 0.5: the N run has half the bench's messages, the N/2 run a
# quarter), BIN (the bench binary; default: built by cargo), OUT (where the
# N runs' callgrind files are kept for callgrind_annotate; default
# /tmp/channels-callgrind). Prints one line per cell and a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-"1 2"}
FAMILIES=${FAMILIES:-"tokio async"}
WORKLOADS=${WORKLOADS:-"ping_pong pipeline fan_in req_resp"}
RUNTIMES=${RUNTIMES:-"numa_rt tokio async_executor"}
SCALE=${SCALE:-0.5}
OUT=${OUT:-/tmp/channels-callgrind}
mkdir -p "$OUT"
if [ -z "${BIN:-}" ]; then
    BIN=$(cargo bench --bench channels --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*channels-[0-9a-f]*\)).*/\1/p' | tail -1)
    [ -x "$BIN" ] || { echo "could not build or find the channels bench binary" >&2; exit 1; }
fi
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install -y valgrind)" >&2; exit 1; }

default_n() {
    case $1 in
        ping_pong) echo 10000 ;;
        pipeline) echo 100000 ;;
        fan_in) echo 1000 ;;
        req_resp) echo 1000 ;;
    esac
}

# run WORKLOAD FAMILY RUNTIME WORKERS N FILE -> "IR MESSAGES"
run() {
    local f=$6
    CHANNELS_PROBE=0 CHANNELS_ONCE="$1,$2,$3,$4,$5" \
        valgrind --tool=callgrind ${ATOMICS:+--dump-instr=yes} --callgrind-out-file="$f" \
        "$BIN" >"$f.stdout" 2>"$f.log"
    local ir msgs
    ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$f" | head -1)
    msgs=$(sed -n 's/.* messages=\([0-9]*\) .*/\1/p' "$f.stdout")
    echo "$ir $msgs"
}

ROWS=()
for w in $WORKERS; do
    for wl in $WORKLOADS; do
        for fam in $FAMILIES; do
            line="| \`$wl\` | $fam | $w |"
            for rt in $RUNTIMES; do
                n=$(python3 -c "print(max(2, int($(default_n "$wl") * $SCALE)))")
                half=$((n / 2))
                base="$OUT/$wl.$fam.$rt.${w}p"
                read -r ir_full m_full < <(run "$wl" "$fam" "$rt" "$w" "$n" "$base.out")
                read -r ir_half m_half < <(run "$wl" "$fam" "$rt" "$w" "$half" "$base.half.out")
                per=$(((ir_full - ir_half) / (m_full - m_half)))
                echo "$wl $fam $rt workers=$w n=$n: Ir $ir_full - $ir_half over $((m_full - m_half)) messages = $per per message (file $base.out)"
                if [ -n "${ATOMICS:-}" ]; then
                    locked=$(python3 benches/callgrind_atomics.py "$base.out" "$base.half.out" \
                        "$((m_full - m_half))" --top 0 2>/dev/null | sed -n '1s/ .*//p')
                    echo "    locked instructions per message: $locked"
                    line="$line $(printf "%'d" "$per") / $locked |"
                else
                    line="$line $(printf "%'d" "$per") |"
                fi
            done
            ROWS+=("$line")
        done
    done
done
echo
header="| workload | channels | workers |"
sep="|---|---|---|"
for rt in $RUNTIMES; do header="$header $rt |"; sep="$sep---|"; done
echo "Instructions per message (callgrind, whole process, Ir(N) - Ir(N/2) over the messages between)${ATOMICS:+ / locked instructions per message}:"
echo
echo "$header"
echo "$sep"
printf '%s\n' "${ROWS[@]}"

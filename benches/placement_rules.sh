#!/usr/bin/env bash
# Every placement rule on and off, alone, beside tokio, in one run: the
# channel workloads of benches/channels.rs through its CHANNELS_ONCE mode,
# alternated round by round, medians. Placements are NUMA_RT_PLACEMENT
# values (executor/src/scheduler/placement/): `numa` (every rule), `go`
# (none), and `numa,-<rule>` for each rule.
#
#   cargo bench --no-run --bench channels
#   BIN=target/release/deps/channels-<hash> bash benches/placement_rules.sh
#
# Environment: BIN (required), WORKERS (default "2"), ROUNDS (default 7),
# CELLS (default below: workload,family,n,work), PLACEMENTS, TOKIO=0 to
# leave tokio out. Prints, per cell and placement: median ns per message,
# its ratio to `numa` and to tokio, and the median per-message counters that
# mean the same at any core count (steals, migrated polls, parks, unparks).
set -u
: "${BIN:?set BIN to the channels bench binary}"
WORKERS=${WORKERS:-2}
ROUNDS=${ROUNDS:-7}
CELLS=${CELLS:-"fan_in,async,1000,0 fan_in,async,100,3000 fan_in,async,200,1000 req_resp,tokio,1000,0 ping_pong,async,10000,0 pipeline,async,100000,0"}
PLACEMENTS=${PLACEMENTS:-"numa go numa,-roots numa,-keep numa,-batches numa,-hub_home"}
TOKIO=${TOKIO:-1}
out=$(mktemp)
for w in $WORKERS; do
  for cell in $CELLS; do
    IFS=, read -r wl fam n work <<<"$cell"
    for _ in $(seq "$ROUNDS"); do
      for pl in $PLACEMENTS; do
        line=$(NUMA_RT_PLACEMENT=$pl CHANNELS_WORK=$work,0 CHANNELS_ONCE=$wl,$fam,numa_rt,$w,$n,3 "$BIN" 2>&1)
        ns=$(sed -n 's/.*(\([0-9.]*\) ns\/message).*/\1/p' <<<"$line" | head -1)
        ctr=$(grep 'counters per message' <<<"$line" | tr ' ' '\n' |
          grep -E '^(steals|migrated_polls|parks|unparks|tasks_stolen)=' | tr '\n' ' ')
        echo "$wl/$fam/w$work p=$w $pl $ns $ctr" >>"$out"
      done
      if [ "$TOKIO" = 1 ]; then
        line=$(CHANNELS_PROBE=0 CHANNELS_WORK=$work,0 CHANNELS_ONCE=$wl,$fam,tokio,$w,$n,3 "$BIN" 2>&1)
        echo "$wl/$fam/w$work p=$w tokio $(sed -n 's/.*(\([0-9.]*\) ns\/message).*/\1/p' <<<"$line" | head -1)" >>"$out"
      fi
    done
  done
done
python3 - "$out" <<'EOF'
import sys, statistics as st, collections
rows = collections.defaultdict(list)
ctrs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4:
        continue
    key = (f[0], f[1], f[2])
    rows[key].append(float(f[3]))
    for kv in f[4:]:
        k, v = kv.split("=")
        ctrs[key][k].append(float(v))
cells = sorted({(a, b) for a, b, _ in rows}, key=lambda c: (c[1], c[0]))
for cell in cells:
    med = {pl: st.median(v) for (a, b, pl), v in rows.items() if (a, b) == cell}
    print(f"{cell[0]} {cell[1]}  (median ns/message over {len(rows[(cell[0], cell[1], 'numa')])} rounds)")
    base, tok = med.get("numa"), med.get("tokio")
    for pl, m in med.items():
        r1 = f"{m / base:5.2f}x numa" if base else ""
        r2 = f"{m / tok:5.2f}x tokio" if tok else ""
        c = ctrs.get((cell[0], cell[1], pl), {})
        cs = " ".join(f"{k}={st.median(v):.4f}" for k, v in sorted(c.items()))
        print(f"  {pl:18} {m:9.1f}  {r1}  {r2}  {cs}")
EOF
rm -f "$out"

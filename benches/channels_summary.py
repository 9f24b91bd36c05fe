#!/usr/bin/env python3
"""Markdown table of benches/channels.rs's criterion results.

One row per workload x channel family x worker count (criterion groups
`channels/<workload>/<family>/<workers>p`): the median time of one iteration
for numa_rt, tokio and async_executor, the same per message (one value
through one channel), and the ratios numa_rt/tokio and
numa_rt/async_executor (below 1: numa_rt is faster).

Usage:
    python3 benches/channels_summary.py [criterion dir ...]
    python3 benches/channels_summary.py --no-per-message

With several criterion directories (copies of target/criterion kept after
each of several runs), each cell is the median of the runs' medians and the
ratio columns also give the range of the per-run ratios: on a shared
machine one run's ratio can be off by 30% or more.

Reads criterion's files with benches/summarize.py's loader (the criterion
directory defaults the same way: $CARGO_TARGET_DIR/criterion, else
target/criterion). Criterion keeps earlier runs' results, so a row shows
whatever its group's last run measured: the header gives the time span.

Standard library only.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the benches
sys.path.insert(0, str(Path(__file__).resolve().parent))
import summarize  # noqa: E402

WORKLOADS = ["ping_pong", "pipeline", "fan_in", "req_resp"]
FAMILIES = ["tokio", "async"]
# Messages (values through one channel) per iteration: keep in step with
# Workload::messages in benches/channels.rs at the default scale.
MESSAGES = {
    "ping_pong": 2 * 10_000,
    "pipeline": 7 * 100_000,
    "fan_in": 64 * 1_000,
    "req_resp": 16 * 2 * 1_000,
}


def parse(group):
    """`channels/<workload>/<family>/<workers>p` -> (workload, family, workers)."""
    parts = group.split("/")
    if len(parts) != 4 or parts[0] != "channels" or not parts[3].endswith("p"):
        return None
    try:
        workers = int(parts[3][:-1])
    except ValueError:
        return None
    return parts[1], parts[2], workers


def order(key):
    workload, family, workers = key
    w = WORKLOADS.index(workload) if workload in WORKLOADS else len(WORKLOADS)
    f = FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)
    return (workers, w, f, workload, family)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("criterion_dirs", nargs="*", type=Path, default=[summarize.default_criterion_dir()])
    ap.add_argument("--no-per-message", action="store_true", help="leave out the ns/message columns")
    args = ap.parse_args()

    runs = []  # one {key: {runtime: (median, mtime)}} per criterion dir
    for d in args.criterion_dirs:
        if not d.is_dir():
            sys.exit(f"no criterion results in {d}: run `cargo bench --bench channels` first")
        groups = {}
        for g, fs in summarize.load(d).items():
            key = parse(g)
            if key:
                groups[key] = fs
        runs.append(groups)
    if not any(runs):
        sys.exit("no channels/ results: run `cargo bench --bench channels` first")
    groups = {}
    for run in runs:
        for key, fs in run.items():
            for rt, value in fs.items():
                groups.setdefault(key, {}).setdefault(rt, []).append(value)

    rts = summarize.RUNTIMES
    header = ["workload", "channels", "workers", *rts]
    if not args.no_per_message:
        header += [f"{rt} ns/msg" for rt in rts]
    header += ["numa_rt/tokio", "numa_rt/async_executor"]
    rows = []
    for key in sorted(groups, key=order):
        workload, family, workers = key
        fs = groups[key]
        med = {rt: statistics.median(m for m, _ in fs[rt]) if rt in fs else None for rt in rts}
        row = [f"`{workload}`", family, str(workers)]
        row += [summarize.fmt_time(med[rt]) if med[rt] is not None else "–" for rt in rts]
        if not args.no_per_message:
            msgs = MESSAGES.get(workload)
            row += [f"{med[rt] / msgs:.0f}" if med[rt] is not None and msgs else "–" for rt in rts]
        for other in ("tokio", "async_executor"):
            cell = summarize.fmt_ratio(med["numa_rt"], med[other])
            per_run = [
                run[key]["numa_rt"][0] / run[key][other][0]
                for run in runs
                if key in run and "numa_rt" in run[key] and other in run[key]
            ]
            if len(per_run) > 1:
                cell += f" ({min(per_run):.2f}–{max(per_run):.2f})"
            row.append(cell)
        rows.append(row)

    mtimes = {f"{k}/{rt}": [(0, m) for _, m in v] for k, fs in groups.items() for rt, v in fs.items()}
    out = summarize.header_lines({g: dict(enumerate(v)) for g, v in mtimes.items()})
    if len(runs) > 1:
        out.append(f"Medians of {len(runs)} runs' medians; in brackets the per-run ratios' range.")
    out.append("Ratios below 1: numa_rt is faster. A message is one value through one channel.")
    out.append("")
    out.append(summarize.table(header, rows))
    print("\n".join(out))


if __name__ == "__main__":
    main()

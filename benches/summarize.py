#!/usr/bin/env python3
"""Markdown tables of criterion results: the medians, and numa_rt's ratios.

Reads every `<criterion dir>/**/new/benchmark.json` (which names the group
and function) with the `estimates.json` beside it, and prints, per group of
benches/rt_multi_threaded.rs and benches/numa_mode.rs (all groups with
--all):

- groups with a `numa_rt` function (benches/rt_multi_threaded.rs): the
  median of numa_rt, tokio and async_executor, and the ratios
  numa_rt/tokio and numa_rt/async_executor -- below 1 means numa_rt is
  faster;
- other groups (benches/numa_mode.rs): the median of each function and its
  ratio to the group's `flat` function (or else its first function) --
  above 1 means NUMA mode costs something.

Usage:
    python3 benches/summarize.py                # one table per group
    python3 benches/summarize.py --compact      # one row per group, README style
    python3 benches/summarize.py --group 'numa_mode/'   # groups matching a regex
    python3 benches/summarize.py --all          # also other benches' groups
    python3 benches/summarize.py path/to/target/criterion

The criterion directory defaults to $CARGO_TARGET_DIR/criterion, else
target/criterion next to this script's workspace. Criterion keeps results of
earlier runs, so a group shows whatever its last run measured: the header
gives the time span of the results read.

Standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import sys
from pathlib import Path

RUNTIMES = ["numa_rt", "tokio", "async_executor"]
# Workload order of the benches, for a stable, readable table.
WORKLOADS = [
    "spawn_many_local",
    "spawn_many_remote_idle",
    "spawn_many_remote_busy1",
    "yield_many",
    "ping_pong",
    "chained_spawn",
    "node_local_sum",
]


def default_criterion_dir():
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        return Path(target) / "criterion"
    return Path(__file__).resolve().parent.parent / "target" / "criterion"


def load(criterion_dir):
    """{group: {function: (median_ns, mtime)}}

    A benchmark id `group/<case>/<runtime>` (criterion's
    `BenchmarkId::new(case, runtime)`) becomes the row `group/<case>` with
    the function `<runtime>`, so parameterized groups compare runtimes too.
    """
    groups = {}
    for bench_json in criterion_dir.glob("**/new/benchmark.json"):
        estimates = bench_json.with_name("estimates.json")
        if not estimates.is_file():
            continue
        try:
            bench = json.loads(bench_json.read_text())
            median = json.loads(estimates.read_text())["median"]["point_estimate"]
        except (OSError, ValueError, KeyError) as e:
            print(f"skipping {bench_json.parent}: {e}", file=sys.stderr)
            continue
        group = bench.get("group_id")
        function = "/".join(x for x in (bench.get("function_id"), bench.get("value_str")) if x) or group
        case, _, last = function.rpartition("/")
        if case and last in RUNTIMES:
            group, function = f"{group}/{case}", last
        groups.setdefault(group, {})[function] = (median, estimates.stat().st_mtime)
    return groups


def is_ours(group):
    """A group of benches/rt_multi_threaded.rs or benches/numa_mode.rs."""
    parts = group.split("/")
    if parts[0] == "numa_mode":
        parts = parts[1:]
    return bool(parts) and parts[0] in WORKLOADS


def group_order(name):
    """Workload order, then the /1proc variants, then anything else."""
    base = name.split("/")
    workload = next((w for w in WORKLOADS if w in base), None)
    rank = WORKLOADS.index(workload) if workload else len(WORKLOADS)
    return (name.startswith("numa_mode/"), "/1proc" in name, rank, name)


def fmt_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}" if ns / scale < 1000 else f"{ns / scale:.0f} {unit}"
    return f"{ns:.3g} ns"


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    r = a / b
    if r < 0.1:
        return f"{r:.2g}"
    return f"{r:.2f}" if r < 10 else f"{r:.0f}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def runtime_row(functions):
    med = {rt: functions[rt][0] if rt in functions else None for rt in RUNTIMES}
    cells = [fmt_time(med[rt]) if med[rt] is not None else "–" for rt in RUNTIMES]
    cells.append(fmt_ratio(med["numa_rt"], med["tokio"]))
    cells.append(fmt_ratio(med["numa_rt"], med["async_executor"]))
    return cells


RUNTIME_HEADER = [*RUNTIMES, "numa_rt/tokio", "numa_rt/async_executor"]


def baseline_of(functions):
    return "flat" if "flat" in functions else next(iter(sorted(functions)))


def other_functions(functions):
    """The baseline first, then the rest in name order."""
    base = baseline_of(functions)
    return [base] + sorted(f for f in functions if f != base)


def header_lines(groups):
    mtimes = [m for fs in groups.values() for (_, m) in fs.values()]
    span = ""
    if mtimes:
        first = datetime.datetime.fromtimestamp(min(mtimes)).strftime("%Y-%m-%d %H:%M")
        last = datetime.datetime.fromtimestamp(max(mtimes)).strftime("%Y-%m-%d %H:%M")
        span = first if first == last else f"{first} – {last}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return [
        f"Criterion medians, measured {span} on {cpu}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}.",
        "",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("criterion_dir", nargs="?", type=Path, default=default_criterion_dir())
    ap.add_argument("--group", help="only groups whose name matches this regex")
    ap.add_argument(
        "--all",
        action="store_true",
        help="every group criterion has results for, not only those of rt_multi_threaded and numa_mode",
    )
    ap.add_argument("--compact", action="store_true", help="one table per kind of group, one row per group")
    args = ap.parse_args()

    if not args.criterion_dir.is_dir():
        sys.exit(f"no criterion results in {args.criterion_dir}: run `cargo bench` first")
    groups = load(args.criterion_dir)
    if not args.all:
        groups = {g: fs for g, fs in groups.items() if is_ours(g)}
    if args.group:
        pattern = re.compile(args.group)
        groups = {g: fs for g, fs in groups.items() if pattern.search(g)}
    if not groups:
        sys.exit("no matching criterion results")

    compared = sorted((g for g in groups if "numa_rt" in groups[g]), key=group_order)
    others = sorted((g for g in groups if "numa_rt" not in groups[g]), key=group_order)

    out = header_lines(groups)
    if compared:
        out.append("Ratios below 1: numa_rt is faster.")
        out.append("")
    if args.compact:
        if compared:
            rows = [[f"`{g}`", *runtime_row(groups[g])] for g in compared]
            out += [table(["workload", *RUNTIME_HEADER], rows), ""]
        # Other groups: one table per set of functions (e.g. flat/split2).
        by_functions = {}
        for g in others:
            by_functions.setdefault(tuple(other_functions(groups[g])), []).append(g)
        for functions, names in by_functions.items():
            base = functions[0]
            rows = []
            for g in names:
                fs = groups[g]
                rows.append(
                    [f"`{g}`"]
                    + [fmt_time(fs[f][0]) for f in functions]
                    + [fmt_ratio(fs[f][0], fs[base][0]) for f in functions[1:]]
                )
            header = ["group", *functions, *(f"{f}/{base}" for f in functions[1:])]
            out += [table(header, rows), ""]
    else:
        for g in compared:
            out += [f"### {g}", "", table(RUNTIME_HEADER, [runtime_row(groups[g])]), ""]
        for g in others:
            fs = groups[g]
            base = baseline_of(fs)
            rows = [[f, fmt_time(fs[f][0]), fmt_ratio(fs[f][0], fs[base][0])] for f in other_functions(fs)]
            out += [f"### {g}", "", table(["function", "median", f"ratio to {base}"], rows), ""]
    print("\n".join(out).rstrip())


if __name__ == "__main__":
    main()

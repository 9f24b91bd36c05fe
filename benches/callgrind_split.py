#!/usr/bin/env python3
"""Instructions per message by function and by component, from two callgrind
files of benches/channels_per_message.sh (the N run and the N/2 run).

Each function's self Ir in the N run less its Ir in the N/2 run, over the
messages between the two runs: start-up and task spawns drop out, as in the
script's totals. Components group functions by source file: the channel
code (tokio::sync, async-channel and its event-listener; concurrent-queue,
which async-channel and async-executor share, on its own),
each runtime's scheduler (numa_rt's executor and reactor, tokio's runtime,
async-executor), async-task (the task cell under numa_rt and
async-executor), the workload itself (benches/), and std/libc.

Usage:
    python3 benches/callgrind_split.py FULL.out HALF.out MESSAGES [--top N]
    python3 benches/callgrind_split.py /tmp/channels-callgrind/fan_in.tokio.numa_rt.1p{,.half}.out 16000

MESSAGES is the difference in messages between the two runs (the script
prints it). Needs callgrind_annotate. Standard library only.
"""

import argparse
import re
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*?)(?:\s+\[[^\]]*\])?$")

# (pattern on a source file path or a function's path, component), first
# match wins. A function's line is `file:function`; code that std inlined
# (atomics, pointers, cells: the file is std's) goes by the function's name.
COMPONENTS = [
    (r"tokio-[\d.]+/src/sync/|tokio::sync::", "channels: tokio::sync"),
    (r"async-channel|event-listener|async_channel::|event_listener", "channels: async-channel"),
    # Both async-executor's run queues and async-channel's buffer.
    (r"concurrent-queue|concurrent_queue::", "concurrent-queue (async-executor, async-channel)"),
    (r"futures-channel|futures_channel::", "workload: futures oneshot (results)"),
    (r"tokio-[\d.]+/|tokio::", "scheduler: tokio"),
    (r"async-executor|async_executor::", "scheduler: async-executor"),
    (r"async-task|async_task::", "task cell: async-task"),
    (r"(^|/)executor/src/|(^|/)reactor/src/|numa_rt_executor::|numa_rt_reactor::", "scheduler: numa_rt"),
    (r"(^|/)benches/|^channels::|<channels::", "workload"),
    (r"futures-lite|parking-|futures_lite::|parking::", "block_on / yield (futures-lite)"),
]


def component(line):
    file, _, function = line.partition(":")
    std = "/rustc/" in file or "library/" in file
    for pattern, comp in COMPONENTS:
        if re.search(pattern, function if std else file):
            return comp
    if std:
        return "std"
    return "other (libc, ld.so, unknown)"


def functions(path):
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    fns = defaultdict(int)
    for line in out.splitlines():
        m = LINE.match(line)
        if m and "PROGRAM TOTALS" not in line:
            fns[m.group(2)] += int(m.group(1).replace(",", ""))
    return fns


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("full")
    ap.add_argument("half")
    ap.add_argument("messages", type=int)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    if args.messages <= 0:
        sys.exit("MESSAGES must be positive")
    full, half = functions(args.full), functions(args.half)
    diff = {f: (full.get(f, 0) - half.get(f, 0)) / args.messages for f in set(full) | set(half)}
    comps = defaultdict(float)
    for f, d in diff.items():
        comps[component(f)] += d
    total = sum(diff.values())
    print(f"{total:.0f} instructions per message")
    print("by component:")
    for c, d in sorted(comps.items(), key=lambda x: -x[1]):
        if abs(d) >= 0.5:
            print(f"  {d:8.1f}  {c}")
    print(f"top {args.top} functions (self):")
    for f, d in sorted(diff.items(), key=lambda x: -x[1])[: args.top]:
        short = re.sub(r"^.*?(src/|benches/)", r"\1", f, count=1)
        print(f"  {d:8.1f}  {short[:150]}")


if __name__ == "__main__":
    main()

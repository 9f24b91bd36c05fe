#!/usr/bin/env python3
"""Instructions per spawned task by part of a spawn's life, from two callgrind
files of benches/spawn_per_task.sh (the 2k-iteration run and the k-iteration
run), for numa_rt, tokio or the Go twin.

Each function's self Ir in the long run less its Ir in the short run, over
the tasks between the two runs (start-up, shutdown and the warm-up
iteration drop out), summed into the parts of issue 39: allocation
(malloc), task set-up (the task cell, its header and the runtime's task
registry), queue push, waking an idle P (and the woken side's park and
unpark), the scheduler's loop that finds the task, the poll (the task's
own body and the run call around it), completion and the JoinHandle, the
free, and for Go its garbage collector; numa_rt's task registry (insert at
spawn, remove at completion) and tokio's OwnedTasks (bind, remove) are a
part of their own. A function goes to the first part
whose pattern matches its name (or, for code std inlined, its file).
Self costs, so the parts add up to the total; `--inclusive NAME...` also
prints inclusive Ir per task of functions whose name contains NAME.

Usage:
    python3 benches/callgrind_spawn_split.py LONG.out SHORT.out TASKS [--top N] [--inclusive NAME ...]

Needs callgrind_annotate. Standard library only.
"""

import argparse
import re
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*?)(?:\s+\[[^\]]*\])?$")

# (part, pattern on the function's name), first match wins.
PARTS = [
    ("free", r"(^|[^a-z_])(free|cfree|__libc_free|__rust_dealloc|__rdl_dealloc)$|"
             r"_int_free|tcache_put|unlink_chunk|malloc_consolidate|runtime\.(gfput|stackfree|stackcache)"),
    ("allocation", r"malloc|memalign|__rust_alloc|__rdl_alloc|tcache_get|sysmalloc|alloc::alloc::|"
                   r"runtime\.(malg|gfget|stackalloc|mallocgc|newobject|memclrNoHeapPointers|nextFreeFast|"
                   r"mcache|mcentral|mheap|allocSpan|makechan|heapBitsSetType|publicationBarrier)"),
    ("GC (Go)", r"runtime\.(gc|scanobject|scanblock|scanstack|markroot|greyobject|findObject|"
                r"heapBits|sweep|bgsweep|bgscavenge|scavenge|markBits|wbBuf|gcDrain|gcWork|"
                r"spanOf|pageIndexOf|mspan|[a-zA-Z.]*[mM]ark|stopTheWorld|startTheWorld|forEachP|"
                r"gentraceback|pcvalue|readvarint|step|adjustframe|getStackMap|funcdata|pcdatavalue)"),
    ("task list (numa_rt's Registry, tokio's OwnedTasks)",
     r"task::registry::|RegistryRef|OwnedTasks|ShardedList|sharded_list|linked_list::"),
    ("wake an idle P / park", r"wakep|startm|notewakeup|futex|wake_idle|idle::|Idle|unpark|park|"
                              r"Parker|notesleep|stopm|mPark|handoffp|pidleget|pidleput|"
                              r"syscall|semawakeup|semasleep|sched_yield|spinning|Sleeper|Notify|"
                              r"condvar|Condvar|nanosleep|clock_gettime|epoll|osyield|usleep|lock_contended"),
    ("queue push", r"runqput|globrunqput|inject::.*push|Inject.*push|push_back|push_overflow|"
                   r"enqueue|schedule_task|schedule_elsewhere|Shared::schedule|"
                   r"queue::.*push|Local.*push|push_local"),
    ("poll (run + the task's body)", r"RawTask.*::run|Runnable.*::run|Harness<F> as .*Future>::poll|"
                                     r"clone_waker|coop::|take_accepted|clear_accepted|main\.|"
                                     r"common::|spawn_cost::|fetch_sub|mpsc|sync_channel|gogo|"
                                     r"runtime\.execute|task::core::Core|poll_future|Harness.*poll"),
    ("completion + JoinHandle", r"JoinHandle|join_handle|detach|drop_ref|drop_waker|drop_future|"
                                r"drop_live_future|set_detached|runtime\.(goexit|gdestroy|dropg)|"
                                r"Arc<.*>::drop_slow|complete|Completion|set_output|"
                                r"runtime\.(chansend|closechan|chanrecv|recv|send|goready|ready|"
                                r"selectgo|gopark)"),
    ("task set-up (spawn entry, header)", r"async_task::.*(allocate|spawn|Builder|Runnable.*new|from_raw)|"
                    r"Handle::spawn|Shared::spawn|place_new|spawn::spawn|current_handle|spawn_inner|"
                    r"TaskMeta|task::|tokio::runtime::task::(new|raw::RawTask::new|core::Cell)|bind|"
                    r"OwnedTasks|runtime\.(newproc|newproc1|gostartcall|gostartcallfn|"
                    r"memmove|funcPC|getcallerpc|findfunc|findnull|funcname|isSystemGoroutine|"
                    r"saveAncestors)|indexbytebody|IndexByteString"),
    ("scheduler loop (find the task)", r"runtime\.(schedule|findRunnable|findrunnable|runqget|runqsteal|"
                                       r"runqgrab|globrunqget|stealWork|checkTimers|mcall|"
                                       r"park_m|gosched|goschedImpl|resetspinning|nanotime|runtimer|"
                                       r"systemstack|casgstatus)|gosave_systemstack_switch|"
                                       r"worker::|machine::|processor::|next_task|find_|steal|"
                                       r"queue::|inject::|scheduler::|Steal|pop|extend_desugared|Drain"),
]


def part(fn):
    for name, pattern in PARTS:
        if re.search(pattern, fn):
            return name
    return "other"


def functions(path, inclusive):
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}",
         "--auto=no", path],
        check=True, capture_output=True, text=True,
    ).stdout
    fns = defaultdict(int)
    for line in out.splitlines():
        m = LINE.match(line)
        if m and "PROGRAM TOTALS" not in line and ":" in m.group(2):
            file, _, fn = m.group(2).partition(":")
            fns[fn] += int(m.group(1).replace(",", ""))
    return fns


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("long")
    ap.add_argument("short")
    ap.add_argument("tasks", type=int)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--inclusive", nargs="*", default=[])
    args = ap.parse_args()
    if args.tasks <= 0:
        sys.exit("TASKS must be positive")
    full, half = functions(args.long, False), functions(args.short, False)
    diff = {f: (full.get(f, 0) - half.get(f, 0)) / args.tasks for f in set(full) | set(half)}
    parts = defaultdict(float)
    for f, d in diff.items():
        parts[part(f)] += d
    total = sum(diff.values())
    print(f"{total:.0f} instructions per task (self costs, {args.tasks} tasks)")
    for name, _ in PARTS + [("other", "")]:
        print(f"  {parts.get(name, 0.0):8.1f}  {name}")
    if args.top:
        print(f"top {args.top} functions (self) and their part:")
    for f, d in sorted(diff.items(), key=lambda x: -x[1])[: args.top]:
        print(f"  {d:8.1f}  [{part(f)}] {f[:140]}")
    if args.inclusive:
        fi, hi = functions(args.long, True), functions(args.short, True)
        print("inclusive per task:")
        for name in args.inclusive:
            hits = sorted(
                ((fi.get(f, 0) - hi.get(f, 0)) / args.tasks, f) for f in set(fi) | set(hi) if name in f
            )[::-1][:3]
            for d, f in hits:
                print(f"  {d:8.1f}  {f[:140]}")


if __name__ == "__main__":
    main()

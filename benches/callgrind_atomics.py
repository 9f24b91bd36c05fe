#!/usr/bin/env python3
"""Atomic read-modify-writes and fences executed per message, from two
callgrind files recorded with --dump-instr=yes (the N run and the N/2 run of
benches/channels_per_message.sh with CG_EXTRA=--dump-instr=yes).

Instructions per message say how much code a message runs; on a many-core
Xeon what a message costs is as much its locked instructions (`lock`-prefixed
read-modify-writes, `xchg` with memory, `mfence`): each drains the store
buffer, tens of cycles even when the line is in the core's own cache, and
far more when another core wrote it last. valgrind cannot count them as
events, but with --dump-instr=yes callgrind gives every executed
instruction's address and count: this script disassembles each object
(objdump), picks out the locked instructions, and sums their counts, as
(count(N) - count(N/2)) / MESSAGES like the script's totals. The load
address of each object is found by matching callgrind's function names to
the object's symbols (the most common difference of the two addresses).

Usage:
    python3 benches/callgrind_atomics.py FULL.out HALF.out MESSAGES [--top N]
    python3 benches/callgrind_atomics.py SERVER.out - REQUESTS   # no difference
                                                                 # (benches/callgrind_per_request.sh)

Prints the total per message, by object, and the functions with the most
(each function's locked instructions, with the instruction text). Needs
objdump and nm (binutils). Standard library only.
"""

import argparse
import collections
import re
import subprocess
import sys

POS = re.compile(r"^(0x[0-9a-fA-F]+|[+-](0x[0-9a-fA-F]+|\d+)|\*)(\s|$)")
NAME = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")


def parse(path):
    """{(object, address): count} of self cost, and {object: {fn: lowest address}}."""
    costs = collections.Counter()
    fn_addr = collections.defaultdict(dict)
    names = {"ob": {}, "fn": {}, "fl": {}}
    ob = fn = None
    addr = 0
    skip_next = False
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line:
                continue
            if POS.match(line):
                parts = line.split()
                p = parts[0]
                if p.startswith("0x"):
                    addr = int(p, 16)
                elif p[0] == "+":
                    addr += int(p[1:], 0)
                elif p[0] == "-":
                    addr -= int(p[1:], 0)
                # '*': same address
                if skip_next:
                    skip_next = False
                    continue
                if len(parts) >= 3 and ob is not None:
                    costs[(ob, addr)] += int(parts[2])
                    if fn is not None:
                        fn_addr[ob][fn] = min(fn_addr[ob].get(fn, addr), addr)
                continue
            key, _, val = line.partition("=")
            if key in ("ob", "fn", "fl", "fi", "fe", "cob", "cfn", "cfi", "cfl"):
                kind = {"cob": "ob", "cfn": "fn", "cfi": "fl", "cfl": "fl", "fi": "fl", "fe": "fl"}.get(key, key)
                m = NAME.match(val)
                if m:
                    if m.group(2) is not None:
                        names[kind][m.group(1)] = m.group(2)
                    name = names[kind].get(m.group(1), val)
                else:
                    name = val
                if key == "ob":
                    ob = name
                elif key == "fn":
                    fn = name
            elif key == "calls":
                skip_next = True
    return costs, fn_addr


LOCKED = re.compile(r"\block\b|\bxchg\w*\s+[^,]*\(|\bxchg\w*\s+%\w+,.*\(|\bmfence\b")


def locked_instructions(obj):
    """{file address: (text, function)} of the object's locked instructions."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", obj],
                         capture_output=True, text=True, check=True).stdout
    res = {}
    func = "?"
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if m:
            func = m.group(2)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", line)
        if m and LOCKED.search(m.group(2)):
            res[int(m.group(1), 16)] = (m.group(2).strip(), func)
    return res


def symbols(obj):
    out = subprocess.run(["nm", "-C", "--defined-only", obj], capture_output=True, text=True).stdout
    out += subprocess.run(["nm", "-C", "-D", "--defined-only", obj], capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1].lower() in "tw":
            syms.setdefault(parts[2], int(parts[0], 16))
    return syms


def base_of(obj, fns):
    syms = symbols(obj)
    diffs = collections.Counter()
    for name, addr in fns.items():
        # callgrind appends "'2" for recursion levels.
        a = syms.get(name.split("'")[0])
        if a is not None:
            diffs[addr - a] += 1
    if not diffs:
        return None
    return diffs.most_common(1)[0][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("full")
    ap.add_argument("half")
    ap.add_argument("messages", type=float)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    full, fns = parse(a.full)
    half, fns_half = (collections.Counter(), {}) if a.half == "-" else parse(a.half)
    for ob, d in fns_half.items():
        for k, v in d.items():
            fns[ob].setdefault(k, v)
    by_obj = collections.Counter()
    by_site = collections.Counter()
    site_text = {}
    for ob in sorted({o for o, _ in full} | {o for o, _ in half}):
        if ob in ("???",) or not ob.startswith("/"):
            continue
        try:
            locked = locked_instructions(ob)
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
        if not locked:
            continue
        base = base_of(ob, fns.get(ob, {}))
        if base is None:
            print(f"(no symbols matched in {ob}: skipped)", file=sys.stderr)
            continue
        for faddr, (text, func) in locked.items():
            n = full.get((ob, faddr + base), 0) - half.get((ob, faddr + base), 0)
            if n:
                by_obj[ob] += n
                by_site[(ob, faddr)] += n
                site_text[(ob, faddr)] = (text, func)
    total = sum(by_obj.values())
    print(f"{total / a.messages:.2f} locked instructions per message")
    print("by object:")
    for ob, n in by_obj.most_common():
        print(f"  {n / a.messages:7.2f}  {ob}")
    by_fn = collections.Counter()
    for site, n in by_site.items():
        by_fn[site_text[site][1]] += n
    print(f"top {a.top} functions:")
    for func, n in by_fn.most_common(a.top):
        print(f"  {n / a.messages:7.2f}  {func[:150]}")
        for site, m in sorted(by_site.items(), key=lambda x: -x[1]):
            if site_text[site][1] == func and m / a.messages >= 0.05:
                print(f"             {m / a.messages:6.2f}  {site[1]:x}: {site_text[site][0]}")


if __name__ == "__main__":
    main()

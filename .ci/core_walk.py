#!/usr/bin/env python3
"""Follows `core` through `Worker::run_core` and counts how often the walk
returns to a file it left (issue 46's "returns to a file it left ≤ 10").

Not a CI check: a measuring stick. The walk starts at `Worker::run_core`
(executor/src/scheduler/worker/mod.rs) and, in source order, enters every
call that carries the core: its receiver is `core` or one of the core's
fields, or an argument names `core` (`core`, `&mut core`,
`core.policy_state`, ...; not a number read off it, `core.index`). Each function is entered once (its first call);
later calls of it are not walked again. A call is resolved by the
receiver's type where the receiver names one (`self` in the function's
own impl, `core` -> Core, `shared`/`self.shared` -> Shared, `policy` ->
Policy, `seat` -> Seat, `p`/`procs[..]` -> Processor), else by a name that
only one function of the crate has; calls it cannot resolve are skipped
(listed with -v). The walk writes the file of every function it enters
and, after each call, the caller's file again; the figure is the number of
times that sequence moves into a file it had already been in and left
(every return from a call into another file is one), and, of those, the
moves made by a call rather than a return.

    python3 .ci/core_walk.py [-v] [--value]
    CORE_WALK_SRC=<another tree>/executor/src python3 .ci/core_walk.py
"""

import os
import re
import sys

ROOT = os.environ.get("CORE_WALK_SRC") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "executor", "src"
)
VERBOSE = "-v" in sys.argv
# --value: follow the `Core` value only (a call on `core` itself, or one
# that takes `core` whole as an argument), not calls on its fields
# (`core.queue.pop()`, `policy.owner_next(core.policy_mut(), ..)`).
VALUE = "--value" in sys.argv

RECEIVER_TYPES = {
    "core": "Core",
    "shared": "Shared",
    "policy": "Policy",
    "seat": "Seat",
    "p": "Processor",
    "procs": "Processor",
}


def source_files():
    for d, _, fs in os.walk(ROOT):
        for f in fs:
            if f.endswith(".rs") and f != "tests.rs":
                yield os.path.join(d, f)


def strip_tests(text):
    m = re.search(r"^#\[cfg\(test\)\]\s*\nmod tests\b", text, re.M)
    return text[: m.start()] if m else text


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def block_end(text, open_at):
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


FNS = {}  # (type or None, name) -> (file, body)
BY_NAME = {}  # name -> [(type, file)]


def parse():
    for path in source_files():
        rel = os.path.relpath(path, ROOT)
        text = strip_comments(strip_tests(open(path).read()))
        impls = []
        for m in re.finditer(r"^impl\b[^{;]*?(?:for\s+)?([A-Z]\w*)(?:<[^{]*>)?\s*(?:where[^{]*)?\{", text, re.M):
            impls.append((m.start(), block_end(text, m.end() - 1), m.group(1)))
        for m in re.finditer(r"\bfn\s+(\w+)\s*(?:<[^(]*>)?\s*\(", text):
            name = m.group(1)
            brace = text.find("{", m.end())
            semi = text.find(";", m.end())
            if brace < 0 or (0 <= semi < brace):
                continue
            ty = None
            for s, e, t in impls:
                if s < m.start() < e:
                    ty = t
            body = text[brace : block_end(text, brace) + 1]
            FNS.setdefault((ty, name), (rel, body))
            BY_NAME.setdefault(name, []).append((ty, rel))


CALL = re.compile(r"((?:[A-Za-z_][\w]*(?:\[[^\]]*\])?\s*\.\s*)*)([A-Za-z_]\w*)\s*(?:::<[^>]*>)?\s*\(")


def args_of(body, open_paren):
    depth = 0
    for i in range(open_paren, len(body)):
        if body[i] == "(":
            depth += 1
        elif body[i] == ")":
            depth -= 1
            if depth == 0:
                return body[open_paren + 1 : i]
    return ""


def resolve(recv, name, own_type):
    parts = [re.sub(r"\[.*", "", x).strip() for x in recv.split(".") if x.strip()]
    ty = None
    if parts:
        last = parts[-1]
        if last == "self":
            ty = own_type
        else:
            ty = RECEIVER_TYPES.get(last)
    if ty and (ty, name) in FNS:
        return (ty, name)
    cands = BY_NAME.get(name, [])
    if len(cands) == 1:
        return (cands[0][0], name)
    return None


# Numbers read off the core: passing one is not passing the core.
SCALARS = ("index", "node", "tick", "clock_ms", "busy_polls", "last_event_tick")


def carries_core(recv, args, own_type):
    r = recv.replace(" ", "")
    if VALUE:
        if r == "core." or (r == "self." and own_type == "Core"):
            return True
        return re.search(r"(^|[(,&*\s])(mut\s+)?core\s*(,|$)", args.strip()) is not None
    if r.startswith("core.") and r.split(".")[1] not in SCALARS:
        return True
    for m in re.finditer(r"\bcore\b(\s*\.\s*(\w+))?", args):
        if m.group(2) not in SCALARS:
            return True
    return False


def main():
    parse()
    start = ("Worker", "run_core")
    seq = []
    calls_back = [0]  # calls into another file the walk had been in
    been = set()
    seen = set()
    skipped = []

    def walk(key, depth):
        seen.add(key)
        file, body = FNS[key]
        if seq and seq[-1] != file and file in been:
            calls_back[0] += 1
        been.add(file)
        seq.append(file)
        for m in CALL.finditer(body):
            recv, name = m.group(1), m.group(2)
            if name in ("if", "while", "match", "for", "Some", "Ok", "Err", "loop", "return"):
                continue
            args = args_of(body, m.end() - 1)
            if not carries_core(recv, args, key[0]):
                continue
            callee = resolve(recv, name, key[0])
            if callee is None:
                skipped.append(f"{file}: {recv}{name}(...)")
                continue
            if callee in seen:
                continue
            if VERBOSE:
                print("  " * depth + f"{callee[0] or ''}::{callee[1]}  [{FNS[callee][0]}]")
            walk(callee, depth + 1)
            seq.append(file)

    walk(start, 1)
    # Collapse repeats, then count moves into a file already left.
    flat = [f for i, f in enumerate(seq) if i == 0 or seq[i - 1] != f]
    left, returns = set(), 0
    for prev, cur in zip(flat, flat[1:]):
        left.add(prev)
        if cur in left:
            returns += 1
    files = sorted(set(flat))
    if VERBOSE:
        print("unresolved:", *sorted(set(skipped)), sep="\n  ")
        print("sequence:", " -> ".join(flat))
    print(
        f"functions entered: {len(seen)}; files: {len(files)}; "
        f"returns to a file it left: {returns} (of them by a call, not a return: {calls_back[0]})"
    )
    for f in files:
        print("  ", f)


main()

#!/usr/bin/env python3
"""One axum app served by numa_rt::serve and by axum::serve on tokio, loaded
by wrk side by side (webstack/examples/axum_bench.rs); with GRPC=1, tonic's
greeter served by numa_rt::serve and by tonic's Server on tokio, loaded by
webstack/examples/grpc_bench.rs (tonic's client on one tokio thread, CONNS
concurrent calls over 4 HTTP/2 connections).

    python3 benches/axum_wrk.py                     # 2 workers, -c 16 and 64
    ROUNDS=7 CONNS=16,64,256 DURATION=10 WORKERS=2 python3 benches/axum_wrk.py
    GRPC=1 python3 benches/axum_wrk.py
    # 16 cores, the server the bottleneck (as the many-core bundle's busy4):
    PIN_SERVER=0-3 PIN_LOAD=4-15 WORKERS=4 WRK_THREADS=12 CONNS=256 python3 benches/axum_wrk.py

The runs alternate (numa_rt, tokio, numa_rt, tokio, ...) so that drift in
the machine's speed hits both. Each run: start the server, wait until it
answers, a 1 s wrk warm-up, the measured wrk run (wrk -t1 --latency), and
the server's CPU time (utime + stime from /proc/PID/stat) over that run
divided by the requests it served. Prints each cell's median and the
ratios numa_rt / tokio. wrk and the servers share the machine's CPUs.
"""
import os, re, signal, socket, statistics, subprocess, sys, time

ROUNDS = int(os.environ.get("ROUNDS", "5"))
CONNS = [int(c) for c in os.environ.get("CONNS", "16,64").split(",")]
DURATION = int(os.environ.get("DURATION", "5"))
WORKERS = os.environ.get("WORKERS", "2")
PATHS = os.environ.get("PATHS", "/plaintext,/json").split(",")
WRK_THREADS = os.environ.get("WRK_THREADS", "1")
PIN_SERVER = os.environ.get("PIN_SERVER")
PIN_LOAD = os.environ.get("PIN_LOAD")
TICK = os.sysconf("SC_CLK_TCK")


def pinned(cmd, cpus):
    """`cmd` under `taskset -c cpus` when cpus is set."""
    return ["taskset", "-c", cpus] + cmd if cpus else cmd

GRPC = os.environ.get("GRPC") == "1"
if GRPC:
    PATHS = ["SayHello"]

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
subprocess.run(["cargo", "build", "--release", "-q", "-p", "numa_rt_webstack",
                "--example", "axum_bench", "--example", "grpc_bench"], cwd=root, check=True)
meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                      cwd=root, check=True, capture_output=True, text=True).stdout
target = re.search(r'"target_directory":"([^"]+)"', meta).group(1)
binary = os.path.join(target, "release", "examples", "axum_bench")
grpc_binary = os.path.join(target, "release", "examples", "grpc_bench")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_until_up(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"no server on port {port}")


def to_ms(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def grpc_load(port, conns, seconds):
    out = subprocess.run(pinned([grpc_binary, "load", str(port), "4", str(conns), str(seconds)], PIN_LOAD),
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"calls=(\d+) seconds=([\d.]+) p50_us=(\d+) p99_us=(\d+)", out)
    return int(m.group(1)), float(m.group(2)), int(m.group(3)) / 1000, int(m.group(4)) / 1000


def one_grpc_run(runtime, port, conns):
    env = dict(os.environ, WORKERS=WORKERS)
    proc = subprocess.Popen(pinned([grpc_binary, "server", runtime, str(port)], PIN_SERVER), env=env)
    try:
        wait_until_up(port, proc)
        grpc_load(port, conns, 1)
        before = cpu_seconds(proc.pid)
        calls, seconds, p50, p99 = grpc_load(port, conns, DURATION)
        cpu = cpu_seconds(proc.pid) - before
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return {"rps": calls / seconds, "cpu_us": cpu * 1e6 / calls, "p50": p50, "p99": p99}


def one_run(runtime, port, conns, path):
    if GRPC:
        return one_grpc_run(runtime, port, conns)
    env = dict(os.environ, WORKERS=WORKERS)
    proc = subprocess.Popen(pinned([binary, runtime, str(port)], PIN_SERVER), env=env)
    try:
        wait_until_up(port, proc)
        url = f"http://127.0.0.1:{port}{path}"
        subprocess.run(pinned(["wrk", f"-t{WRK_THREADS}", f"-c{conns}", "-d1s", url], PIN_LOAD),
                       check=True, capture_output=True)
        before = cpu_seconds(proc.pid)
        out = subprocess.run(pinned(["wrk", f"-t{WRK_THREADS}", f"-c{conns}", f"-d{DURATION}s",
                                     "--latency", url], PIN_LOAD),
                             check=True, capture_output=True, text=True).stdout
        cpu = cpu_seconds(proc.pid) - before
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        sys.exit(f"{runtime}: {errors.group(1)} non-2xx answers\n{out}")
    lat = {p: to_ms(re.search(rf"\s{p}%\s+(\S+)", out).group(1)) for p in ("50", "99")}
    return {"rps": requests / DURATION, "cpu_us": cpu * 1e6 / requests,
            "p50": lat["50"], "p99": lat["99"]}


results = {}
port = 3090
for r in range(ROUNDS):
    for path in PATHS:
        for conns in CONNS:
            for runtime in ("numa_rt", "tokio"):
                port += 1
                res = one_run(runtime, port, conns, path)
                results.setdefault((path, conns, runtime), []).append(res)
                print(f"round {r + 1} {path} c={conns} {runtime}: {res['rps']:.0f} req/s, "
                      f"{res['cpu_us']:.1f} us CPU/req, p50 {res['p50']:.2f} ms, "
                      f"p99 {res['p99']:.2f} ms", flush=True)

med = lambda rows, k: statistics.median(x[k] for x in rows)
load = "grpc_bench load (1 thread, 4 connections)" if GRPC else f"wrk -t{WRK_THREADS}"
print(f"\nmedians of {ROUNDS} rounds, {WORKERS} workers, {load} -d{DURATION}s, "
      f"{os.cpu_count()} CPUs shared by the load and the server")
print("| path | conns | numa_rt req/s | tokio req/s | req/s ratio | numa_rt µs CPU/req | "
      "tokio µs CPU/req | CPU ratio | p50 ms (n / t) | p99 ms (n / t) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in PATHS:
    for conns in CONNS:
        n, t = results[(path, conns, "numa_rt")], results[(path, conns, "tokio")]
        print(f"| {path} | {conns} | {med(n, 'rps'):.0f} | {med(t, 'rps'):.0f} | "
              f"{med(n, 'rps') / med(t, 'rps'):.2f} | {med(n, 'cpu_us'):.1f} | "
              f"{med(t, 'cpu_us'):.1f} | {med(n, 'cpu_us') / med(t, 'cpu_us'):.2f} | "
              f"{med(n, 'p50'):.2f} / {med(t, 'p50'):.2f} | {med(n, 'p99'):.2f} / {med(t, 'p99'):.2f} |")

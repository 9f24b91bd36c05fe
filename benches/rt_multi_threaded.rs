//! numa_rt against tokio's multi-threaded runtime and async-executor on the
//! six scheduler workloads of tokio's `rt_multi_threaded` bench (described
//! in `common`).
//!
//! One criterion group per workload, with one function per runtime
//! (`numa_rt`, `tokio`, `async_executor`), all with 2 worker threads; then
//! the same at 1 worker in the groups `<workload>/1proc`. Summarize the
//! results with `python3 benches/summarize.py`.
//!
//! `BENCH_WORKERS` replaces the worker counts: a comma-separated list, each
//! count a group suffix `/<n>proc` (2 keeps the plain name), so the same
//! workloads run at 2, 4, 8 and 16 workers side by side in one run (the
//! 16-core machine's `run.sh` sets it; on 2 CPUs the larger counts measure
//! what grows with the P count, not parallel speed).
//!
//! ```text
//! cargo bench --bench rt_multi_threaded -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench rt_multi_threaded -- ping_pong      # one workload
//! BENCH_WORKERS=4,8,16 cargo bench --bench rt_multi_threaded -- ping_pong
//! ```

mod common;

use common::{
    bench_with_watchdog, AsyncExec, Bench, ChainedSpawn, NumaRt, PingPong, SpawnManyLocal,
    SpawnManyRemoteBusy1, SpawnManyRemoteIdle, Tokio, Workload, YieldMany, WORKERS,
};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};

/// Times workload `W` on `rt` as function `id` of `group`. The runtime was
/// built by the caller and is dropped (its threads stopped) before the next
/// runtime is built, so the runtimes never compete for the two cores.
fn run_on<W: Workload, R: Bench + Sync>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    id: &str,
    rt: R,
) {
    let iteration = W::prepare(&rt);
    bench_with_watchdog(group, name, id, &rt, iteration);
}

/// The group comparing the three runtimes on `W` with `workers` workers.
fn compare<W: Workload>(c: &mut Criterion, workers: usize) {
    let name = if workers == WORKERS {
        W::NAME.to_owned()
    } else {
        format!("{}/{workers}proc", W::NAME)
    };
    let mut group = c.benchmark_group(&name);
    run_on::<W, _>(&mut group, &name, "numa_rt", NumaRt::new(workers));
    run_on::<W, _>(&mut group, &name, "tokio", Tokio::new(workers));
    run_on::<W, _>(&mut group, &name, "async_executor", AsyncExec::new(workers));
    group.finish();
}

fn at(c: &mut Criterion, workers: usize) {
    compare::<SpawnManyLocal>(c, workers);
    compare::<SpawnManyRemoteIdle>(c, workers);
    compare::<SpawnManyRemoteBusy1>(c, workers);
    compare::<YieldMany>(c, workers);
    compare::<PingPong>(c, workers);
    compare::<ChainedSpawn>(c, workers);
}

/// The worker counts to run: `BENCH_WORKERS` (e.g. `4,8,16`), or 2 then 1.
/// A bad value stops the bench with a message naming the variable.
fn worker_counts() -> Vec<usize> {
    let Ok(list) = std::env::var("BENCH_WORKERS") else {
        return vec![WORKERS, 1];
    };
    let counts: Result<Vec<usize>, String> = list
        .split(',')
        .map(|w| match w.trim().parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(n),
            _ => Err(format!(
                "BENCH_WORKERS={list:?}: {w:?} is not a worker count in 1..=1024"
            )),
        })
        .collect();
    counts.unwrap_or_else(|e| panic!("{e}"))
}

fn all_counts(c: &mut Criterion) {
    for workers in worker_counts() {
        at(c, workers);
    }
}

criterion_group!(benches, all_counts);
criterion_main!(benches);

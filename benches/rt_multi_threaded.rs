//! numa_rt against tokio's multi-threaded runtime and async-executor on the
//! six scheduler workloads of tokio's `rt_multi_threaded` bench (described
//! in `common`).
//!
//! One criterion group per workload, with one function per runtime
//! (`numa_rt`, `tokio`, `async_executor`), all with 2 worker threads; then
//! the same at 1 worker in the groups `<workload>/1proc`. Summarize the
//! results with `python3 benches/summarize.py`.
//!
//! ```text
//! cargo bench --bench rt_multi_threaded -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench rt_multi_threaded -- ping_pong      # one workload
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

fn two_workers(c: &mut Criterion) {
    at(c, WORKERS);
}

fn one_worker(c: &mut Criterion) {
    at(c, 1);
}

criterion_group!(benches, two_workers, one_worker);
criterion_main!(benches);

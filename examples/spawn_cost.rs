//! One-shot runs of benches/rt_multi_threaded.rs's workloads (the same code:
//! benches/common), without criterion, for counting a spawn's instructions
//! under callgrind (issue 39): `Ir(2k iterations) - Ir(k iterations)` over
//! the spawns between drops start-up, shutdown and the first iteration's
//! warm-up. benches/go_rt_multi_threaded.sh's `CALLGRIND=1` part runs it.
//!
//! ```text
//! cargo build --profile bench --example spawn_cost
//! target/release/examples/spawn_cost spawn_many_local numa_rt 1 4   # workload runtime workers iterations
//! valgrind --tool=callgrind target/release/examples/spawn_cost spawn_many_local numa_rt 16 2
//! ```
//!
//! Besides the six workloads, `spawn_from_task` is spawn_many_local's shape
//! moved onto a worker: `block_on` spawns one task, which spawns the 10,000
//! counting tasks (on numa_rt `block_on`'s thread is no worker, so
//! spawn_many_local's spawns take the path from outside: the node queue
//! and a wake; Go's main goroutine is a goroutine like any other).
//!
//! One untimed iteration runs first; it prints
//! `spawn_many_local numa_rt workers=1 iters=4 wall=...ms (N µs/iter)`.
//! With `SPAWN_COST_COUNTS=1`, numa_rt runs also print the scheduler's
//! counters per task polled (parks, unparks, spurious wake-ups, steals,
//! tasks stolen): what grows with the number of P's where instruction
//! counts do not (issue 39).

#[path = "../benches/common/mod.rs"]
mod common;

use common::{
    Bench, ChainedSpawn, Ctx, NumaRt, PingPong, SpawnManyLocal, SpawnManyRemoteBusy1,
    SpawnManyRemoteIdle, Tokio, Workload, YieldMany, SPAWN_TASKS,
};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// spawn_many_local with the spawning loop inside a task on a worker.
struct SpawnFromTask;

impl Workload for SpawnFromTask {
    const NAME: &'static str = "spawn_from_task";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
        let left = Arc::new(AtomicUsize::new(0));
        let ctx = rt.ctx();
        move || {
            left.store(SPAWN_TASKS, Relaxed);
            let (done_tx, left_in) = (done_tx.clone(), left.clone());
            rt.block_on(async {
                ctx.spawn_detached(async move {
                    for _ in 0..SPAWN_TASKS {
                        let (done_tx, left) = (done_tx.clone(), left_in.clone());
                        ctx.spawn_detached(async move {
                            if left.fetch_sub(1, Relaxed) == 1 {
                                done_tx.send(()).unwrap();
                            }
                        });
                    }
                });
                done_rx.recv().unwrap();
            });
            assert_eq!(left.load(Relaxed), 0);
        }
    }
}

fn run<W: Workload, R: Bench>(rt: &R, iters: usize) {
    let mut iteration = W::prepare(rt);
    iteration();
    let t0 = Instant::now();
    for _ in 0..iters {
        iteration();
    }
    let wall = t0.elapsed();
    let args: Vec<String> = std::env::args().collect();
    println!(
        "{} {} workers={} iters={iters} wall={:.3}ms ({:.1} µs/iter)",
        args[1],
        args[2],
        args[3],
        wall.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e6 / iters as f64
    );
}

fn on<R: Bench>(rt: &R, workload: &str, iters: usize) {
    match workload {
        "spawn_many_local" => run::<SpawnManyLocal, _>(rt, iters),
        "spawn_from_task" => run::<SpawnFromTask, _>(rt, iters),
        "spawn_many_remote_idle" => run::<SpawnManyRemoteIdle, _>(rt, iters),
        "spawn_many_remote_busy1" => run::<SpawnManyRemoteBusy1, _>(rt, iters),
        "yield_many" => run::<YieldMany, _>(rt, iters),
        "ping_pong" => run::<PingPong, _>(rt, iters),
        "chained_spawn" => run::<ChainedSpawn, _>(rt, iters),
        other => panic!("unknown workload {other:?}"),
    }
}

/// The scheduler's counters over the whole run, per task polled.
fn print_counts(m: &numa_rt::metrics::RuntimeMetrics) {
    let procs = m.procs();
    let sum = |f: fn(&numa_rt::metrics::ProcMetrics) -> u64| procs.iter().map(f).sum::<u64>();
    let polled = sum(|p| p.tasks_polled).max(1) as f64;
    let per = |n: u64| n as f64 / polled;
    println!(
        "counts per task polled ({polled} polls): parks {:.4} unparks {:.4} spurious {:.4} \
         steals {:.4} tasks_stolen {:.4} migrated {:.4} global_queue_polls {:.4}",
        per(sum(|p| p.parks)),
        per(sum(|p| p.unparks)),
        per(sum(|p| p.spurious_wakeups)),
        per(sum(|p| p.local_steals + p.remote_steals)),
        per(sum(|p| p.tasks_stolen)),
        per(sum(|p| p.migrated_polls)),
        per(sum(|p| p.global_queue_polls)),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: spawn_cost <workload> <numa_rt|tokio> <workers> <iterations>");
        std::process::exit(2);
    }
    let workers: usize = args[3].parse().expect("workers: a number");
    let iters: usize = args[4].parse().expect("iterations: a number");
    match args[2].as_str() {
        "numa_rt" => {
            let rt = NumaRt::new(workers);
            on(&rt, &args[1], iters);
            if std::env::var_os("SPAWN_COST_COUNTS").is_some() {
                print_counts(&rt.metrics());
            }
        }
        "tokio" => on(&Tokio::new(workers), &args[1], iters),
        other => panic!("unknown runtime {other:?}"),
    }
}

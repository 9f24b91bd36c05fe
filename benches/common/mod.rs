//! What the runtime benchmarks share: a small interface over the three
//! executors under test, and the six scheduler workloads that async runtimes
//! are usually compared on (the ones of tokio's `rt_multi_threaded` bench).
//!
//! Every workload is written once, generically over [`Bench`], so numa_rt,
//! tokio and async-executor run exactly the same code with the same channel
//! types (`futures::channel::oneshot`, `std::sync::mpsc::sync_channel`): only
//! the executor differs. Each runtime is built once per criterion group;
//! [`Workload::prepare`] sets up channels, counters and background load
//! outside the timing loop and returns the closure criterion times.
//!
//! Inside tasks the workloads spawn through a [`Ctx`], which is what a user
//! of each runtime would write: `numa_rt::spawn` / `tokio::spawn` (the
//! runtime found from the current thread) and, since async-executor has no
//! ambient context, a `&'static Executor` captured by the task. All three are
//! `Copy`, so capturing one costs nothing.

// Each bench binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use futures::channel::oneshot;
use std::fmt::Debug;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Worker threads (processors) for the main comparison.
pub const WORKERS: usize = 2;

/// Tasks spawned per iteration by the `spawn_many_*` workloads.
pub const SPAWN_TASKS: usize = 10_000;
/// Background tasks of `spawn_many_remote_busy1`.
pub const BUSY_TASKS: usize = 8;
/// How long each background task of `spawn_many_remote_busy1` spins between
/// yields.
pub const STALL: Duration = Duration::from_micros(10);
/// Tasks of `yield_many`, and the yields each makes.
pub const YIELD_TASKS: usize = 200;
pub const YIELDS_PER_TASK: usize = 1_000;
/// Ping-pong pairs of `ping_pong`.
pub const PINGS: usize = 1_000;
/// Length of the spawn chain of `chained_spawn`.
pub const CHAIN: usize = 1_000;

/// A runtime under test, driven from the benchmark's own thread.
pub trait Bench {
    /// How tasks running on this runtime spawn and yield.
    type Ctx: Ctx;
    /// What [`Bench::spawn`] returns: resolves to the task's output.
    type Join<T: Send + 'static>: Future<Output = T> + Send + 'static;

    fn ctx(&self) -> Self::Ctx;

    /// Runs `future` on the benchmark thread until it completes; tasks it
    /// spawns through [`Ctx`] run on the runtime's workers.
    fn block_on<F: Future>(&self, future: F) -> F::Output;

    /// Spawns from outside the runtime (the benchmark thread) and keeps a
    /// handle to await.
    fn spawn<F>(&self, future: F) -> Self::Join<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;

    /// Spawns from outside the runtime and lets the task run on its own.
    fn spawn_detached<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// What the runtime is doing, for the watchdog's hang report.
    fn state(&self) -> String {
        String::from("(no metrics)")
    }
}

/// Spawning and yielding from inside the runtime (a task or `block_on`).
pub trait Ctx: Copy + Send + Sync + 'static {
    fn spawn_detached<F>(self, future: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// The runtime's own `yield_now`.
    fn yield_now(self) -> impl Future<Output = ()> + Send;
}

/// A `JoinHandle` whose `Result` is unwrapped: a task of these workloads
/// never fails, and a failure must abort the benchmark, not be timed.
pub struct Unwrap<J>(J);

impl<J, T, E> Future for Unwrap<J>
where
    J: Future<Output = Result<T, E>> + Unpin,
    E: Debug,
{
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.get_mut().0)
            .poll(cx)
            .map(|r| r.expect("benchmark task failed"))
    }
}

// ---------------------------------------------------------------- numa_rt

/// A numa_rt runtime with `max_procs` processors.
pub struct NumaRt(numa_rt::Runtime);

impl NumaRt {
    /// The default (discovered) topology: one node on a one-node machine.
    pub fn new(procs: usize) -> NumaRt {
        NumaRt(
            numa_rt::Builder::new()
                .max_procs(procs)
                .build()
                .expect("building the numa_rt runtime"),
        )
    }

    /// The runtime's metrics (counts per task in `examples/spawn_cost`).
    #[allow(dead_code)] // used by examples/spawn_cost only
    pub fn metrics(&self) -> numa_rt::metrics::RuntimeMetrics {
        self.0.metrics()
    }

    pub fn with_topology(procs: usize, topology: numa_rt::numa::Topology) -> NumaRt {
        NumaRt(
            numa_rt::Builder::new()
                .max_procs(procs)
                .topology(topology)
                .build()
                .expect("building the numa_rt runtime"),
        )
    }

    pub fn runtime(&self) -> &numa_rt::Runtime {
        &self.0
    }
}

#[derive(Clone, Copy)]
pub struct NumaRtCtx;

impl Ctx for NumaRtCtx {
    fn spawn_detached<F>(self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(numa_rt::spawn(future));
    }

    fn yield_now(self) -> impl Future<Output = ()> + Send {
        numa_rt::task::yield_now()
    }
}

impl Bench for NumaRt {
    type Ctx = NumaRtCtx;
    type Join<T: Send + 'static> = Unwrap<numa_rt::JoinHandle<T>>;

    fn ctx(&self) -> NumaRtCtx {
        NumaRtCtx
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }

    fn spawn<F>(&self, future: F) -> Self::Join<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Unwrap(self.0.spawn(future))
    }

    fn spawn_detached<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.spawn(future));
    }

    fn state(&self) -> String {
        self.0.metrics().to_string()
    }
}

// ------------------------------------------------------------------ tokio

/// tokio's multi-threaded runtime with `workers` worker threads and its I/O
/// and time drivers enabled (numa_rt always has its reactor and timers).
pub struct Tokio(tokio::runtime::Runtime);

impl Tokio {
    pub fn new(workers: usize) -> Tokio {
        Tokio(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("building the tokio runtime"),
        )
    }
}

#[derive(Clone, Copy)]
pub struct TokioCtx;

impl Ctx for TokioCtx {
    fn spawn_detached<F>(self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(tokio::spawn(future));
    }

    fn yield_now(self) -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }
}

impl Bench for Tokio {
    type Ctx = TokioCtx;
    type Join<T: Send + 'static> = Unwrap<tokio::task::JoinHandle<T>>;

    fn ctx(&self) -> TokioCtx {
        TokioCtx
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }

    fn spawn<F>(&self, future: F) -> Self::Join<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Unwrap(self.0.spawn(future))
    }

    fn spawn_detached<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.spawn(future));
    }
}

// --------------------------------------------------------- async-executor

/// An `async_executor::Executor` run by `threads` std threads, each in
/// `block_on(executor.run(stop))` — the usual way to make it a thread pool.
/// The benchmark thread's `block_on` does not run the executor, so exactly
/// `threads` threads run tasks, as with the other two runtimes.
pub struct AsyncExec {
    ex: &'static async_executor::Executor<'static>,
    /// Dropping a sender ends its thread's `run`.
    stop: Vec<oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl AsyncExec {
    pub fn new(threads: usize) -> AsyncExec {
        // Leaked (a few hundred bytes per group) so tasks can capture a
        // `Copy` reference instead of cloning an `Arc` on every spawn.
        let ex: &'static async_executor::Executor<'static> =
            Box::leak(Box::new(async_executor::Executor::new()));
        let (stop, threads) = (0..threads)
            .map(|i| {
                let (tx, rx) = oneshot::channel::<()>();
                let thread = std::thread::Builder::new()
                    .name(format!("async-executor-{i}"))
                    .spawn(move || {
                        futures_lite::future::block_on(ex.run(async {
                            let _ = rx.await;
                        }))
                    })
                    .expect("starting an async-executor thread");
                (tx, thread)
            })
            .unzip();
        AsyncExec { ex, stop, threads }
    }
}

impl Drop for AsyncExec {
    fn drop(&mut self) {
        self.stop.clear();
        for t in self.threads.drain(..) {
            t.join().expect("an async-executor thread panicked");
        }
    }
}

#[derive(Clone, Copy)]
pub struct AsyncExecCtx(&'static async_executor::Executor<'static>);

impl Ctx for AsyncExecCtx {
    fn spawn_detached<F>(self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // An async-executor `Task` cancels its future when dropped.
        self.0.spawn(future).detach();
    }

    fn yield_now(self) -> impl Future<Output = ()> + Send {
        futures_lite::future::yield_now()
    }
}

impl Bench for AsyncExec {
    type Ctx = AsyncExecCtx;
    type Join<T: Send + 'static> = async_executor::Task<T>;

    fn ctx(&self) -> AsyncExecCtx {
        AsyncExecCtx(self.ex)
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        futures_lite::future::block_on(future)
    }

    fn spawn<F>(&self, future: F) -> Self::Join<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.ex.spawn(future)
    }

    fn spawn_detached<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.ex.spawn(future).detach();
    }
}

// --------------------------------------------------------------- watchdog

/// An iteration still running after this long is a hang (the slowest
/// iteration here takes milliseconds; criterion's analysis between phases,
/// when no iteration runs, takes a few seconds at most).
pub const HANG_AFTER: Duration = Duration::from_secs(30);

/// Times `iteration` as function `id` of `group` (named `group_name`), with
/// a watchdog: if no iteration completes for [`HANG_AFTER`], it prints the
/// runtime's state (numa_rt's metrics: queue depths, idle P's, spinning
/// M's) and exits the process with status 3, instead of hanging forever.
pub fn bench_with_watchdog<R: Bench + Sync>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    group_name: &str,
    id: &str,
    rt: &R,
    mut iteration: impl FnMut(),
) {
    let completed = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        let watchdog = s.spawn(|| {
            let (mut seen, mut since) = (0, Instant::now());
            while !finished.load(Relaxed) {
                std::thread::park_timeout(Duration::from_millis(500));
                let now = completed.load(Relaxed);
                if now != seen {
                    (seen, since) = (now, Instant::now());
                } else if since.elapsed() > HANG_AFTER && !finished.load(Relaxed) {
                    eprintln!(
                        "\n{group_name}/{id}: HANG — no iteration finished in {HANG_AFTER:?} \
                         (after {seen} iterations). Runtime state:\n{}",
                        rt.state()
                    );
                    std::process::exit(3);
                }
            }
        });
        group.bench_function(id, |b| {
            b.iter(|| {
                iteration();
                completed.fetch_add(1, Relaxed);
            })
        });
        finished.store(true, Relaxed);
        watchdog.thread().unpark();
    });
}

// -------------------------------------------------------------- workloads

/// One benchmark workload, generic over the runtime.
pub trait Workload {
    /// The criterion group name.
    const NAME: &'static str;

    /// Sets up everything that is not measured (channels, counters,
    /// background load) and returns one measured iteration. The iteration
    /// panics if the work was not all done.
    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_;
}

/// Spawning from inside the runtime: `block_on` spawns 10,000 tasks that
/// each decrement a shared counter; the one that reaches zero sends on a std
/// `sync_channel`, which `block_on` waits for. Measures the spawn path, the
/// run queues under a burst, and waking idle workers.
pub struct SpawnManyLocal;

impl Workload for SpawnManyLocal {
    const NAME: &'static str = "spawn_many_local";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
        let left = Arc::new(AtomicUsize::new(0));
        let ctx = rt.ctx();
        move || {
            left.store(SPAWN_TASKS, Relaxed);
            rt.block_on(async {
                for _ in 0..SPAWN_TASKS {
                    let (done_tx, left) = (done_tx.clone(), left.clone());
                    ctx.spawn_detached(async move {
                        if left.fetch_sub(1, Relaxed) == 1 {
                            done_tx.send(()).unwrap();
                        }
                    });
                }
                done_rx.recv().unwrap();
            });
            assert_eq!(left.load(Relaxed), 0);
        }
    }
}

/// Spawns 10,000 empty tasks from a thread outside the runtime, then awaits
/// every handle. Measures the injection (global) queue and join handles.
fn spawn_remote_and_join<'a, R: Bench>(rt: &'a R) -> impl FnMut() + 'a {
    let mut handles = Vec::with_capacity(SPAWN_TASKS);
    move || {
        for _ in 0..SPAWN_TASKS {
            handles.push(rt.spawn(async {}));
        }
        let joined = rt.block_on(async {
            let mut joined = 0;
            for handle in handles.drain(..) {
                handle.await;
                joined += 1;
            }
            joined
        });
        assert_eq!(joined, SPAWN_TASKS);
    }
}

/// [`spawn_remote_and_join`] on an otherwise idle runtime: most of the cost
/// is waking parked workers and handing them the injected tasks.
pub struct SpawnManyRemoteIdle;

impl Workload for SpawnManyRemoteIdle {
    const NAME: &'static str = "spawn_many_remote_idle";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        spawn_remote_and_join(rt)
    }
}

/// [`spawn_remote_and_join`] while 8 background tasks keep every worker busy,
/// each looping `yield_now(); spin 10 µs`. Measures how promptly injected
/// tasks get run when the local queues never drain (the global-queue check
/// interval and fairness against yielding tasks).
pub struct SpawnManyRemoteBusy1;

impl Workload for SpawnManyRemoteBusy1 {
    const NAME: &'static str = "spawn_many_remote_busy1";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        let load = BackgroundLoad::start(rt);
        let mut run = spawn_remote_and_join(rt);
        move || {
            let _keep_spinning = &load;
            run()
        }
    }
}

/// The background tasks of `spawn_many_remote_busy1`; dropping it stops them.
struct BackgroundLoad {
    running: Arc<AtomicBool>,
}

impl BackgroundLoad {
    fn start<R: Bench>(rt: &R) -> BackgroundLoad {
        let running = Arc::new(AtomicBool::new(true));
        let started = Arc::new(AtomicUsize::new(0));
        let ctx = rt.ctx();
        for _ in 0..BUSY_TASKS {
            let (running, started) = (running.clone(), started.clone());
            rt.spawn_detached(async move {
                started.fetch_add(1, Relaxed);
                while running.load(Relaxed) {
                    ctx.yield_now().await;
                    stall();
                }
            });
        }
        // Do not start timing before the load is actually running.
        let deadline = Instant::now() + Duration::from_secs(10);
        while started.load(Relaxed) < BUSY_TASKS {
            assert!(
                Instant::now() < deadline,
                "the background tasks did not start within 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        BackgroundLoad { running }
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.running.store(false, Relaxed);
    }
}

/// Busy-waits for [`STALL`]: a task doing a little CPU work per poll.
fn stall() {
    let start = Instant::now();
    while start.elapsed() < STALL {
        std::hint::spin_loop();
    }
}

/// 200 tasks, spawned from outside, each calling `yield_now` 1,000 times and
/// then reporting on a std `sync_channel`. Measures the cost of a yield: a
/// re-schedule to the back of the run queue and the next poll.
pub struct YieldMany;

impl Workload for YieldMany {
    const NAME: &'static str = "yield_many";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        assert_yield_is_real(rt);
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(YIELD_TASKS);
        let ctx = rt.ctx();
        move || {
            for _ in 0..YIELD_TASKS {
                let done_tx = done_tx.clone();
                rt.spawn_detached(async move {
                    for _ in 0..YIELDS_PER_TASK {
                        ctx.yield_now().await;
                    }
                    done_tx.send(()).unwrap();
                });
            }
            for _ in 0..YIELD_TASKS {
                done_rx.recv().unwrap();
            }
        }
    }
}

/// Checks once, before timing, that the runtime's `yield_now` really
/// suspends (returns `Pending` on its first poll) and completes once woken,
/// so `yield_many` compares the same thing on every runtime.
fn assert_yield_is_real<R: Bench>(rt: &R) {
    let ctx = rt.ctx();
    let first_poll_pending = rt.block_on(rt.spawn(async move {
        let mut y = pin!(ctx.yield_now());
        let pending =
            std::future::poll_fn(|cx| Poll::Ready(y.as_mut().poll(cx).is_pending())).await;
        y.await;
        pending
    }));
    assert!(first_poll_pending, "yield_now did not yield");
}

/// One task spawns 1,000 tasks; each creates two `futures` oneshots and a
/// partner task, sends a ping and awaits the pong. The last to finish
/// reports on a std `sync_channel`. Measures wake-ups between tasks (the
/// `runnext` / LIFO-slot path) mixed with spawns.
pub struct PingPong;

impl Workload for PingPong {
    const NAME: &'static str = "ping_pong";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
        let left = Arc::new(AtomicUsize::new(0));
        let ctx = rt.ctx();
        move || {
            left.store(PINGS, Relaxed);
            let (done_tx, left_in) = (done_tx.clone(), left.clone());
            rt.block_on(async {
                ctx.spawn_detached(async move {
                    for _ in 0..PINGS {
                        let (done_tx, left) = (done_tx.clone(), left_in.clone());
                        ctx.spawn_detached(async move {
                            let (ping_tx, ping_rx) = oneshot::channel::<()>();
                            let (pong_tx, pong_rx) = oneshot::channel::<()>();
                            ctx.spawn_detached(async move {
                                ping_rx.await.unwrap();
                                pong_tx.send(()).unwrap();
                            });
                            ping_tx.send(()).unwrap();
                            pong_rx.await.unwrap();
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

/// A chain of 1,000 spawns: each task spawns the next, and the last reports
/// the chain's length on a std `sync_channel`. Only one task is runnable at a
/// time, so this measures spawn-to-run latency on one worker (and whether
/// idle workers waste time stealing it back and forth).
pub struct ChainedSpawn;

impl Workload for ChainedSpawn {
    const NAME: &'static str = "chained_spawn";

    fn prepare<R: Bench>(rt: &R) -> impl FnMut() + '_ {
        let (done_tx, done_rx) = mpsc::sync_channel::<usize>(1);
        let ctx = rt.ctx();
        move || {
            let done_tx = done_tx.clone();
            let length = rt.block_on(async {
                ctx.spawn_detached(async move { chain_link(ctx, done_tx, 0) });
                done_rx.recv().unwrap()
            });
            assert_eq!(length, CHAIN);
        }
    }
}

/// Link `hop` of the chain: spawns link `hop + 1`, or reports at the end.
fn chain_link<C: Ctx>(ctx: C, done_tx: SyncSender<usize>, hop: usize) {
    if hop == CHAIN {
        done_tx.send(hop).unwrap();
    } else {
        ctx.spawn_detached(async move { chain_link(ctx, done_tx, hop + 1) });
    }
}

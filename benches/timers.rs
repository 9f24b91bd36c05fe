//! Timers on the request path (issue 23, item 3): arming and cancelling one
//! timer per simulated request, numa_rt against tokio in the same binary,
//! both with 2 worker threads.
//!
//! - `request_timer/arm_cancel/<tasks>/<runtime>`: each of `<tasks>` tasks
//!   runs a loop of "requests": it creates a 30-second `sleep`, polls it once
//!   (which registers it with the timer set of its worker) and drops it
//!   (which cancels it). This is hyper's header-read timer, armed when a
//!   connection waits for the next request head and dropped once the head
//!   is read.
//! - `request_timer/timeout_yield/<tasks>/<runtime>`: the same through
//!   `timeout(30 s, f)`, where `f` is pending once (it yields) and then
//!   ready: the timer is registered by one poll and cancelled by the next,
//!   with a trip through the run queue between them.
//!
//! Every iteration runs `REQUESTS` requests in all, split between the tasks;
//! the throughput is requests per second.
//!
//! ```text
//! cargo bench --bench timers -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! With `TIMER_COUNT=<n>` set, the binary instead runs `n` arm+cancel
//! requests on one numa_rt task (`TIMER_RT=tokio`: on a tokio task) and
//! exits, for instruction counts:
//!
//! ```text
//! for n in 100000 200000; do TIMER_COUNT=$n valgrind --tool=callgrind \
//!   --callgrind-out-file=/tmp/cg.$n target/release/deps/timers-<hash>; done
//! ```
//! (the difference of the two totals over 100,000 is the cost of one
//! arm+cancel, startup excluded).

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};

const WORKERS: usize = 2;
const REQUESTS: u64 = 10_000;
const TASKS: [u64; 2] = [1, 8];
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

fn numa_rt_rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(WORKERS).build().unwrap()
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .unwrap()
}

/// Pending once (waking itself), then ready: a request head that arrives
/// after one trip through the run queue.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

mod numa {
    use super::*;

    /// Each request polls its sleep with a fresh cooperative budget, as a
    /// task woken for each request would: in one long poll the budget runs
    /// out after 128 polls, and every later sleep would return `Pending`
    /// without registering.
    pub async fn arm_cancel(n: u64) {
        std::future::poll_fn(|cx| {
            for _ in 0..n {
                let mut s = numa_rt::time::sleep(HEADER_TIMEOUT);
                let r = numa_rt_reactor::coop::budget(|| Pin::new(&mut s).poll(cx));
                assert!(r.is_pending());
            }
            Poll::Ready(())
        })
        .await
    }

    pub async fn timeout_yield(n: u64) {
        for _ in 0..n {
            let r = numa_rt::time::timeout(HEADER_TIMEOUT, YieldOnce(false)).await;
            assert!(r.is_ok());
        }
    }

    pub fn run<F, Fut>(rt: &numa_rt::Runtime, tasks: u64, iters: u64, body: F) -> Duration
    where
        F: Fn(u64) -> Fut + Send + Copy + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        rt.block_on(rt.spawn(async move {
            let start = Instant::now();
            for _ in 0..iters {
                let hs: Vec<_> = (0..tasks)
                    .map(|_| numa_rt::spawn(body(REQUESTS / tasks)))
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
            }
            start.elapsed()
        }))
        .unwrap()
    }
}

mod tok {
    use super::*;

    /// Without tokio's cooperative budget (numa_rt's gets a fresh one per
    /// request, see there).
    pub async fn arm_cancel(n: u64) {
        tokio::task::unconstrained(async move {
            for _ in 0..n {
                let mut s = pin!(tokio::time::sleep(HEADER_TIMEOUT));
                assert!(futures::poll!(s.as_mut()).is_pending());
            }
        })
        .await
    }

    pub async fn timeout_yield(n: u64) {
        for _ in 0..n {
            let r = tokio::time::timeout(HEADER_TIMEOUT, YieldOnce(false)).await;
            assert!(r.is_ok());
        }
    }

    pub fn run<F, Fut>(rt: &tokio::runtime::Runtime, tasks: u64, iters: u64, body: F) -> Duration
    where
        F: Fn(u64) -> Fut + Send + Copy + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        rt.block_on(rt.spawn(async move {
            let start = Instant::now();
            for _ in 0..iters {
                let hs: Vec<_> = (0..tasks)
                    .map(|_| tokio::spawn(body(REQUESTS / tasks)))
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
            }
            start.elapsed()
        }))
        .unwrap()
    }
}

fn request_timer(c: &mut Criterion) {
    let mut g = c.benchmark_group("request_timer");
    g.throughput(Throughput::Elements(REQUESTS));
    {
        let rt = numa_rt_rt();
        for tasks in TASKS {
            g.bench_function(format!("arm_cancel/{tasks}/numa_rt"), |b| {
                b.iter_custom(|iters| numa::run(&rt, tasks, iters, numa::arm_cancel))
            });
            g.bench_function(format!("timeout_yield/{tasks}/numa_rt"), |b| {
                b.iter_custom(|iters| numa::run(&rt, tasks, iters, numa::timeout_yield))
            });
        }
    }
    {
        let rt = tokio_rt();
        for tasks in TASKS {
            g.bench_function(format!("arm_cancel/{tasks}/tokio"), |b| {
                b.iter_custom(|iters| tok::run(&rt, tasks, iters, tok::arm_cancel))
            });
            g.bench_function(format!("timeout_yield/{tasks}/tokio"), |b| {
                b.iter_custom(|iters| tok::run(&rt, tasks, iters, tok::timeout_yield))
            });
        }
    }
    g.finish();
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|e| panic!("{name} must be a whole number, got {v:?}: {e}")),
    )
}

/// `TIMER_COUNT=<n>`: `n` arm+cancel requests on one task, then exit (for
/// callgrind; see the module docs). `TIMER_MS=<ms>` sets the timers'
/// duration (default 30,000) and `TIMER_PENDING=<k>` keeps `k` other
/// timers pending meanwhile, spread over the next `TIMER_MS` (default 0).
fn count_mode() -> bool {
    let Some(n) = env_u64("TIMER_COUNT") else {
        return false;
    };
    let ms = env_u64("TIMER_MS").unwrap_or(30_000);
    let pending = env_u64("TIMER_PENDING").unwrap_or(0);
    let d = Duration::from_millis(ms);
    let spread = move |i: u64| Duration::from_millis(ms / 2 + i * ms / pending.max(1));
    if std::env::var("TIMER_RT").as_deref() == Ok("tokio") {
        let rt = tokio_rt();
        rt.block_on(rt.spawn(tokio::task::unconstrained(async move {
            let mut keep: Vec<_> = (0..pending)
                .map(|i| Box::pin(tokio::time::sleep(spread(i))))
                .collect();
            for s in &mut keep {
                assert!(futures::poll!(s.as_mut()).is_pending());
            }
            for _ in 0..n {
                let mut s = pin!(tokio::time::sleep(d));
                assert!(futures::poll!(s.as_mut()).is_pending());
            }
        })))
        .unwrap();
    } else {
        let rt = numa_rt_rt();
        rt.block_on(rt.spawn(std::future::poll_fn(move |cx| {
            let mut keep: Vec<_> = (0..pending)
                .map(|i| numa_rt::time::sleep(spread(i)))
                .collect();
            for s in &mut keep {
                let r = numa_rt_reactor::coop::budget(|| Pin::new(s).poll(cx));
                assert!(r.is_pending());
            }
            for _ in 0..n {
                let mut s = numa_rt::time::sleep(d);
                let r = numa_rt_reactor::coop::budget(|| Pin::new(&mut s).poll(cx));
                assert!(r.is_pending());
            }
            Poll::Ready(())
        })))
        .unwrap();
    }
    true
}

criterion_group!(benches, request_timer);

fn main() {
    if count_mode() {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

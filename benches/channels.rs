//! Tasks that talk (issue 25): channel workloads on numa_rt, tokio's
//! multi-threaded runtime and async-executor, side by side, with the same
//! channel types on every runtime.
//!
//! Workloads (one "message" = one value through one channel, send to recv):
//!
//! - `ping_pong`: two tasks, 10,000 round trips over a pair of `bounded(1)`
//!   channels (20,000 messages);
//! - `pipeline`: 8 stages (a source, 6 forwarders that add 1, a sink that
//!   sums) joined by 7 `bounded(128)` channels, 100,000 values through
//!   (700,000 messages);
//! - `fan_in`: 64 producers × 1,000 values into one consumer over one
//!   `bounded(128)` channel (64,000 messages);
//! - `req_resp`: 16 client/server pairs, each client sending 1,000
//!   requests over its pair's `bounded(1)` request channel and awaiting each
//!   answer before the next (32,000 messages: requests and answers). With
//!   tokio's channels each request carries a `tokio::sync::oneshot` for its
//!   answer; async-channel has no oneshot, so each pair has a `bounded(1)`
//!   response channel.
//!
//! Channel families (`BENCH_CHANNELS`, a comma list, default `tokio,async`):
//! `tokio` = `tokio::sync::mpsc::channel` / `oneshot` (runtime-agnostic: they
//! work on all three runtimes; only on tokio do they take from tokio's
//! cooperative budget), `async` = `async-channel`'s `bounded`.
//!
//! Worker counts: `BENCH_WORKERS` (comma list, default `1,2`). Criterion
//! groups are `channels/<workload>/<family>/<workers>p`, with one function
//! per runtime (`numa_rt`, `tokio`, `async_executor`); a runtime is built once
//! per group and dropped before the next one starts. Each iteration spawns a
//! root task from `block_on` into the already-running runtime; the root
//! spawns the workload's tasks (so they are spawned from a worker, as a
//! server's tasks are) and waits for their results, which the iteration
//! checks (sums of the values received), so no message can be skipped.
//!
//! ```text
//! BENCH_WORKERS=1,2 cargo bench --bench channels -- --warm-up-time 1 --measurement-time 3
//! python3 benches/channels_summary.py
//! ```
//!
//! One run outside criterion (for callgrind, and for the scheduler's
//! counters), `CHANNELS_ONCE=<workload>,<family>,<runtime>,<workers>[,<n>[,<iters>]]`:
//! `n` (empty: the default) scales the workload (round trips, values, values per producer,
//! requests per client; default the figures above), `iters` repeats it on
//! the same runtime (default 1). It prints the wall time, messages, the
//! polls of each kind of task per message (counted by a wrapper around each
//! task's future; `CHANNELS_PROBE=0` leaves the wrapper out, as criterion
//! runs do) and the runtime's counters per message: numa_rt's polls,
//! `runnext` polls, steals, parks, wake-ups and forced yields; tokio's
//! parks, and with `RUSTFLAGS="--cfg tokio_unstable"` (in another
//! `CARGO_TARGET_DIR`) its polls, schedules, steals and forced yields.
//!
//! ```text
//! CHANNELS_ONCE=fan_in,tokio,numa_rt,2 target/release/deps/channels-<hash>
//! bash benches/channels_per_message.sh          # callgrind, instructions per message
//! ```

mod common;

use common::{bench_with_watchdog, AsyncExec, Bench, Ctx, NumaRt, Tokio};
use criterion::Criterion;
use futures::channel::oneshot as done;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Round trips of `ping_pong`.
const PING_ROUNDS: u64 = 10_000;
/// Values through `pipeline`, its stages (tasks) and its channels' capacity.
const PIPE_VALUES: u64 = 100_000;
const PIPE_STAGES: u64 = 8;
const PIPE_CAP: usize = 128;
/// Producers of `fan_in`, values each, and the channel's capacity.
const FAN_PRODUCERS: u64 = 64;
const FAN_VALUES: u64 = 1_000;
const FAN_CAP: usize = 128;
/// Client/server pairs of `req_resp` and requests per client.
const REQ_PAIRS: u64 = 16;
const REQ_PER_CLIENT: u64 = 1_000;

// ------------------------------------------------------------- channels

/// A family of bounded channels, the same on every runtime.
trait Family: 'static {
    const NAME: &'static str;
    type Tx<T: Send + 'static>: Clone + Send + Sync + 'static;
    type Rx<T: Send + 'static>: Send + 'static;

    fn bounded<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>);

    /// Sends `v`, waiting for room; panics if the receiver is gone (a
    /// workload's receivers outlive its senders).
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> impl Future<Output = ()> + Send + '_;

    /// The next value, or `None` once every sender is dropped.
    fn recv<T: Send + 'static>(rx: &mut Self::Rx<T>)
        -> impl Future<Output = Option<T>> + Send + '_;

    /// `req_resp`'s root: spawns the pairs, returns the sum of the answers.
    fn req_resp<C: Ctx>(ctx: C, probe: Probe, n: u64)
        -> impl Future<Output = u64> + Send + 'static;
}

/// `tokio::sync::mpsc` (bounded) and `tokio::sync::oneshot`.
struct TokioChans;

impl Family for TokioChans {
    const NAME: &'static str = "tokio";
    type Tx<T: Send + 'static> = tokio::sync::mpsc::Sender<T>;
    type Rx<T: Send + 'static> = tokio::sync::mpsc::Receiver<T>;

    fn bounded<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        tokio::sync::mpsc::channel(cap)
    }

    async fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) {
        if tx.send(v).await.is_err() {
            panic!("receiver dropped");
        }
    }

    fn recv<T: Send + 'static>(
        rx: &mut Self::Rx<T>,
    ) -> impl Future<Output = Option<T>> + Send + '_ {
        rx.recv()
    }

    async fn req_resp<C: Ctx>(ctx: C, probe: Probe, n: u64) -> u64 {
        use tokio::sync::oneshot;
        let mut results = Vec::with_capacity(2 * REQ_PAIRS as usize);
        for c in 0..REQ_PAIRS {
            let (tx, mut rx) = Self::bounded::<(u64, oneshot::Sender<u64>)>(1);
            results.push(spawn_task(ctx, probe, SERVER, async move {
                let mut served = 0;
                while let Some((v, reply)) = Self::recv(&mut rx).await {
                    reply.send(answer(v)).expect("client gone");
                    served += 1;
                }
                (served, 0)
            }));
            results.push(spawn_task(ctx, probe, CLIENT, async move {
                let mut sum = 0;
                for v in c * n..(c + 1) * n {
                    let (reply, answered) = oneshot::channel();
                    Self::send(&tx, (v, reply)).await;
                    let a = answered.await.expect("server gone");
                    assert_eq!(a, answer(v));
                    sum += a;
                }
                (0, sum)
            }));
        }
        collect_pairs(results, n).await
    }
}

/// `async-channel`'s `bounded`.
struct AsyncChans;

impl Family for AsyncChans {
    const NAME: &'static str = "async";
    type Tx<T: Send + 'static> = async_channel::Sender<T>;
    type Rx<T: Send + 'static> = async_channel::Receiver<T>;

    fn bounded<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        async_channel::bounded(cap)
    }

    async fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) {
        if tx.send(v).await.is_err() {
            panic!("receiver dropped");
        }
    }

    async fn recv<T: Send + 'static>(rx: &mut Self::Rx<T>) -> Option<T> {
        rx.recv().await.ok()
    }

    async fn req_resp<C: Ctx>(ctx: C, probe: Probe, n: u64) -> u64 {
        let mut results = Vec::with_capacity(2 * REQ_PAIRS as usize);
        for c in 0..REQ_PAIRS {
            let (req_tx, mut req_rx) = Self::bounded::<u64>(1);
            let (resp_tx, mut resp_rx) = Self::bounded::<u64>(1);
            results.push(spawn_task(ctx, probe, SERVER, async move {
                let mut served = 0;
                while let Some(v) = Self::recv(&mut req_rx).await {
                    Self::send(&resp_tx, answer(v)).await;
                    served += 1;
                }
                (served, 0)
            }));
            results.push(spawn_task(ctx, probe, CLIENT, async move {
                let mut sum = 0;
                for v in c * n..(c + 1) * n {
                    Self::send(&req_tx, v).await;
                    let a = Self::recv(&mut resp_rx).await.expect("server gone");
                    assert_eq!(a, answer(v));
                    sum += a;
                }
                (0, sum)
            }));
        }
        collect_pairs(results, n).await
    }
}

/// A server's answer to request `v`.
fn answer(v: u64) -> u64 {
    2 * v + 1
}

/// Awaits `req_resp`'s tasks (servers give `(served, 0)`, clients `(0,
/// sum of answers)`): checks that the servers served every request, returns
/// the sum of the answers.
async fn collect_pairs(results: Vec<done::Receiver<(u64, u64)>>, n: u64) -> u64 {
    let (mut served, mut sum) = (0, 0);
    for r in results {
        let (s, answers) = r.await.expect("a req_resp task failed");
        served += s;
        sum += answers;
    }
    assert_eq!(served, REQ_PAIRS * n, "requests served");
    sum
}

// ------------------------------------------------------------ workloads

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    PingPong,
    Pipeline,
    FanIn,
    ReqResp,
}

const WORKLOADS: [Workload; 4] = [
    Workload::PingPong,
    Workload::Pipeline,
    Workload::FanIn,
    Workload::ReqResp,
];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::PingPong => "ping_pong",
            Workload::Pipeline => "pipeline",
            Workload::FanIn => "fan_in",
            Workload::ReqResp => "req_resp",
        }
    }

    fn parse(s: &str) -> Option<Workload> {
        WORKLOADS.into_iter().find(|w| w.name() == s)
    }

    /// The default scale: round trips, values, values per producer,
    /// requests per client.
    fn default_n(self) -> u64 {
        match self {
            Workload::PingPong => PING_ROUNDS,
            Workload::Pipeline => PIPE_VALUES,
            Workload::FanIn => FAN_VALUES,
            Workload::ReqResp => REQ_PER_CLIENT,
        }
    }

    /// Values through a channel (send to recv) at scale `n`.
    fn messages(self, n: u64) -> u64 {
        match self {
            Workload::PingPong => 2 * n,
            Workload::Pipeline => (PIPE_STAGES - 1) * n,
            Workload::FanIn => FAN_PRODUCERS * n,
            Workload::ReqResp => REQ_PAIRS * 2 * n,
        }
    }

    /// What the root must return at scale `n`.
    fn expected(self, n: u64) -> u64 {
        let tri = |k: u64| k * k.saturating_sub(1) / 2; // 0 + 1 + ... + (k - 1)
        match self {
            // The pinger's sum of the answers v + 1, v < n.
            Workload::PingPong => tri(n) + n,
            // The sink's sum: each value v < n, plus 1 per forwarder.
            Workload::Pipeline => tri(n) + (PIPE_STAGES - 2) * n,
            // The consumer's sum of every value 0..64n.
            Workload::FanIn => tri(FAN_PRODUCERS * n),
            // The clients' sum of 2v + 1 over v < 16n: (16n)².
            Workload::ReqResp => (REQ_PAIRS * n) * (REQ_PAIRS * n),
        }
    }

    /// Kinds of tasks, for the poll counts: index = the `role` given to
    /// [`spawn_task`].
    fn roles(self) -> &'static [&'static str] {
        match self {
            Workload::PingPong => &["pinger", "ponger"],
            Workload::Pipeline => &["source", "forwarder", "sink"],
            Workload::FanIn => &["producer", "consumer"],
            Workload::ReqResp => &["client", "server"],
        }
    }

    /// The root task's future: spawns the workload's tasks on the runtime
    /// it runs on and returns their checksum.
    fn root<F: Family, C: Ctx>(
        self,
        ctx: C,
        probe: Probe,
        n: u64,
    ) -> Pin<Box<dyn Future<Output = u64> + Send>> {
        match self {
            Workload::PingPong => Box::pin(ping_pong::<F, C>(ctx, probe, n)),
            Workload::Pipeline => Box::pin(pipeline::<F, C>(ctx, probe, n)),
            Workload::FanIn => Box::pin(fan_in::<F, C>(ctx, probe, n)),
            Workload::ReqResp => Box::pin(F::req_resp(ctx, probe, n)),
        }
    }
}

// Roles (indices into `Workload::roles`).
const PINGER: usize = 0;
const PONGER: usize = 1;
const SOURCE: usize = 0;
const FORWARDER: usize = 1;
const SINK: usize = 2;
const PRODUCER: usize = 0;
const CONSUMER: usize = 1;
const CLIENT: usize = 0;
const SERVER: usize = 1;

async fn ping_pong<F: Family, C: Ctx>(ctx: C, probe: Probe, n: u64) -> u64 {
    let (ping_tx, mut ping_rx) = F::bounded::<u64>(1);
    let (pong_tx, mut pong_rx) = F::bounded::<u64>(1);
    let ponger = spawn_task(ctx, probe, PONGER, async move {
        let mut count = 0;
        while let Some(v) = F::recv(&mut ping_rx).await {
            F::send(&pong_tx, v + 1).await;
            count += 1;
        }
        count
    });
    let pinger = spawn_task(ctx, probe, PINGER, async move {
        let mut sum = 0;
        for v in 0..n {
            F::send(&ping_tx, v).await;
            let back = F::recv(&mut pong_rx).await.expect("ponger gone");
            assert_eq!(back, v + 1);
            sum += back;
        }
        sum
    });
    let sum = pinger.await.expect("pinger failed");
    assert_eq!(ponger.await.expect("ponger failed"), n);
    sum
}

async fn pipeline<F: Family, C: Ctx>(ctx: C, probe: Probe, n: u64) -> u64 {
    let (first_tx, mut rx) = F::bounded::<u64>(PIPE_CAP);
    for _ in 0..PIPE_STAGES - 2 {
        let (tx, next_rx) = F::bounded::<u64>(PIPE_CAP);
        let mut from = std::mem::replace(&mut rx, next_rx);
        drop(spawn_task(ctx, probe, FORWARDER, async move {
            while let Some(v) = F::recv(&mut from).await {
                F::send(&tx, v + 1).await;
            }
        }));
    }
    let sink = spawn_task(ctx, probe, SINK, async move {
        let (mut sum, mut count) = (0, 0);
        let work = fan_work().1;
        while let Some(v) = F::recv(&mut rx).await {
            if work != 0 {
                spin_work(work, v);
            }
            sum += v;
            count += 1;
        }
        (sum, count)
    });
    drop(spawn_task(ctx, probe, SOURCE, async move {
        for v in 0..n {
            F::send(&first_tx, v).await;
        }
    }));
    let (sum, count) = sink.await.expect("sink failed");
    assert_eq!(count, n);
    sum
}

/// `CHANNELS_WORK=<producer>[,<consumer>]`: the fan-in's compute per value
/// (a mixing loop of that many rounds, ~1-2 ns each) in each producer
/// before each send and in the consumer after each receive, so the fan-in
/// can be measured with tasks that do work (default 0,0: none).
fn fan_work() -> (u64, u64) {
    static WORK: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *WORK.get_or_init(|| {
        let Ok(v) = std::env::var("CHANNELS_WORK") else {
            return (0, 0);
        };
        let bad = || panic!("CHANNELS_WORK={v:?}: expected <producer rounds>[,<consumer rounds>]");
        let mut it = v.split(',').map(|s| s.trim().parse::<u64>());
        let p = it.next().and_then(Result::ok).unwrap_or_else(bad);
        let c = match it.next() {
            None => 0,
            Some(r) => r.unwrap_or_else(|_| bad()),
        };
        if it.next().is_some() {
            bad();
        }
        (p, c)
    })
}

fn spin_work(rounds: u64, seed: u64) {
    let mut x = seed | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x);
}

async fn fan_in<F: Family, C: Ctx>(ctx: C, probe: Probe, n: u64) -> u64 {
    let (tx, mut rx) = F::bounded::<u64>(FAN_CAP);
    let consumer = spawn_task(ctx, probe, CONSUMER, async move {
        let (mut sum, mut count) = (0, 0);
        let work = fan_work().1;
        while let Some(v) = F::recv(&mut rx).await {
            if work != 0 {
                spin_work(work, v);
            }
            sum += v;
            count += 1;
        }
        (sum, count)
    });
    for p in 0..FAN_PRODUCERS {
        let tx = tx.clone();
        drop(spawn_task(ctx, probe, PRODUCER, async move {
            let work = fan_work().0;
            for v in p * n..(p + 1) * n {
                if work != 0 {
                    spin_work(work, v);
                }
                F::send(&tx, v).await;
            }
        }));
    }
    drop(tx);
    let (sum, count) = consumer.await.expect("consumer failed");
    assert_eq!(count, FAN_PRODUCERS * n);
    sum
}

// ---------------------------------------------------------------- tasks

/// Poll counters per role, for `CHANNELS_ONCE`: one line of three per
/// thread slot, so that workers count without sharing a cache line. One
/// counter per role, incremented by every poll on every worker, cost each
/// poll a cache miss on 16 cores (the 16 `req_resp` clients took turns on
/// one line) and inflated the busy time the probe run reports.
#[repr(align(128))]
struct PollSlot([AtomicU64; 3]);

const POLL_SLOTS: usize = 64;
static POLLS: [PollSlot; POLL_SLOTS] =
    [const { PollSlot([const { AtomicU64::new(0) }; 3]) }; POLL_SLOTS];

/// This thread's slot in [`POLLS`] (threads numbered as they first count).
fn poll_slot() -> &'static PollSlot {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Relaxed) as usize % POLL_SLOTS;
    }
    &POLLS[SLOT.with(|s| *s)]
}

/// Polls counted for `role` on every thread.
fn polls_of(role: usize) -> u64 {
    POLLS.iter().map(|s| s.0[role].load(Relaxed)).sum()
}

/// Whether spawned tasks count their polls in [`POLLS`] (a wrapper around
/// the future; criterion runs leave it out).
#[derive(Clone, Copy)]
struct Probe(bool);

/// Spawns `fut` through `ctx`; its output comes back on the receiver
/// (dropped for tasks whose output nobody needs).
fn spawn_task<C: Ctx, T: Send + 'static>(
    ctx: C,
    probe: Probe,
    role: usize,
    fut: impl Future<Output = T> + Send + 'static,
) -> done::Receiver<T> {
    let (tx, rx) = done::channel();
    let task = async move {
        let _ = tx.send(fut.await);
    };
    if probe.0 {
        ctx.spawn_detached(async move {
            let mut task = pin!(task);
            std::future::poll_fn(|cx| {
                poll_slot().0[role].fetch_add(1, Relaxed);
                task.as_mut().poll(cx)
            })
            .await
        });
    } else {
        ctx.spawn_detached(task);
    }
    rx
}

/// One iteration: a root task spawned from `block_on` runs the workload;
/// its checksum is checked.
fn run_once<R: Bench, F: Family>(rt: &R, w: Workload, n: u64, probe: Probe) {
    let root = w.root::<F, R::Ctx>(rt.ctx(), probe, n);
    let got = rt.block_on(rt.spawn(root));
    assert_eq!(got, w.expected(n), "{} on {} channels", w.name(), F::NAME);
}

// ------------------------------------------------------------- criterion

fn group<F: Family>(c: &mut Criterion, w: Workload, workers: usize) {
    let name = format!("channels/{}/{}/{workers}p", w.name(), F::NAME);
    let mut group = c.benchmark_group(&name);
    let n = w.default_n();
    let probe = Probe(false);
    {
        let rt = NumaRt::new(workers);
        bench_with_watchdog(&mut group, &name, "numa_rt", &rt, || {
            run_once::<_, F>(&rt, w, n, probe)
        });
    }
    {
        let rt = Tokio::new(workers);
        bench_with_watchdog(&mut group, &name, "tokio", &rt, || {
            run_once::<_, F>(&rt, w, n, probe)
        });
    }
    {
        let rt = AsyncExec::new(workers);
        bench_with_watchdog(&mut group, &name, "async_executor", &rt, || {
            run_once::<_, F>(&rt, w, n, probe)
        });
    }
    group.finish();
}

fn list_env(var: &str, default: &str) -> Vec<String> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn worker_counts() -> Vec<usize> {
    list_env("BENCH_WORKERS", "1,2")
        .iter()
        .map(|w| match w.parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => n,
            _ => panic!("BENCH_WORKERS: {w:?} is not a worker count in 1..=1024"),
        })
        .collect()
}

fn families() -> Vec<String> {
    let fams = list_env("BENCH_CHANNELS", "tokio,async");
    for f in &fams {
        assert!(
            f == "tokio" || f == "async",
            "BENCH_CHANNELS: {f:?} is not a channel family (tokio, async)"
        );
    }
    fams
}

fn benches(c: &mut Criterion) {
    let families = families();
    for workers in worker_counts() {
        for w in WORKLOADS {
            for f in &families {
                match f.as_str() {
                    "tokio" => group::<TokioChans>(c, w, workers),
                    _ => group::<AsyncChans>(c, w, workers),
                }
            }
        }
    }
}

// ------------------------------------------------------------------ once

/// A runtime's scheduler counters (monotonic), by name.
trait Counters: Bench {
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// Counter names of each P's busy time.
const P_BUSY: [&str; 16] = [
    "p0_busy_us",
    "p1_busy_us",
    "p2_busy_us",
    "p3_busy_us",
    "p4_busy_us",
    "p5_busy_us",
    "p6_busy_us",
    "p7_busy_us",
    "p8_busy_us",
    "p9_busy_us",
    "p10_busy_us",
    "p11_busy_us",
    "p12_busy_us",
    "p13_busy_us",
    "p14_busy_us",
    "p15_busy_us",
];

impl Counters for NumaRt {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let procs = self.runtime().metrics().procs();
        let sum = |f: fn(&numa_rt::metrics::ProcMetrics) -> u64| procs.iter().map(f).sum::<u64>();
        let mut out = vec![
            ("polls", sum(|p| p.tasks_polled)),
            ("runnext_polls", sum(|p| p.runnext_polls)),
            ("global_queue_polls", sum(|p| p.global_queue_polls)),
            ("tasks_stolen", sum(|p| p.tasks_stolen)),
            ("steals", sum(|p| p.local_steals + p.remote_steals)),
            ("migrated_polls", sum(|p| p.migrated_polls)),
            ("parks", sum(|p| p.parks)),
            ("unparks", sum(|p| p.unparks)),
            ("spurious_wakeups", sum(|p| p.spurious_wakeups)),
            ("forced_yields", sum(|p| p.budget_forced_yields)),
            ("long_poll_offers", sum(|p| p.long_poll_offers)),
            ("batch_queued", sum(|p| p.batch_queued)),
            ("batch_polls", sum(|p| p.batch_polls)),
            ("batch_splits", sum(|p| p.batch_splits)),
            ("batch_hub_polls", sum(|p| p.batch_hub_polls)),
            ("batch_keeps", sum(|p| p.batch_keeps)),
            ("batch_spreads", sum(|p| p.batch_spreads)),
            ("batch_hub_homes", sum(|p| p.batch_hub_homes)),
            (
                "batch_last_work_per_wake_ns",
                procs
                    .iter()
                    .map(|p| p.batch_last_work_per_wake.as_nanos() as u64)
                    .max()
                    .unwrap_or(0),
            ),
            ("busy_us", sum(|p| p.busy_duration.as_micros() as u64)),
        ];
        // Each P's busy time (up to 16 P's): how evenly the work spread.
        for (i, p) in procs.iter().enumerate().take(16) {
            out.push((P_BUSY[i], p.busy_duration.as_micros() as u64));
        }
        out
    }
}

impl Counters for Tokio {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let m = self.block_on(async { tokio::runtime::Handle::current().metrics() });
        let sum = |f: &dyn Fn(usize) -> u64| (0..m.num_workers()).map(f).sum::<u64>();
        #[allow(unused_mut)]
        let mut counters = vec![
            ("parks", sum(&|w| m.worker_park_count(w))),
            ("park_unparks", sum(&|w| m.worker_park_unpark_count(w))),
        ];
        // tokio's other counters exist only in a build with
        // RUSTFLAGS="--cfg tokio_unstable" (use another CARGO_TARGET_DIR: the
        // flag rebuilds every dependency).
        #[cfg(tokio_unstable)]
        counters.extend([
            ("polls", sum(&|w| m.worker_poll_count(w))),
            ("local_sched", sum(&|w| m.worker_local_schedule_count(w))),
            ("remote_schedules", m.remote_schedule_count()),
            ("tasks_stolen", sum(&|w| m.worker_steal_count(w))),
            ("steals", sum(&|w| m.worker_steal_operations(w))),
            ("overflows", sum(&|w| m.worker_overflow_count(w))),
            ("noops", sum(&|w| m.worker_noop_count(w))),
            ("forced_yields", m.budget_forced_yield_count()),
        ]);
        counters
    }
}

impl Counters for AsyncExec {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// `CHANNELS_ONCE=<workload>,<family>,<runtime>,<workers>[,<n>[,<iters>]]`.
fn once(spec: &str) {
    let usage = "CHANNELS_ONCE=<ping_pong|pipeline|fan_in|req_resp>,<tokio|async>,\
                 <numa_rt|tokio|async_executor>,<workers>[,<n>[,<iters>]]";
    let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
    if !(4..=6).contains(&parts.len()) {
        panic!("{usage}: got {spec:?}");
    }
    let w = Workload::parse(parts[0]).unwrap_or_else(|| panic!("{usage}: workload {:?}", parts[0]));
    let number = |i: usize, default: u64| -> u64 {
        parts.get(i).filter(|s| !s.is_empty()).map_or(default, |s| {
            s.parse()
                .unwrap_or_else(|_| panic!("{usage}: {s:?} is not a number"))
        })
    };
    let workers = number(3, 0) as usize;
    assert!(workers >= 1, "{usage}: workers must be at least 1");
    let n = number(4, w.default_n());
    let iters = number(5, 1);
    let probe = Probe(std::env::var("CHANNELS_PROBE").map_or(true, |v| v != "0"));
    let fam = parts[1];
    let o = Once {
        rt_name: parts[2],
        workers,
        w,
        n,
        iters,
        probe,
    };
    macro_rules! on {
        ($rt:expr) => {
            match fam {
                "tokio" => once_on::<_, TokioChans>($rt, o),
                "async" => once_on::<_, AsyncChans>($rt, o),
                other => panic!("{usage}: family {other:?}"),
            }
        };
    }
    match parts[2] {
        "numa_rt" => on!(NumaRt::new(workers)),
        "tokio" => on!(Tokio::new(workers)),
        "async_executor" => on!(AsyncExec::new(workers)),
        other => panic!("{usage}: runtime {other:?}"),
    }
}

struct Once<'a> {
    rt_name: &'a str,
    workers: usize,
    w: Workload,
    n: u64,
    iters: u64,
    probe: Probe,
}

fn once_on<R: Counters, F: Family>(rt: R, o: Once<'_>) {
    let Once {
        rt_name,
        workers,
        w,
        n,
        iters,
        probe,
    } = o;
    let before = rt.counters();
    for p in POLLS.iter().flat_map(|s| &s.0) {
        p.store(0, Relaxed);
    }
    let start = Instant::now();
    for _ in 0..iters {
        run_once::<R, F>(&rt, w, n, probe);
    }
    let wall = start.elapsed();
    let after = rt.counters();
    let msgs = (w.messages(n) * iters).max(1) as f64;
    println!(
        "{} {} {} workers={} n={n} iters={iters} messages={} wall={:.3}ms ({:.1} ns/message)",
        w.name(),
        F::NAME,
        rt_name,
        workers,
        w.messages(n) * iters,
        wall.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e9 / msgs,
    );
    if probe.0 {
        let per_role: Vec<String> = w
            .roles()
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{r}={:.4}", polls_of(i) as f64 / msgs))
            .collect();
        let total: u64 = (0..3).map(polls_of).sum();
        println!(
            "  task polls per message: {} (all workload tasks {:.4})",
            per_role.join(" "),
            total as f64 / msgs
        );
    }
    if !after.is_empty() {
        let line: Vec<String> = before
            .iter()
            .zip(&after)
            .map(|((name, b), (_, a))| format!("{name}={:.4}", (a - b) as f64 / msgs))
            .collect();
        println!("  runtime counters per message: {}", line.join(" "));
        let raw: Vec<String> = before
            .iter()
            .zip(&after)
            .map(|((name, b), (_, a))| format!("{name}={}", a - b))
            .collect();
        println!("  runtime counters: {}", raw.join(" "));
    }
}

fn main() {
    if let Ok(spec) = std::env::var("CHANNELS_ONCE") {
        once(&spec);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}

//! # numa_rt
//!
//! An async runtime that schedules Rust futures the way Go's runtime schedules
//! goroutines — G's (tasks), P's (processors), M's (threads) — and goes where
//! Go never went: Dmitry Vyukov's NUMA-aware design, with a netpoller and
//! timers per processor, per-node run queues and thread pools, and stealing
//! that prefers the local node.
//!
//! ```
//! #[numa_rt::main(max_procs = 2)]
//! async fn main() {
//!     let handle = numa_rt::spawn(async { 6 * 7 });
//!     assert_eq!(handle.await.unwrap(), 42);
//!
//!     // !Send work stays on this thread.
//!     let rc = std::rc::Rc::new(5);
//!     let local = numa_rt::spawn_local(async move { *rc + 1 });
//!     assert_eq!(local.await.unwrap(), 6);
//!
//!     // Blocking work runs on threads that hold no processor.
//!     let sum = numa_rt::spawn_blocking(|| (1..=10u64).sum::<u64>()).await.unwrap();
//!     assert_eq!(sum, 55);
//! }
//! ```
//!
//! | Go | numa_rt |
//! |----|---------|
//! | `go f()` | [`spawn`] |
//! | `runtime.LockOSThread` | [`spawn_local`] |
//! | a blocking syscall (handoffp) | [`block_in_place`], [`spawn_blocking`] |
//! | `runtime.Gosched` | [`task::yield_now`] |
//! | GOMAXPROCS | [`Builder::max_procs`], `NUMA_RT_MAXPROCS` |
//! | `GODEBUG=schedtrace` | [`Runtime::metrics`] (its `Display`) |
//!
//! The design is written down in `docs/architecture.md`.
//!
//! Features: `hyper` (the hyper 1.x adapter, `numa_rt::hyper`);
//! `tokio-compat` (`Builder::enable_tokio_compat`: tokio-bound crates such as
//! reqwest or `tokio::time` work inside tasks, served by a one-thread tokio
//! runtime; see docs/guide.md, "Running tokio-bound crates").

#![warn(missing_docs)]

pub use numa_rt_executor::task::spawn_near;
pub use numa_rt_executor::{
    block_in_place, spawn, spawn_blocking, spawn_local, AbortHandle, Builder, DeadlockMode,
    EnterGuard, Handle, JoinError, JoinHandle, JoinSet, Placement, Rule, Runtime, TryCurrentError,
    MAXPROCS_ENV, PLACEMENT_ENV,
};
/// Runs `async fn main` on a new runtime: tokio's `#[tokio::main]`
/// arguments (`flavor`, `worker_threads`, `start_paused`) and numa_rt's
/// (`max_procs`, `topology`, `global_queue_interval`, `deadlock`,
/// `tokio_compat`, `crate`). A runtime that cannot be built (say, a bad
/// `NUMA_RT_MAXPROCS`) panics with the error's message.
///
/// ```
/// #[numa_rt::main(max_procs = 2)]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let n = numa_rt::spawn(async { 6 * 7 }).await?;
///     assert_eq!(n, 42);
///     Ok(())
/// }
/// ```
pub use numa_rt_macros::main;

/// Runs an `async fn` test on a runtime of its own: by default one
/// processor with the body a task on it (tokio's `current_thread`), with
/// the deadlock diagnostic set to panic, so a test whose tasks all wait on
/// each other fails instead of hanging.
///
/// ```
/// #[numa_rt::test(start_paused = true)]
/// async fn sleeps_in_no_time() {
///     let start = numa_rt::time::Instant::now();
///     numa_rt::time::sleep(std::time::Duration::from_secs(3600)).await;
///     assert!(start.elapsed() >= std::time::Duration::from_secs(3600));
/// }
/// # fn main() {}
/// ```
pub use numa_rt_macros::test;

/// tokio's `select!`: waits on several branches at once, runs the first to
/// complete and drops the others (branches are polled in random order
/// unless `biased;`). tokio's own macro, re-exported: it needs no tokio
/// runtime. Everything tokio documents for it holds, including its
/// cancellation-safety notes.
///
/// ```
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// use numa_rt::time::{sleep, Duration};
/// let (tx, mut rx) = numa_rt::sync::mpsc::channel::<u32>(1);
/// numa_rt::spawn(async move { tx.send(7).await.unwrap() });
/// let got = numa_rt::select! {
///     Some(v) = rx.recv() => v,
///     _ = sleep(Duration::from_secs(60)) => 0,
/// };
/// assert_eq!(got, 7);
/// # }
/// ```
pub use tokio::select;

/// tokio's `join!` (runs the futures concurrently in the calling task and
/// returns all their outputs) and `try_join!` (returns early with the
/// first `Err`), re-exported.
///
/// ```
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// let (a, b) = numa_rt::join!(async { 1 }, async { "two" });
/// assert_eq!((a, b), (1, "two"));
/// let r: Result<(u8, u8), &str> = numa_rt::try_join!(async { Ok(1) }, async { Err("no") });
/// assert_eq!(r, Err("no"));
/// # }
/// ```
pub use tokio::{join, try_join};

/// tokio's `pin!`: pins a future (or several) to the stack.
pub use tokio::pin;

/// `#[numa_rt::main(tokio_compat)]` / `#[numa_rt::test(tokio_compat)]`:
/// switches the side tokio runtime on (`Builder::enable_tokio_compat`).
#[doc(hidden)]
#[cfg(feature = "tokio-compat")]
#[macro_export]
macro_rules! __tokio_compat {
    ($builder:ident) => {
        $builder.enable_tokio_compat();
    };
}

/// Without the `tokio-compat` feature, `tokio_compat` in the attribute is a
/// compile error that names the feature (rather than "no method named
/// `enable_tokio_compat`").
#[doc(hidden)]
#[cfg(not(feature = "tokio-compat"))]
#[macro_export]
macro_rules! __tokio_compat {
    ($builder:ident) => {
        ::core::compile_error!(
            "`tokio_compat` needs numa_rt's `tokio-compat` feature: \
             numa_rt = { version = \"...\", features = [\"tokio-compat\"] } in Cargo.toml"
        );
    };
}

/// Tasks: handles, sets, ids, errors, yielding (tokio's `task` API).
///
/// ```
/// use numa_rt::task::{self, JoinSet};
///
/// #[numa_rt::main(max_procs = 2)]
/// async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let mut set = JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { (task::id(), i * i) });
///     }
///     let mut sum = 0;
///     while let Some(res) = set.join_next().await {
///         let (_id, sq) = res?; // JoinError: Error + Send + Sync
///         sum += sq;
///     }
///     assert_eq!(sum, 285);
///
///     let h = numa_rt::spawn(std::future::pending::<()>());
///     let abort = h.abort_handle(); // Send + Sync + Clone
///     abort.abort();
///     // Resolves after the task's future has been dropped.
///     assert!(h.await.unwrap_err().is_cancelled());
///     Ok(())
/// }
/// ```
pub mod task {
    pub use numa_rt_executor::task::{
        id, spawn_near, try_id, yield_now, AbortHandle, Id, JoinError, JoinHandle, JoinSet,
        LocalEnterGuard, LocalSet, Near, TaskDump, TaskInfo, TaskState,
    };
    pub use numa_rt_executor::{block_in_place, spawn, spawn_blocking, spawn_local};
    pub use numa_rt_reactor::coop::{consume_budget, unconstrained, Unconstrained};

    pub use crate::task_local::{AccessError, LocalKey};

    pub mod coop;

    /// The futures of this module's functions, at tokio's path.
    pub mod futures {
        pub use crate::task_local::TaskLocalFuture;
    }
}

mod task_local;

/// Runtime metrics (per processor, per node, runtime-wide).
pub mod metrics {
    pub use numa_rt_executor::{
        HistogramConfig, Instrumented, Intervals, NodeMetrics, ProcMetrics, RuntimeMetrics,
        TaskMetrics, TaskMonitor,
    };
}

/// NUMA topology and placement.
///
/// Each node has its own run queue and thread pool, and its processors
/// steal from their own node first. [`spawn_on`](numa::spawn_on) starts a
/// task on a node; [`current_node`](numa::current_node) says where the
/// caller runs. `NUMA_RT_TOPOLOGY` (or [`Builder::topology`]) replaces the
/// machine's topology, for instance to try two nodes on a one-node machine:
///
/// ```
/// use numa_rt::numa::{current_node, spawn_on, NodeId, Topology};
///
/// // Two simulated nodes over the CPUs this process may use (one on a
/// // one-CPU machine), as NUMA_RT_TOPOLOGY="0;1" would give on two CPUs.
/// let topology = Topology::split(2).or_else(|_| Topology::split(1)).unwrap();
/// let rt = numa_rt::Builder::new()
///     .max_procs(2)
///     .topology(topology)
///     .build()
///     .unwrap();
/// rt.block_on(async {
///     let nodes = numa_rt::Handle::current().topology().nodes().len();
///     for n in 0..nodes {
///         // Starts on node n's queue; another node takes it only by stealing.
///         let ran_on = spawn_on(NodeId::from(n), async { current_node() }).await.unwrap();
///         assert!(ran_on.is_some());
///     }
/// });
/// ```
pub mod numa {
    pub use numa_rt_executor::numa::{current_node, spawn_on};
    pub use numa_rt_numa::{CpuSet, Node, NodeId, Topology, TopologyError};
}

/// Timers: each lives on the processor where it was created.
///
/// The names are tokio's: [`Instant`](time::Instant) (whose `now()` reads
/// the runtime's clock), [`Duration`](time::Duration), [`sleep`](time::sleep),
/// [`sleep_until`](time::sleep_until), [`timeout`](time::timeout),
/// [`timeout_at`](time::timeout_at), [`interval`](time::interval) with
/// [`MissedTickBehavior`](time::MissedTickBehavior).
///
/// Tests can pause the runtime's clock ([`pause`](time::pause),
/// [`advance`](time::advance), [`resume`](time::resume), or
/// `#[numa_rt::test(start_paused = true)]`): while it is paused and every
/// task is idle, it jumps to the next timer at once, so a test of timer code
/// runs in no time. `time::Instant::now()` (and [`now`](time::now)) read the
/// paused clock; `std::time::Instant::now()` reads the real one.
///
/// ```
/// use numa_rt::time::{self, Duration, Instant};
///
/// // `#[numa_rt::test(start_paused = true)]` in a test.
/// #[numa_rt::main(start_paused = true, max_procs = 2)]
/// async fn main() {
///     let start = Instant::now();
///     let wall = std::time::Instant::now();
///     let mut delay = Duration::from_secs(1);
///     for _ in 0..10 {
///         time::sleep(delay).await; // 1 + 2 + ... + 512 s of paused time
///         delay *= 2;
///     }
///     assert_eq!(start.elapsed(), Duration::from_secs(1023));
///     assert!(wall.elapsed() < Duration::from_secs(30));
/// }
/// ```
pub mod time {
    pub use numa_rt_reactor::time::*;
}

pub mod net;

/// Signals (tokio's `signal` module): [`ctrl_c`](signal::ctrl_c) and
/// [`unix::signal`](signal::unix::signal), on numa_rt's own pollers (a
/// self-pipe written by the handler; the design is in
/// `numa_rt_reactor::signal`).
///
/// ```no_run
/// use numa_rt::signal::unix::{signal, SignalKind};
///
/// #[numa_rt::main]
/// async fn main() -> std::io::Result<()> {
///     let mut term = signal(SignalKind::terminate())?;
///     numa_rt::spawn(async move {
///         numa_rt::signal::ctrl_c().await.unwrap();
///         println!("ctrl-c");
///     });
///     term.recv().await;
///     Ok(())
/// }
/// ```
pub mod signal {
    pub use numa_rt_reactor::signal::*;
}

pub mod fs;

#[cfg(feature = "axum")]
pub mod axum;
#[cfg(feature = "hyper")]
pub mod serve;
#[cfg(feature = "hyper")]
pub use serve::serve;
pub mod io;
pub mod process;
pub mod runtime;
pub mod sync;
#[cfg(feature = "tonic")]
pub mod tonic;

/// The cooperative budget (128 operations per task poll).
pub mod coop {
    pub use numa_rt_reactor::coop::{
        consume_budget, has_budget_remaining, poll_proceed, unconstrained, Unconstrained,
    };
}

#[cfg(feature = "hyper")]
pub mod hyper;

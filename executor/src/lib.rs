//! numa_rt's scheduler: Go's G/P/M model for Rust futures.
//!
//! | Go | numa_rt | here |
//! |----|---------|------|
//! | G (goroutine) | a task: a future wrapped by async-task | [`task`] |
//! | P (processor) | the right to run tasks: a local run queue, `runnext`, a reactor | `scheduler::processor` |
//! | M (machine) | an OS thread; runs tasks only while holding a P | `scheduler::machine` |
//! | `runq`, `runnext` | bounded ring + LIFO slot | `queue` |
//! | `sched.runq` | one global queue per NUMA node | `scheduler::inject` |
//! | `pidle`, `nmspinning`, `wakep` | idle P's and spinning M's | `scheduler::idle` |
//! | `handoffp` | `block_in_place` | [`block_in_place`] |
//! | GOMAXPROCS | `max_procs` / `NUMA_RT_MAXPROCS` | [`Builder`] |
//!
//! docs/architecture.md (at the repository root) explains the scheduling
//! loop, the park/unpark protocol and its barrier, the invariants, and the
//! designs that were rejected. Users normally reach this crate through the
//! `numa_rt` facade.
//!
//! ```
//! let rt = numa_rt_executor::Runtime::new().unwrap();
//! let out = rt.block_on(async {
//!     let h = numa_rt_executor::spawn(async { 6 * 7 });
//!     h.await.unwrap()
//! });
//! assert_eq!(out, 42);
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod blocking;
mod builder;
mod config;
mod counters;
mod histogram;
mod local_runtime;
mod loom;
mod metrics;
pub mod numa;
mod queue;
mod runtime;
mod runtime_id;
mod scheduler;
mod spawn;
mod sysmon;
pub mod task;
#[cfg(feature = "tokio-compat")]
mod tokio_compat;
mod tuning;

pub use blocking::{block_in_place, resolve_names_on_blocking_pool};
pub use builder::{Builder, MAXPROCS_ENV};
pub use config::{DeadlockMode, DEADLOCK_ENV, RETAKE_ENV, SCHEDTRACE_ENV, STALL_ENV};
pub use histogram::HistogramConfig;
pub use local_runtime::{LocalOptions, LocalRuntime};
pub use metrics::{
    Instrumented, Intervals, NodeMetrics, ProcMetrics, RuntimeMetrics, TaskMetrics, TaskMonitor,
};
pub use runtime::{worker_index, Handle, Id as RuntimeId, Runtime, RuntimeFlavor, TryCurrentError};
pub use scheduler::context::EnterGuard;
pub use scheduler::placement::{Placement, Rule, PLACEMENT_ENV};
pub use spawn::{spawn, spawn_blocking, spawn_local, spawn_near};
pub use task::{AbortHandle, JoinError, JoinHandle, JoinSet};

//! The scheduler: processors (P), machines (M) and the policy that decides
//! where a runnable task (G) goes.
//!
//! - `build`: building the shared state; `spawn`: where a new task goes;
//!   `wake`: where a woken task goes and who is woken for it (Go's
//!   `wakep`), and `any_work`; `shutdown`: stopping and draining.
//! - [`processor`]: a P's shared face (what thieves and wakers see) and its
//!   `Core` (what only the M holding it touches).
//! - [`machine`]: an M's shared face (its node, pinned queue, seat, hand-off
//!   slot) and the set of M threads.
//! - [`lifecycle`]: an M's life: its thread, node binding, hand-off of a P,
//!   the node's pool of M's without a P.
//! - [`worker`]: the scheduling loop of an M holding a P: find a task, poll
//!   it, steal (`worker/thief.rs`), park (`worker/park.rs`).
//! - `steal`: the steal order, written once (`Shared::steal_walk`): the
//!   thief takes along it and the park re-check looks along it.
//! - [`seat`]: where a P's core sits while its M polls or is in the driver,
//!   and sysmon's retake of it.
//! - [`idle`]: idle P's and spinning M's.
//! - [`inject`]: node run queues and P inboxes.
//! - [`local`]: each M's (and `block_on`'s) queue of pinned tasks.
//! - [`context`]: the thread-local runtime, M and P of the current thread.
//! - [`thread_life`]: what every runtime thread does first and last.
//! - [`blocking_pool`]: the blocking pool behind `spawn_blocking`.
//!
//! The scheduler is the executor's ground floor: it reads `Config` and
//! writes `counters`, both below it; `Runtime`, `Handle`, `Builder` and the
//! metrics views sit above and only look down.
//!
//! docs/architecture.md walks through the whole loop; park and wake, which
//! span this module and the reactor's drivers, are its "Idle P's and parked
//! M's: the park/unpark protocol", and comments marked "(barrier)" point at
//! that section's "Why no wake-up is lost".

pub(crate) mod blocking_pool;
mod build;
pub(crate) mod context;
pub(crate) mod idle;
pub(crate) mod inject;
pub(crate) mod lifecycle;
pub(crate) mod local;
pub(crate) mod machine;
pub(crate) mod placement;
pub(crate) mod processor;
pub(crate) mod seat;
mod shutdown;
mod spawn;
mod steal;
pub(crate) mod thread_life;
mod wake;
pub(crate) mod worker;

use crate::config::Config;
use crate::task::registry::Registry;
use blocking_pool::BlockingPool;
use idle::Idle;
use inject::Inject;
use machine::Machine;
use numa_rt_numa::Topology;
use numa_rt_reactor::Reactor;
use processor::{Core, Processor};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};

/// Everything the processors, machines and handles of one runtime share.
pub(crate) struct Shared {
    pub(crate) procs: Box<[Processor]>,
    pub(crate) nodes: Box<[Node]>,
    pub(crate) idle: Idle,
    /// The placement policy: its rules and their state (`placement`).
    pub(crate) policy: placement::Policy,
    pub(crate) config: Config,
    pub(crate) topology: Topology,
    pub(crate) reactor: Reactor,
    pub(crate) blocking: BlockingPool,
    pub(crate) machines: machine::Threads,
    /// Set once by shutdown (Release), read by every loop and schedule call
    /// (Acquire) so a task scheduled after it is dropped, not queued.
    shutdown: AtomicBool,
    /// Round-robin cursor for root tasks and for outside spawns.
    rr: AtomicUsize,
    /// P's allowed to take work: all of them, unless sysmon's re-read of
    /// the CPU quota found it shrunk (`Config::procs_source`); P's from
    /// this index up retire. Written by the monitor thread only; Relaxed
    /// (see `set_active_procs` for how a change reaches the M's).
    active_procs: AtomicUsize,
    /// The node this process starts on (random per process, Vyukov).
    pub(crate) start_node: usize,
    /// Every live `Send` task, so shutdown can drop every pending future.
    /// Declared after `procs`, `nodes` and `machines` on purpose: a task
    /// not yet polled to `Pending` holds no count of this `Arc` (see
    /// `registry`, "Who keeps a registry alive"), so any such task still
    /// queued in them when this drops (none after shutdown's drain) must be
    /// dropped first, while the registry its harness updates exists.
    pub(crate) tasks: Arc<Registry>,
    /// When the runtime was built (the denominator of busy ratios).
    pub(crate) started: std::time::Instant,
    /// The `block_on` calls in progress, for the deadlock diagnostic.
    pub(crate) block_ons: BlockOns,
    /// Closures running in `block_in_place`, and polls whose P sysmon
    /// retook (`Machine::retaken`): their task runs on an M without a P,
    /// so every P may be idle meanwhile. sysmon neither diagnoses a
    /// deadlock nor auto-advances paused time while one runs.
    /// Relaxed, like `BlockOns`' counters.
    pub(crate) in_place: AtomicUsize,
    /// The registries of the pinned (`spawn_local`) tasks of every M and
    /// `block_on`, for the task dump; dead ones are pruned as new ones come.
    pub(crate) local_registries: Mutex<Vec<std::sync::Weak<Registry>>>,
    /// Why retake is off although configured (`membarrier` unavailable;
    /// see `seat`), for `RuntimeMetrics::retake_unavailable`.
    pub(crate) retake_unavailable: Option<String>,
    /// sysmon's round (made by the caller of [`Shared::build`]: sysmon sits
    /// above the scheduler and reads it); the monitor thread holds it
    /// weakly, this keeps it alive.
    sysmon: std::sync::OnceLock<Arc<dyn numa_rt_reactor::SysmonHook>>,
    /// The side tokio runtime whose context every thread of this runtime
    /// enters (`Builder::enable_tokio_compat`); stopped by shutdown.
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio: Option<crate::tokio_compat::SideRuntime>,
}

/// The `block_on` calls of a runtime: how many run, how many are parked
/// waiting for a wake-up, and a way to make them fail (the deadlock
/// diagnostic's `panic` mode).
#[derive(Default)]
pub(crate) struct BlockOns {
    /// Relaxed counters: sysmon reads them only after a whole grace period
    /// in which no M woke, and re-checks `polls` for progress.
    pub(crate) running: AtomicUsize,
    pub(crate) parked: AtomicUsize,
    /// Polls of `block_on` futures: progress the diagnostic must not miss.
    pub(crate) polls: std::sync::atomic::AtomicU64,
    /// The threads parked in a `block_on`, by a key of their own.
    threads: Mutex<Vec<(usize, std::thread::Thread)>>,
    next_key: AtomicUsize,
    /// Set by `fail_all`: the `block_on`s (by key) that must panic, and
    /// with what.
    failed: Mutex<Vec<(usize, String)>>,
}

impl BlockOns {
    /// Registers the calling thread's `block_on`; returns its key.
    pub(crate) fn enter(&self) -> usize {
        let key = self.next_key.fetch_add(1, Relaxed);
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key, std::thread::current()));
        self.running.fetch_add(1, Relaxed);
        key
    }

    pub(crate) fn leave(&self, key: usize) {
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(k, _)| *k != key);
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(k, _)| *k != key);
        self.running.fetch_sub(1, Relaxed);
    }

    /// The diagnostic the `block_on` with `key` must fail with, if any
    /// (taken: it fails once).
    pub(crate) fn failure(&self, key: usize) -> Option<String> {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        let i = failed.iter().position(|(k, _)| *k == key)?;
        Some(failed.swap_remove(i).1)
    }

    /// Makes every `block_on` in progress panic with `msg` (it wakes them).
    pub(crate) fn fail_all(&self, msg: String) {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        for (key, t) in threads.iter() {
            failed.push((*key, msg.clone()));
            t.unpark();
        }
    }
}

/// Per NUMA node state.
pub(crate) struct Node {
    /// The node's global run queue.
    pub(crate) inject: Inject,
    /// The P's of this node: a contiguous range of indices.
    pub(crate) procs: Range<usize>,
    /// Other nodes, nearest first (distance order), for remote stealing.
    pub(crate) remote_order: Vec<usize>,
    /// Idle M's of this node with no P (the node's M pool).
    pub(crate) idle_machines: Mutex<Vec<Arc<Machine>>>,
    /// The node whose queue serves work aimed at this one: itself, or the
    /// nearest node with P's when `max_procs` left this node without any.
    pub(crate) served_by: usize,
}

impl Shared {
    /// Lists a pinned queue's registry for the task dump.
    pub(crate) fn register_local(&self, registry: &Arc<Registry>) {
        let mut all = self
            .local_registries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(registry));
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    pub(crate) fn nprocs(&self) -> usize {
        self.procs.len()
    }

    /// P's allowed to take work now (all, unless the CPU quota shrank).
    pub(crate) fn active_procs(&self) -> usize {
        self.active_procs.load(Relaxed)
    }

    /// sysmon's quota re-read: P's `n..` retire, P's below `n` work.
    /// A running M sees the change at its next `event_interval` tick or
    /// when it runs out of work; an idle or retired one is woken here
    /// (`take_specific` reaches both, under the idle lock, after the store:
    /// an M that retires later reads the new count after taking that lock).
    pub(crate) fn set_active_procs(&self, n: usize) {
        let n = n.clamp(1, self.nprocs());
        let old = self.active_procs.swap(n, Relaxed);
        for p in n.min(old)..n.max(old) {
            if self.idle.take_specific(p) {
                self.unpark(p);
            }
        }
    }

    /// The runtime's busy time so far (ns): every P's flushed time and open
    /// busy stretch (a clock read and two loads per P; the placement
    /// policy's hub measurement reads it when a measurement begins or ends).
    pub(crate) fn busy_time(&self) -> u64 {
        let now = crate::task::epoch_ns(std::time::Instant::now());
        self.procs
            .iter()
            .map(|p| p.metrics.busy_now(now))
            .sum::<u64>()
    }
}

/// Convenience for the `Core` type's users.
pub(crate) type BoxCore = Box<Core>;

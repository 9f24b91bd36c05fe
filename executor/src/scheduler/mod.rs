//! The scheduler: processors (P), machines (M) and the policy that decides
//! where a runnable task (G) goes.
//!
//! - [`processor`]: a P's shared face (what thieves and wakers see) and its
//!   `Core` (what only the M holding it touches).
//! - [`machine`]: an M's shared face (its node, pinned queue, seat, hand-off
//!   slot) and the set of M threads.
//! - [`lifecycle`]: an M's life: its thread, node binding, hand-off of a P,
//!   the node's pool of M's without a P.
//! - [`worker`]: the scheduling loop of an M holding a P: find a task, poll
//!   it, park.
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
pub(crate) mod context;
pub(crate) mod idle;
pub(crate) mod inject;
pub(crate) mod lifecycle;
pub(crate) mod local;
pub(crate) mod machine;
pub(crate) mod placement;
pub(crate) mod processor;
pub(crate) mod seat;
pub(crate) mod thread_life;
pub(crate) mod worker;

use crate::config::Config;
use crate::task::registry::Registry;
use crate::task::{self, JoinHandle, Runnable};
use blocking_pool::BlockingPool;
use idle::Idle;
use inject::Inject;
use machine::Machine;
use numa_rt_numa::Topology;
use numa_rt_reactor::Reactor;
use placement::Look;
use processor::{Core, Processor};
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};

/// Where a new task goes (see [`Shared::spawn_placed`]).
enum Place {
    /// [`Shared::place_new`]'s rules.
    Default,
    /// A node's queue (`spawn_on`).
    Node(usize),
    /// Beside another task (`spawn_near`).
    Near(task::Anchor),
}

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
    /// Closures running in `block_in_place`: their task runs on an M that
    /// gave its P away, so every P may be idle meanwhile. sysmon neither
    /// diagnoses a deadlock nor auto-advances paused time while one runs.
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
    pub(crate) fn build(
        mut config: Config,
        topology: Topology,
        node_of_p: Vec<usize>,
        start_node: usize,
        sysmon: impl FnOnce(std::sync::Weak<Shared>) -> Arc<dyn numa_rt_reactor::SysmonHook>,
    ) -> std::io::Result<Arc<Shared>> {
        // Retake needs membarrier (see `seat`); without it, it is off and
        // the reason is told once per process, never a failure.
        let mut retake_unavailable = None;
        if config.retake_threshold.is_some() {
            if let Err(why) = seat::register() {
                static TOLD: AtomicBool = AtomicBool::new(false);
                if !TOLD.swap(true, Relaxed) {
                    eprintln!(
                        "numa_rt: sysmon's retake is off: {why}; a task that blocks its thread \
                         keeps its processor's other tasks waiting"
                    );
                }
                config.retake_threshold = None;
                retake_unavailable = Some(why);
            }
        }
        let nprocs = node_of_p.len();
        let nnodes = topology.nodes().len();
        // Idle P's help (drain the pollers of) busy P's of their own node only.
        let reactor = Reactor::with_nodes_and_events(&node_of_p, config.io_events)?;
        let mut cores = Vec::with_capacity(nprocs);
        let mut procs = Vec::with_capacity(nprocs);
        for (i, &node) in node_of_p.iter().enumerate() {
            let (p, core) =
                Processor::new(i, node, reactor.driver(i), config.poll_histogram.as_ref());
            procs.push(p);
            cores.push(core);
        }
        let nodes = (0..nnodes)
            .map(|n| {
                let start = node_of_p.iter().position(|&k| k == n).unwrap_or(nprocs);
                let len = node_of_p.iter().filter(|&&k| k == n).count();
                let dist = topology.nodes()[n].distances().to_vec();
                let mut remote_order: Vec<usize> = (0..nnodes).filter(|&k| k != n).collect();
                remote_order.sort_by_key(|&k| dist.get(k).copied().unwrap_or(u32::MAX));
                let served_by = if len > 0 {
                    n
                } else {
                    remote_order
                        .iter()
                        .copied()
                        .find(|&k| node_of_p.contains(&k))
                        .unwrap_or(0)
                };
                Node {
                    inject: Inject::new(),
                    procs: start..start + len,
                    remote_order,
                    idle_machines: Mutex::new(Vec::new()),
                    served_by,
                }
            })
            .collect();
        let blocking = BlockingPool::new(&config);
        // Before the M's, which enter its context when they start. A later
        // failure drops `shared`, and with it this (`SideRuntime::drop`).
        #[cfg(feature = "tokio-compat")]
        let tokio = match config.tokio_compat {
            true => Some(crate::tokio_compat::SideRuntime::start(
                config.tokio_compat_workers,
            )?),
            false => None,
        };
        let shared = Arc::new(Shared {
            procs: procs.into_boxed_slice(),
            nodes,
            idle: Idle::new(node_of_p, nnodes),
            policy: placement::Policy::new(config.placement),
            config,
            topology,
            reactor,
            blocking,
            machines: machine::Threads::default(),
            shutdown: AtomicBool::new(false),
            rr: AtomicUsize::new(0),
            active_procs: AtomicUsize::new(nprocs),
            start_node,
            tasks: Registry::for_runtime(4 * nprocs),
            started: std::time::Instant::now(),
            block_ons: BlockOns::default(),
            in_place: AtomicUsize::new(0),
            local_registries: Mutex::new(Vec::new()),
            retake_unavailable,
            sysmon: std::sync::OnceLock::new(),
            #[cfg(feature = "tokio-compat")]
            tokio,
        });
        // Before any task exists: the schedule function of a task woken off
        // this runtime's M's finds the runtime through its registry.
        let owner: std::sync::Weak<Shared> = Arc::downgrade(&shared);
        shared.tasks.set_owner(owner);
        // Always installed and started: besides its reports, sysmon retakes
        // stuck P's, polls the pollers nobody watches (the reactor's
        // monitor), which a runtime of one P needs too, and auto-advances a
        // paused clock. It sleeps while the runtime is idle.
        let sysmon = sysmon(Arc::downgrade(&shared));
        let hook = Arc::downgrade(&sysmon);
        let _ = shared.sysmon.set(sysmon);
        shared.reactor.set_sysmon(hook)?;
        if shared.config.start_paused {
            // Before any M runs: no timer sees the real clock.
            shared.reactor.pause_clock();
        }
        for mut core in cores {
            let index = core.index;
            let node = shared.procs[index].node;
            // A new M looks for work before it first parks: it counts as
            // spinning until then, so its node is never taken for one with
            // nobody to serve it (see `Idle::saturated`) while its threads
            // are still starting.
            core.spinning = true;
            shared.idle.start_spinning(node);
            if let Err((e, _)) = lifecycle::start(&shared, node, Some(core)) {
                let e = thread_start_error(&shared.config, index, nprocs, e);
                // Stop the M's already started, and wait for them: build()
                // fails without leaving threads behind.
                shared.begin_shutdown();
                shared.reactor.shutdown();
                shared.machines.wait_all(None, 0);
                shared.blocking.shutdown(None);
                shared.drain_all();
                shared.stop_tokio(None);
                return Err(e);
            }
        }
        Ok(shared)
    }

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

    /// Spawns a `Send` task. Where it first runs follows the wake policy of
    /// [`Shared::schedule`], except for root tasks (see `place_new`).
    #[track_caller]
    pub(crate) fn spawn<F>(
        self: &Arc<Self>,
        future: F,
        node: Option<usize>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed(future, node.map_or(Place::Default, Place::Node))
    }

    /// Spawns a `Send` task beside the task `near` names (`spawn_near`): in
    /// its batch, queued on the P that last polled it (that P's inbox, or
    /// this P's `runnext` when it is this one). An anchor that never ran, ran
    /// on a P that is retired now, or has finished: an ordinary spawn.
    #[track_caller]
    pub(crate) fn spawn_near<F>(
        self: &Arc<Self>,
        future: F,
        near: Option<task::Anchor>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed(future, near.map_or(Place::Default, Place::Near))
    }

    #[track_caller]
    fn spawn_placed<F>(self: &Arc<Self>, future: F, place: Place) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed_at(future, place, std::panic::Location::caller())
    }

    /// [`Shared::spawn`] of a task spawned at `location`, for a caller
    /// that cannot pass its caller on (the free `spawn`, which reaches the
    /// runtime through a closure: see `context::with_current`).
    pub(crate) fn spawn_at<F>(
        self: &Arc<Self>,
        future: F,
        location: &'static std::panic::Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed_at(future, Place::Default, location)
    }

    fn spawn_placed_at<F>(
        self: &Arc<Self>,
        future: F,
        place: Place,
        location: &'static std::panic::Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let new = task::spawn_tracked(
            future,
            &self.tasks,
            async_task::WithInfo(schedule_task),
            location,
        );
        if !new.live {
            // Spawned after shutdown: dropping the runnable drops the future.
            drop(new.runnable);
            return new.handle;
        }
        match place {
            Place::Default => self.place_new(new.runnable, None),
            Place::Node(n) => self.place_new(new.runnable, Some(n)),
            Place::Near(a) => {
                new.runnable.metadata().set_batch(a.batch);
                let here = context::current_p_of(self);
                match a.last_p.filter(|&p| p < self.active_procs()) {
                    Some(p) if here != Some(p) => self.push_inbox(p, new.runnable),
                    _ => self.enqueue(new.runnable, false, false),
                }
            }
        }
        new.handle
    }

    /// Where a new task goes: a requested node's queue (`spawn_on`); the next
    /// P round-robin for a root task (spawned right after an accept —
    /// Vyukov's root distribution); otherwise like a wake-up (runnext).
    ///
    /// A root task stays one on a thread that holds no P: `block_on`
    /// accepting, or an M whose P sysmon is retaking or has retaken in the
    /// middle of the accepting poll (the seat refuses access then). It goes
    /// to the next P round-robin, the accepting P included, since this
    /// thread is not running it. The node queue, where such a task went
    /// before, lost the spread: an accept loop in `#[numa_rt::main]`'s body
    /// never dealt a connection, and a retaken poll's remaining connections
    /// went to whichever P looked first.
    fn place_new(self: &Arc<Self>, task: Runnable, node: Option<usize>) {
        if let Some(node) = node {
            return self.push_node(node, task);
        }
        // (The accept mark is taken either way: it is for this spawn only.)
        if numa_rt_reactor::context::take_accepted()
            && self.policy.spreads_roots()
            && !self.is_shutdown()
        {
            // Retired P's (above a shrunk quota) get none.
            let n = self.active_procs().max(1);
            let k = self.rr.fetch_add(1, Relaxed) % n;
            let target = match context::current_p_of(self) {
                Some(here) if k == here => (k + 1) % n,
                _ => k,
            };
            self.procs[target].metrics.root_tasks_received.incr_shared();
            return self.push_inbox(target, task);
        }
        self.enqueue(task, false, false);
    }

    /// The schedule function of every `Send` task: where a woken task goes.
    ///
    /// - On a worker of this runtime holding a P: to `runnext` (displacing the
    ///   previous occupant to the tail, or to the batch queue when it is in
    ///   the waker's batch: the policy's `displaced`), so a woken consumer runs right
    ///   after its producer with warm caches; to the tail when the task woke itself
    ///   (yield) or was woken by the P's poller (FIFO keeps Vyukov's
    ///   write-before-read-before-accept order).
    /// - Elsewhere (foreign threads, block_on, an M without P): to a node
    ///   queue, then a spinning M is requested.
    pub(crate) fn schedule(self: &Arc<Self>, task: Runnable, yielded: bool) {
        self.enqueue(task, yielded, true)
    }

    /// [`Shared::schedule`]; `edge`: a wake (not a spawn), which a task's
    /// poll on this worker teaches the batches (see `batch`).
    #[inline]
    fn enqueue(self: &Arc<Self>, task: Runnable, yielded: bool, edge: bool) {
        context::with_worker(|w| self.enqueue_on(context::worker_of(w, self), task, yielded, edge))
    }

    /// [`Shared::enqueue`] from `here`, this thread's M if it is one of
    /// this runtime's (the schedule function has just looked it up).
    #[inline]
    fn enqueue_on(
        self: &Arc<Self>,
        here: Option<context::Here<'_>>,
        task: Runnable,
        yielded: bool,
        edge: bool,
    ) {
        if self.is_shutdown() {
            // Dropping the runnable drops the future (shutdown drops every
            // pending future; its JoinHandle reports cancellation).
            drop(task);
            return;
        }
        task.metadata().note_scheduled();
        // `Some(node)`: work went where a thief may take it (the ring), so
        // an idle P of `node` may be worth waking.
        let task = match context::with_core_of(here, task, |core, in_driver, task| {
            // (The node's queue, for an overflowing ring, is looked up only
            // where a task goes to the ring: a wake into `runnext` never
            // needs it.)
            if in_driver {
                core.queue.push_back(task, &self.nodes[core.node].inject);
                None
            } else if yielded {
                core.queue.push_back(task, &self.nodes[core.node].inject);
                Some(core.node)
            } else {
                let p = &self.procs[core.index];
                let bits = if edge {
                    let site = |meta: &crate::task::TaskMeta| {
                        meta.location()
                            .map_or(0, |l| std::ptr::from_ref(l) as usize)
                    };
                    let busy = || self.busy_time();
                    let (owner, clock) = (&mut core.policy_state, core.clock_ms);
                    self.policy
                        .on_wake(owner, task.metadata(), clock, &p.metrics, site, busy)
                } else {
                    0
                };
                match core.queue.swap_runnext(task) {
                    Some(old) => {
                        let (owner, clock) = (&mut core.policy_state, core.clock_ms);
                        match self
                            .policy
                            .displaced(owner, &p.hints, old, bits, clock, &p.metrics)
                        {
                            Some(old) => {
                                core.queue.push_back(old, &self.nodes[core.node].inject);
                                Some(core.node)
                            }
                            None => None,
                        }
                    }
                    // A new task is new work (Go's `newproc` wakes a P): a
                    // spawner that keeps running must not hold its child
                    // back from an idle P.
                    None => (!edge).then_some(core.node),
                }
            }
        }) {
            // Nothing a thief may take now: a woken task (and a displaced
            // one kept in the batch queue) is this M's to run next,
            // whatever happens, so nobody is woken (tokio's rule for its
            // LIFO slot). Waking an idle P per `runnext` push, as Go's
            // `ready` does, made it spin and now and then steal one task of
            // a ping-pong pair, with a park and an unpark each
            // (benches/channels.rs). A task fired by this M's
            // driver: whether to wake a helper is decided once per
            // dispatch, after the driver returns (`Worker::poll_driver`).
            Ok(None) => return,
            Ok(Some(node)) => return self.wake_idle_p_hint(node),
            Err(task) => task,
        };
        // Woken by the monitor polling a P's poller for it (see the
        // reactor's `driver::monitor`): that P's node.
        let node = here
            .map(|w| w.machine.node)
            .or_else(|| {
                let p = numa_rt_reactor::context::firing_for()?;
                self.procs.get(p).map(|p| p.node)
            })
            .unwrap_or_else(|| self.next_node());
        self.push_node(node, task);
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

    /// Picks a node for work that comes from outside the runtime, round-robin
    /// from the random start node.
    fn next_node(&self) -> usize {
        let n = self.nodes.len();
        if n == 1 {
            0
        } else {
            // Nodes without P's are served by their nearest node with P's.
            self.nodes[(self.start_node + self.rr.fetch_add(1, Relaxed)) % n].served_by
        }
    }

    /// Queues `task` on `node` (or the node serving it, if it has no P's).
    pub(crate) fn push_node(&self, node: usize, task: Runnable) {
        let node = self.nodes[node].served_by;
        self.nodes[node].inject.push(task);
        self.wake_idle_p(node);
    }

    /// Sends a task to one P's inbox and makes sure that P will look.
    pub(crate) fn push_inbox(&self, p: usize, task: Runnable) {
        self.procs[p].inbox.push(task);
        // (barrier) the push above must be visible before we read the idle
        // state; `take_specific` reads it under the idle lock, which the
        // parker also takes when releasing its P before its re-check.
        if self.idle.take_specific(p) {
            self.unpark(p);
        }
    }

    /// Wakes the M parked in P `p`'s driver (counted in the P's metrics).
    pub(crate) fn unpark(&self, p: usize) {
        let m = &self.procs[p].metrics;
        m.unparks.incr_shared();
        // For the unpark-to-run latency (`Worker::park` takes it): the first
        // unpark of a park is the one its M waited for since; later ones
        // read no clock. Relaxed: a statistic (a race between two wakers
        // keeps either one's time).
        if m.unparked_at_ns.load(Relaxed) == 0 {
            let now = crate::task::epoch_ns(std::time::Instant::now()).max(1);
            m.unparked_at_ns.store(now, Relaxed);
        }
        self.procs[p].unparker.unpark();
    }

    /// Go's `wakep`, per node: if no M of `node` is spinning and one of its
    /// P's is idle, wake it to spin. If the node has nobody to take the work
    /// (every P inside a task), wake an idle P of the nearest node that has
    /// one instead, unless a spinner of another node already looks.
    /// Called after making work available. (barrier: submitter side; see
    /// docs/architecture.md, "Why no wake-up is lost")
    pub(crate) fn wake_idle_p(&self, node: usize) {
        // Pairs with the fence in `Worker::park` after the parker released
        // its P and stopped spinning: either we see its idle P / lack of
        // spinners here, or it sees our work in its re-check.
        fence(SeqCst);
        if self.wake_spinner_on(node) || self.nodes.len() == 1 || !self.saturated(node) {
            return;
        }
        for &rn in &self.nodes[node].remote_order {
            if self.idle.node_nmspinning(rn) != 0 || self.wake_spinner_on(rn) {
                return;
            }
        }
    }

    /// Whether `node` has nobody about to take new work: every one of its P's
    /// is inside a task (so none is idle, spinning, or between two tasks,
    /// where an M looks at its node's queue before it parks). Only then may
    /// M's of other nodes steal from it, and only then does new work for it
    /// wake an idle P of another node. A node without P's is never
    /// saturated (its work is queued on the node serving it).
    pub(crate) fn saturated(&self, node: usize) -> bool {
        let procs = &self.procs[self.nodes[node].procs.clone()];
        // Retired P's (above a shrunk CPU quota) take no work: a node whose
        // P's are all retired is served by the others.
        !procs.is_empty()
            && procs
                .iter()
                .all(|p| p.in_task.load(Relaxed) || p.retired.load(Relaxed))
    }

    /// `wake_idle_p` for work this M queued on its own P: the M is awake and
    /// runs it whatever happens, so no wake-up can be lost and the barrier's
    /// fence is not needed to decide that nobody needs waking. A busy node
    /// (a spinner already looking, or no idle P here nor a quiet one on
    /// another node) costs a few plain loads instead of a fence per spawn
    /// and yield; otherwise the full protocol runs. (Go's `wakep` after
    /// `runqput` has no fence either.)
    pub(crate) fn wake_idle_p_hint(&self, node: usize) {
        if self.idle.node_nmspinning_hint(node) != 0 {
            return;
        }
        if self.idle.node_npidle_hint(node) == 0 {
            // Nobody idle here: only an idle P of another node could help,
            // through the cross-node fallback of `wake_idle_p`.
            let remote_idle = self.nodes[node].remote_order.iter().any(|&rn| {
                self.idle.node_npidle_hint(rn) != 0 && self.idle.node_nmspinning_hint(rn) == 0
            });
            if !remote_idle {
                return;
            }
        }
        self.wake_idle_p(node);
    }

    /// Claims the spinner slot of `node` and wakes one of its idle P's.
    /// False if no P was woken (one spins already, or none is idle).
    fn wake_spinner_on(&self, node: usize) -> bool {
        if !self.idle.try_claim_spinner(node) {
            return false;
        }
        match self.idle.pop_for_spinning(node) {
            Some(p) => {
                self.unpark(p);
                true
            }
            None => {
                // Lost a race with a P that was reclaimed; undo our claim.
                self.idle.stop_spinning(node);
                false
            }
        }
    }

    /// What a thief may take from P `v` now (the policy's [`Policy::look`]
    /// over the victim's queue lengths); `ask`: a batch queue alone is
    /// asked to split.
    ///
    /// [`Policy::look`]: placement::Policy::look
    #[inline]
    pub(crate) fn steal_look(&self, v: &Processor, ask: bool) -> Look {
        let victim = placement::Victim {
            ring: v.steal.len(),
            runnext: v.steal.has_runnext(),
            held: v.running.load(Relaxed),
            hints: &v.hints,
            running: &v.running_batch,
            counters: &v.metrics,
        };
        self.policy.look(victim, ask)
    }

    /// Whether P `p`'s core (`core`) holds work a thief woken now could take
    /// (beyond the policy's reserve; `next`: tasks this M runs first).
    #[inline]
    pub(crate) fn shareable(&self, core: &Core, next: usize) -> bool {
        let p = &self.procs[core.index];
        self.policy.shareable(
            &core.policy_state,
            &p.hints,
            &p.metrics,
            core.queue.len(),
            next,
        )
    }

    /// Whether any queue a parking M could take from holds work.
    /// `spinner` (as in Go, only a spinner looks further): also the other
    /// P's of its node, and the queues and P's of other nodes that have
    /// nobody of their own to take them (the rule `steal` follows).
    pub(crate) fn any_work(&self, me: usize, spinner: bool) -> bool {
        let p = &self.procs[me];
        if !p.inbox.is_empty() || !self.nodes[p.node].inject.is_empty() {
            return true;
        }
        if !spinner {
            // A non-spinning M that looked further could never take the work
            // and would loop between here and `find_runnable` instead of
            // sleeping. Work there is covered by the barrier: its submitter
            // wakes an idle P to spin unless a spinner exists, and spinners
            // look everywhere they may take from.
            return false;
        }
        // What `Worker::steal` may take, in its order: this node's rings, and
        // only if none of them holds even owner-only work, saturated nodes' queues.
        let look = |n: &Node| {
            let mut seen = Look::Nothing;
            for q in &self.procs[n.procs.clone()] {
                match self.steal_look(q, false) {
                    _ if q.index == me => {}
                    l if l.stealable() => return l,
                    Look::OwnerOnly => seen = Look::OwnerOnly,
                    _ => {}
                }
            }
            seen
        };
        match look(&self.nodes[p.node]) {
            l if l.stealable() => return true,
            Look::OwnerOnly => return false,
            _ => {}
        }
        self.nodes.iter().enumerate().any(|(k, n)| {
            k != p.node && self.saturated(k) && (!n.inject.is_empty() || look(n).stealable())
        })
    }

    /// Begins shutdown: schedule calls drop tasks from now on, every parked M
    /// is woken and exits. See `Runtime::shutdown_timeout` for the rest.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Release);
        // Every live task is woken and, the flag being set, dropped by its
        // schedule function — including idle tasks nobody else can reach.
        self.tasks.close_and_wake_all();
        for p in 0..self.nprocs() {
            self.unpark(p);
        }
        self.machines.wake_pooled(&self.nodes);
    }

    /// After every M has stopped: drops every task left in any queue, and
    /// every idle task (second registry pass, see `Registry::close_and_wake_all`).
    /// Stops the side tokio runtime, if any (see `crate::tokio_compat`):
    /// the last step of shutdown, once numa_rt's tasks are dropped.
    pub(crate) fn stop_tokio(&self, deadline: Option<std::time::Instant>) {
        #[cfg(feature = "tokio-compat")]
        if let Some(t) = &self.tokio {
            t.stop(deadline);
        }
        #[cfg(not(feature = "tokio-compat"))]
        let _ = deadline;
    }

    pub(crate) fn drain_all(&self) {
        self.tasks.close_and_wake_all();
        let mut dropped = Vec::new();
        for p in self.procs.iter() {
            dropped.extend(p.inbox.drain());
            if let Some(mut core) = p.core_slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                dropped.extend(core.drain_local(p));
                drop(core);
            }
        }
        for n in self.nodes.iter() {
            dropped.extend(n.inject.drain());
        }
        drop(dropped);
    }
}

/// Convenience for the `Core` type's users.
pub(crate) type BoxCore = Box<Core>;

/// The schedule function of every `Send` task (`Shared::spawn_placed`). It
/// captures nothing: with a schedule function of nonzero size async-task
/// makes every wake by value a wake by reference plus a dropped waker, and
/// every schedule call clones and drops a waker to keep the task alive
/// through the call: a locked instruction more per wake (and a spawn
/// would take a count on the runtime's `Arc`). The runtime is found
/// from the task's registry instead: on one of its own M's (wakes inside a
/// poll, the M's driver firing wakers), by comparing the registry's address
/// with the M's runtime's, which the M keeps alive; anywhere else through
/// the registry's weak reference to it (an `Arc` count taken and given
/// back, what the waker clone cost). A task no longer keeps its runtime
/// alive: once the runtime is gone its tasks' wakes drop the runnable
/// (after shutdown, which dropped every future, there is nothing left in
/// them to drop).
fn schedule_task(task: Runnable, info: async_task::ScheduleInfo) {
    let yielded = info.woken_while_running;
    let registry = task.metadata().registry_ptr();
    // On one of the runtime's own M's (a wake inside a poll, or its driver
    // firing wakers) the runtime is the M's; comparing the registry's
    // address says so (the M keeps that runtime alive).
    context::with_worker(|w| match w {
        Some(w) if context::runs_registry(w, registry) => {
            w.shared.enqueue_on(Some(w), task, yielded, true)
        }
        _ => schedule_elsewhere(task, yielded),
    })
}

/// [`schedule_task`] off the runtime's M's: a `block_on` thread, sysmon,
/// the blocking pool, another runtime's M, any thread. Out of line, so
/// that the wake inside a poll (the common case) carries less of this
/// path: a thread-local load, a compare and a tail call.
#[cold]
#[inline(never)]
fn schedule_elsewhere(task: Runnable, yielded: bool) {
    let owner = task
        .metadata()
        .registry()
        .and_then(Registry::owner::<Shared>);
    match owner {
        Some(shared) => shared.schedule(task, yielded),
        None => drop(task),
    }
}

/// The error of a machine thread that could not be started while building,
/// naming the setting behind it.
fn thread_start_error(
    config: &Config,
    index: usize,
    nprocs: usize,
    e: std::io::Error,
) -> std::io::Error {
    let which = format!("thread {} of max_procs({nprocs})", index + 1);
    let msg = match (config.thread_stack_size, e.raw_os_error()) {
        (Some(s), Some(libc::EINVAL | libc::ENOMEM)) => format!(
            "cannot start {which}: the OS refused a stack of Builder::thread_stack_size({s}) \
             bytes ({e})"
        ),
        (_, Some(libc::EAGAIN)) => format!(
            "cannot start {which}: the OS refuses more threads ({e}); the limit is one of \
             RLIMIT_NPROC (ulimit -u), kernel.threads-max, vm.max_map_count or the cgroup's \
             pids.max: raise it or lower max_procs"
        ),
        _ => format!("cannot start {which} ({e})"),
    };
    std::io::Error::new(e.kind(), msg)
}

//! Runtime metrics: per-P, per-node and runtime-wide counters users can read.
//!
//! The counters themselves (`crate::counters`) are written by the scheduler
//! and read here by anyone. `RuntimeMetrics`'s `Display` prints a line in the
//! shape of Go's `GODEBUG=schedtrace`.

mod task_monitor;

pub use task_monitor::{Instrumented, Intervals, TaskMetrics, TaskMonitor};

use crate::scheduler::Shared;
use numa_rt_numa::NodeId;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// A handle to read a runtime's metrics.
#[derive(Clone)]
pub struct RuntimeMetrics {
    pub(crate) shared: Arc<Shared>,
}

/// One processor's counters (monotonic since the runtime started) and gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcMetrics {
    /// The P's index.
    pub index: usize,
    /// The node the P belongs to.
    pub node: usize,
    /// The M (thread) that last held this P.
    pub machine: usize,
    /// Task polls run on this P.
    pub tasks_polled: u64,
    /// Of those, tasks taken from `runnext`.
    pub runnext_polls: u64,
    /// Takes from the node queue or inbox (one task, or several at once).
    pub global_queue_polls: u64,
    /// Tasks stolen by this P from others. Each is polled here once before
    /// it can move again, so this is also the count of polls that ran a
    /// stolen task.
    pub tasks_stolen: u64,
    /// Polls of a task whose previous poll ran on another P: stolen, woken
    /// by another P's poller (its socket is registered there), spawned or
    /// sent there. Under steady load a task that keeps its P is never
    /// counted; this over [`ProcMetrics::tasks_polled`] is the share of
    /// polls that paid for a move (a cold cache, a source that may follow).
    pub migrated_polls: u64,
    /// I/O sources registered in this P's poller now.
    pub io_sources: usize,
    /// Successful steals from P's of the same node (each takes up to half a queue).
    pub local_steals: u64,
    /// Successful steals from another node (its queue or its P's).
    pub remote_steals: u64,
    /// Times this P's M parked (blocked in its driver).
    pub parks: u64,
    /// Times a waker unparked this P's M: new work for it to spin on, a push
    /// to its inbox or to its M's pinned queue, shutdown.
    pub unparks: u64,
    /// Times this P's M woke from a park and found nothing to run before it
    /// parked again. Each one is a context switch that bought nothing.
    pub spurious_wakeups: u64,
    /// Unpark-to-run latency: the time from a waker's unpark of this P's M
    /// to that M running again, summed over the wake-ups counted in
    /// [`ProcMetrics::unpark_latency_count`] (their mean is what a wake-up
    /// costs in time on this machine: a woken M that arrives after the work
    /// it was woken for is done finds nothing, see `spurious_wakeups`).
    pub unpark_latency_sum: Duration,
    /// Wake-ups timed in [`ProcMetrics::unpark_latency_sum`].
    pub unpark_latency_count: u64,
    /// Wakes from inside a task's poll on this P of a task already in the
    /// waker's batch (tasks that talk to each other; see
    /// docs/architecture.md, "Batches").
    pub batch_wakes: u64,
    /// Wakes from inside a task's poll on this P that put the wakee (or a
    /// waker in no batch) into a batch: groups forming, or following the
    /// program into a new phase. High next to `batch_wakes` means the
    /// tasks' partners keep changing.
    pub batch_joins: u64,
    /// Tasks of the running batch that a wake displaced from `runnext` and
    /// that this P kept in its batch queue (not stealable one by one)
    /// instead of its ring, because their batch has a hub (see
    /// `batch_hub_polls`) and runs faster kept than spread, as measured
    /// (`batch_keeps`). A displaced member of any other batch (a
    /// pipeline's stage, a fan-in of producers that compute) goes to the
    /// ring, for thieves.
    pub batch_queued: u64,
    /// Polls of tasks taken from the batch queue.
    pub batch_polls: u64,
    /// Times this P split its batch queue into its ring because an idle
    /// P's M asked (occam-π's split: members runnable at once, a processor
    /// idle).
    pub batch_splits: u64,
    /// Polls on this P that woke 3 or more different tasks: a hub's (a
    /// fan-in's consumer waking its blocked producers). Each marks the
    /// polled task's batch as a hub's for 100 ms, so that its members stay
    /// together in the batch queue if that runs faster (docs/architecture.md,
    /// "Batches").
    pub batch_hub_polls: u64,
    /// Times a hub's batch was measured (kept for 2 ms, then 4 ms counted) and
    /// carried little work per hub wake (under 100 µs of busy time: less
    /// than spreading its members would cost in hand-offs): it is held
    /// kept, its members one after another on the hub's P
    /// (contention-aware: they contend on what the hub serves). Counted on
    /// the P of the hub's poll that ended the measurement.
    pub batch_keeps: u64,
    /// Times a hub's batch was measured and carried more work per wake
    /// than that: it is held spread, its members for any thief.
    pub batch_spreads: u64,
    /// What the last of those measurements on this P read: the runtime's
    /// busy time per wake of the hub (kept under 100 µs, spread above;
    /// zero before the first).
    pub batch_last_work_per_wake: Duration,
    /// Times this P, about to poll the hub of a batch held kept that last
    /// ran on another P still polling the batch's members, sent the hub
    /// back there instead (a producer running here had woken its
    /// consumer: polled here, the consumer would take the batch's wakes
    /// with it while the members queued on the old P ran there, both P's
    /// contending on one channel).
    pub batch_hub_homes: u64,
    /// Times this P's M, as its node's watcher, drained another P's poller
    /// (an I/O event or due timer of that P, run here instead).
    pub helps: u64,
    /// Times this P's M, unparked for new work while it was its node's
    /// watcher, handed the role to another parked M (an `epoll_ctl` pair, no
    /// wake-up).
    pub watch_handoffs: u64,
    /// Sockets moved into this P's poller because the task using them kept
    /// running here (a source follows its task; see docs/architecture.md).
    pub sources_moved_in: u64,
    /// Times this P's io poller took its node's watch epoll in, so that its
    /// M, as the node's watcher, waits on its own poller (one `epoll_wait`
    /// per event there instead of two; "Hosting" in docs/architecture.md).
    /// A count that keeps climbing under steady load means the watcher
    /// role keeps moving between P's.
    pub watch_hostings: u64,
    /// Times this P's io poller gave the watch back: its M's wake-ups
    /// stopped coming from its own poller, the watcher role moved on, or
    /// sysmon's monitor took it back (`watch_releases`). Each hosting and
    /// each give-back is a pair of `epoll_ctl`s under the kernel's global
    /// epoll mutex: give-backs that keep pace with `watch_hostings` under
    /// steady load are churn.
    pub watch_unhostings: u64,
    /// Of `watch_unhostings`, the monitor's: the hosting watcher stayed out
    /// of its park for a whole monitor tick (a long run of tasks), so its
    /// poller went back into the watch, where a parked M sees its events.
    pub watch_releases: u64,
    /// Times this P's M, leaving its park with no other M of its node
    /// parked, lent its node's pollers to the nearest node whose watcher is
    /// parked, or moved a lend on ("Readiness across nodes" in
    /// docs/architecture.md). Always 0 with one node.
    pub watch_lends: u64,
    /// Of `helps`, drains of another node's poller (a node lent to this
    /// P's): the woken tasks moved to this P's node.
    pub remote_helps: u64,
    /// Root tasks (spawned right after an accept) sent to this P round-robin.
    pub root_tasks_received: u64,
    /// Times this P went back to the M that lent it away in `block_in_place`.
    pub handbacks: u64,
    /// Times sysmon took this P from an M stuck inside one poll and handed
    /// it to another M (retake; see
    /// [`Builder::retake_threshold`](crate::Builder::retake_threshold)).
    pub retakes: u64,
    /// Time this P's M spent running tasks and dispatching between them:
    /// from the first task it finds to the moment its queues run dry
    /// (searching and stealing, which a spinning M does, and parking are
    /// not busy). Updated every `event_interval` ticks and whenever the
    /// queues run dry. Its growth over an interval divided by the interval
    /// is the P's busy ratio.
    pub busy_duration: Duration,
    /// The mean time of one poll (with the dispatch around it), an
    /// exponentially weighted moving average over recent polls (tokio's
    /// weight, 0.1 per poll). Zero before the first poll.
    pub mean_poll_time: Duration,
    /// Polls that returned `Pending` because the task spent its cooperative
    /// budget (128 operations), not because it had to wait.
    pub budget_forced_yields: u64,
    /// Times sysmon found this P running polls of over 100 µs on average
    /// (or one poll running that long) while tasks waited in its run queue
    /// and a P was idle, and offered them to the idle P (see
    /// docs/architecture.md, "Stealing"); also the times a task alone in
    /// its `runnext` behind one long poll had an idle P woken for it.
    pub long_poll_offers: u64,
    /// Polls per bucket of the poll-time histogram (empty unless
    /// [`Builder::poll_time_histogram`](crate::Builder::poll_time_histogram)
    /// turned it on); [`RuntimeMetrics::poll_time_histogram_bucket_range`]
    /// gives each bucket's durations.
    pub poll_time_histogram: Vec<u64>,
    /// The summed time of the polls in the histogram (zero when it is off).
    pub total_poll_time: Duration,
    /// Tasks in the local ring now (excluding `runnext`).
    pub local_queue_depth: usize,
    /// Tasks in the P's inbox now.
    pub inbox_depth: usize,
    /// Whether the P is retired now: above a shrunk CPU quota, it takes no
    /// work (see [`RuntimeMetrics::active_procs`]).
    pub retired: bool,
}

/// One node's counters: sums over its P's, and its queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeMetrics {
    /// The node.
    pub node: usize,
    /// Its P's.
    pub procs: Vec<usize>,
    /// Task polls run on the node's P's.
    pub tasks_polled: u64,
    /// Successful steals between P's of this node.
    pub local_steals: u64,
    /// Steals by this node's P's from other nodes (cross-node steals).
    pub remote_steals: u64,
    /// Parks of the node's M's.
    pub parks: u64,
    /// Unparks of the node's M's.
    pub unparks: u64,
    /// Wake-ups of the node's M's that found nothing to run.
    pub spurious_wakeups: u64,
    /// Unpark-to-run latency summed over the node's P's (see
    /// [`ProcMetrics::unpark_latency_sum`]).
    pub unpark_latency_sum: Duration,
    /// Wake-ups timed in [`NodeMetrics::unpark_latency_sum`].
    pub unpark_latency_count: u64,
    /// Other P's pollers drained by the node's watcher.
    pub helps: u64,
    /// Tasks stolen by the node's P's (from any P or node queue).
    pub tasks_stolen: u64,
    /// Polls on the node's P's of a task last polled on another P (see
    /// [`ProcMetrics::migrated_polls`]).
    pub migrated_polls: u64,
    /// Busy time summed over the node's P's (see [`ProcMetrics::busy_duration`]).
    pub busy_duration: Duration,
    /// The mean of the node's P's mean poll times (P's that never polled left out).
    pub mean_poll_time: Duration,
    /// Budget-forced yields on the node's P's.
    pub budget_forced_yields: u64,
    /// Queue offers on the node's P's (see [`ProcMetrics::long_poll_offers`]).
    pub long_poll_offers: u64,
    /// The node's P's poll-time histograms, summed bucket by bucket.
    pub poll_time_histogram: Vec<u64>,
    /// The summed time of the polls in the node's histograms.
    pub total_poll_time: Duration,
    /// Tasks in the node's global queue now.
    pub queue_depth: usize,
    /// The node's idle P's now.
    pub idle_procs: usize,
    /// The node's spinning M's now.
    pub spinning_machines: usize,
    /// The P whose M holds the node's watcher role now, if any.
    pub watcher: Option<usize>,
}

impl RuntimeMetrics {
    /// Why sysmon's retake is off although a threshold was set: `membarrier`
    /// is unavailable (a kernel before 4.14, or a seccomp filter refusing
    /// it). `None` when retake runs, or was turned off by the user.
    pub fn retake_unavailable(&self) -> Option<&str> {
        self.shared.retake_unavailable.as_deref()
    }

    /// The placement rules this runtime applies (`Builder::placement`,
    /// `NUMA_RT_PLACEMENT`).
    pub fn placement(&self) -> crate::Placement {
        self.shared.policy.describe().rules()
    }

    /// Number of processors (P's).
    pub fn num_procs(&self) -> usize {
        self.shared.nprocs()
    }

    /// tokio's name for [`RuntimeMetrics::num_procs`]: a P is what tokio
    /// calls a worker, and the `worker` index of tokio's `worker_*`
    /// metrics below is a P's index.
    pub fn num_workers(&self) -> usize {
        self.num_procs()
    }

    /// tokio's `worker_park_count`: the times worker `worker` (P
    /// `worker`; numa_rt's workers are its P's) parked, its M blocking in
    /// the P's driver with nothing to run. [`ProcMetrics::parks`] without
    /// the rest of the snapshot. Monotonic.
    ///
    /// # Panics
    /// When `worker >= num_workers()`, as tokio's does.
    pub fn worker_park_count(&self, worker: usize) -> u64 {
        self.shared.procs[worker].metrics.parks.get()
    }

    /// tokio's `worker_park_unpark_count`: the parks of worker (P)
    /// `worker` plus its returns from them. Odd while the worker's M is
    /// parked, even while it runs. Monotonic.
    ///
    /// # Panics
    /// When `worker >= num_workers()`.
    pub fn worker_park_unpark_count(&self, worker: usize) -> u64 {
        let m = &self.shared.procs[worker].metrics;
        // Both only grow, so neither does the sum. The wakes first: a park
        // counted between the two reads makes the sum odd (parked) for a
        // moment, never a wake counted without its park.
        let wakes = m.park_wakes.get();
        m.parks.get() + wakes
    }

    /// tokio's `worker_total_busy_duration`: the time worker (P) `worker`
    /// spent running tasks and dispatching between them, as
    /// [`ProcMetrics::busy_duration`] (flushed when the P parks and every
    /// `event_interval` ticks). Monotonic.
    ///
    /// # Panics
    /// When `worker >= num_workers()`.
    pub fn worker_total_busy_duration(&self, worker: usize) -> Duration {
        Duration::from_nanos(self.shared.procs[worker].metrics.busy_ns.get())
    }

    /// Processors allowed to take work now: all of them, unless `max_procs`
    /// was left to its default and sysmon's re-read (about once a second)
    /// found the cgroup CPU quota shrunk; the others retire
    /// ([`ProcMetrics::retired`]) until it grows back. Never fewer than 2
    /// (or all, with fewer).
    pub fn active_procs(&self) -> usize {
        self.shared.active_procs()
    }

    /// Number of NUMA nodes (simulated or real).
    pub fn num_nodes(&self) -> usize {
        self.shared.nodes.len()
    }

    /// Live machine threads (M's), excluding blocking-pool threads.
    pub fn num_machines(&self) -> usize {
        self.shared.machines.live()
    }

    /// M's spinning (looking for work to steal) right now.
    pub fn spinning_machines(&self) -> usize {
        self.shared.idle.nmspinning()
    }

    /// P's idle right now (their M parked in their driver).
    pub fn idle_procs(&self) -> usize {
        self.shared.idle.npidle()
    }

    /// Threads in the blocking pool.
    pub fn blocking_threads(&self) -> usize {
        self.shared.blocking.threads()
    }

    /// tokio's name for [`RuntimeMetrics::blocking_threads`].
    pub fn num_blocking_threads(&self) -> usize {
        self.blocking_threads()
    }

    /// Blocking-pool threads waiting for a closure and not yet claimed by
    /// one (tokio's metric of the name).
    pub fn num_idle_blocking_threads(&self) -> usize {
        self.shared.blocking.idle_threads()
    }

    /// Closures queued for the blocking pool (all its threads busy).
    pub fn blocking_queue_depth(&self) -> usize {
        self.shared.blocking.queue_depth()
    }

    /// Time since the runtime was built: the wall time against which busy
    /// durations are read (`busy_duration / uptime` over a whole run, or
    /// the ratio of their growth between two scrapes).
    pub fn uptime(&self) -> Duration {
        self.shared.started.elapsed()
    }

    /// Budget-forced yields summed over every P.
    pub fn budget_forced_yields(&self) -> u64 {
        (0..self.num_procs())
            .map(|i| self.shared.procs[i].metrics.forced_yields.get())
            .sum()
    }

    /// The number of poll-time histogram buckets (0 when it is off).
    pub fn poll_time_histogram_buckets(&self) -> usize {
        self.shared
            .config
            .poll_histogram
            .as_ref()
            .map_or(0, |h| h.buckets())
    }

    /// The poll durations bucket `i` counts; the last bucket ends at
    /// `Duration::MAX`.
    ///
    /// # Panics
    /// If the histogram is off or `i` is out of range.
    pub fn poll_time_histogram_bucket_range(&self, i: usize) -> std::ops::Range<Duration> {
        self.shared
            .config
            .poll_histogram
            .as_ref()
            .expect("the poll-time histogram is off: see Builder::poll_time_histogram")
            .bucket_range(i)
    }

    /// Live `Send` tasks: spawned and not yet completed or dropped.
    pub fn live_tasks(&self) -> usize {
        self.shared.tasks.len()
    }

    /// tokio's name for [`RuntimeMetrics::live_tasks`].
    pub fn num_alive_tasks(&self) -> usize {
        self.live_tasks()
    }

    /// Tasks in all nodes' global queues.
    pub fn global_queue_depth(&self) -> usize {
        self.shared.nodes.iter().map(|n| n.inject.len()).sum()
    }

    /// The counters of P `index`.
    pub fn proc(&self, index: usize) -> ProcMetrics {
        let p = &self.shared.procs[index];
        let m = &p.metrics;
        let driver = self.shared.reactor.driver_stats(index);
        ProcMetrics {
            index,
            node: p.node,
            machine: m.machine.load(Relaxed),
            tasks_polled: m.polls.get(),
            runnext_polls: m.runnext_polls.get(),
            global_queue_polls: m.global_polls.get(),
            tasks_stolen: m.steals.get(),
            migrated_polls: m.migrated_polls.get(),
            io_sources: self.shared.reactor.proc_sources_and_timers(index).0,
            local_steals: m.local_steals.get(),
            remote_steals: m.remote_steals.get(),
            parks: m.parks.get(),
            unparks: m.unparks.get(),
            spurious_wakeups: m.spurious_wakeups.get(),
            unpark_latency_sum: Duration::from_nanos(m.unpark_latency_ns.get()),
            unpark_latency_count: m.unpark_latencies.get(),
            batch_wakes: m.batch_wakes.get(),
            batch_joins: m.batch_joins.get(),
            batch_queued: m.batch_queued.get(),
            batch_polls: m.batch_polls.get(),
            batch_splits: m.batch_splits.get(),
            batch_hub_polls: m.batch_hub_polls.get(),
            batch_keeps: m.batch_keeps.get(),
            batch_spreads: m.batch_spreads.get(),
            batch_last_work_per_wake: Duration::from_nanos(m.batch_last_work_ns.get()),
            batch_hub_homes: m.batch_hub_homes.get(),
            helps: driver.helps,
            watch_handoffs: driver.watch_handoffs,
            sources_moved_in: driver.sources_moved_in,
            watch_hostings: driver.watch_hostings,
            watch_unhostings: driver.watch_unhostings,
            watch_releases: driver.watch_releases,
            watch_lends: driver.watch_lends,
            remote_helps: driver.remote_helps,
            root_tasks_received: m.root_tasks_received.get(),
            handbacks: m.handbacks.get(),
            retakes: m.retakes.get(),
            busy_duration: Duration::from_nanos(m.busy_ns.get()),
            mean_poll_time: Duration::from_nanos(m.poll_time_ewma_ns.get()),
            budget_forced_yields: m.forced_yields.get(),
            long_poll_offers: m.long_poll_offers.get(),
            poll_time_histogram: m
                .poll_histogram
                .as_deref()
                .map_or_else(Vec::new, |b| b.iter().map(|c| c.get()).collect()),
            total_poll_time: Duration::from_nanos(m.poll_ns.get()),
            local_queue_depth: p.steal.len(),
            inbox_depth: p.inbox.len(),
            retired: p.retired.load(Relaxed),
        }
    }

    /// Every P's counters.
    pub fn procs(&self) -> Vec<ProcMetrics> {
        (0..self.num_procs()).map(|i| self.proc(i)).collect()
    }

    /// The counters of one node.
    pub fn node(&self, node: impl Into<NodeId>) -> NodeMetrics {
        let n: usize = node.into().into();
        let nd = &self.shared.nodes[n];
        let procs: Vec<ProcMetrics> = nd.procs.clone().map(|i| self.proc(i)).collect();
        NodeMetrics {
            node: n,
            procs: nd.procs.clone().collect(),
            tasks_polled: procs.iter().map(|p| p.tasks_polled).sum(),
            local_steals: procs.iter().map(|p| p.local_steals).sum(),
            remote_steals: procs.iter().map(|p| p.remote_steals).sum(),
            parks: procs.iter().map(|p| p.parks).sum(),
            unparks: procs.iter().map(|p| p.unparks).sum(),
            spurious_wakeups: procs.iter().map(|p| p.spurious_wakeups).sum(),
            unpark_latency_sum: procs.iter().map(|p| p.unpark_latency_sum).sum(),
            unpark_latency_count: procs.iter().map(|p| p.unpark_latency_count).sum(),
            helps: procs.iter().map(|p| p.helps).sum(),
            tasks_stolen: procs.iter().map(|p| p.tasks_stolen).sum(),
            migrated_polls: procs.iter().map(|p| p.migrated_polls).sum(),
            busy_duration: procs.iter().map(|p| p.busy_duration).sum(),
            mean_poll_time: {
                let polled: Vec<Duration> = procs
                    .iter()
                    .filter(|p| p.tasks_polled > 0)
                    .map(|p| p.mean_poll_time)
                    .collect();
                if polled.is_empty() {
                    Duration::ZERO
                } else {
                    polled.iter().sum::<Duration>() / polled.len() as u32
                }
            },
            budget_forced_yields: procs.iter().map(|p| p.budget_forced_yields).sum(),
            long_poll_offers: procs.iter().map(|p| p.long_poll_offers).sum(),
            poll_time_histogram: procs.iter().fold(Vec::new(), |mut acc, p| {
                acc.resize(p.poll_time_histogram.len().max(acc.len()), 0);
                for (a, b) in acc.iter_mut().zip(&p.poll_time_histogram) {
                    *a += b;
                }
                acc
            }),
            total_poll_time: procs.iter().map(|p| p.total_poll_time).sum(),
            queue_depth: nd.inject.len(),
            idle_procs: self.shared.idle.node_npidle(n),
            spinning_machines: self.shared.idle.node_nmspinning(n),
            watcher: self.shared.reactor.watcher(n),
        }
    }
}

impl fmt::Display for RuntimeMetrics {
    /// `numa_rt: procs=4 nodes=2 idleprocs=2 threads=5 spinning=0 blocking=0 runqueue=0 [0 0 0 0]`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "numa_rt: procs={} nodes={} idleprocs={} threads={} spinning={} blocking={} runqueue={} [",
            self.num_procs(),
            self.num_nodes(),
            self.idle_procs(),
            self.num_machines(),
            self.spinning_machines(),
            self.blocking_threads(),
            self.global_queue_depth()
        )?;
        for i in 0..self.num_procs() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}", self.shared.procs[i].steal.len())?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for RuntimeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

//! Runtime metrics: per-P, per-node and runtime-wide counters users can read.
//!
//! The counters themselves (`crate::counters`) are written by the scheduler
//! and read here by anyone. `RuntimeMetrics`'s `Display` prints a line in the
//! shape of Go's `GODEBUG=schedtrace`.

use crate::scheduler::Shared;
use numa_rt_numa::NodeId;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

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
    /// Times a task (or a batch) was taken from the node queue or inbox.
    pub global_queue_polls: u64,
    /// Tasks stolen by this P from others.
    pub tasks_stolen: u64,
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
    /// Times this P's M, as its node's watcher, drained another P's poller
    /// (an I/O event or due timer of that P, run here instead).
    pub helps: u64,
    /// Times this P's M, unparked for new work while it was its node's
    /// watcher, handed the role to another parked M (an `epoll_ctl` pair, no
    /// wake-up).
    pub watch_handoffs: u64,
    /// Root tasks (spawned right after an accept) sent to this P round-robin.
    pub root_tasks_received: u64,
    /// Times this P went back to the M that lent it away in `block_in_place`.
    pub handbacks: u64,
    /// Tasks in the local ring now (excluding `runnext`).
    pub local_queue_depth: usize,
    /// Tasks in the P's inbox now.
    pub inbox_depth: usize,
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
    /// Other P's pollers drained by the node's watcher.
    pub helps: u64,
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
    /// Number of processors (P's).
    pub fn num_procs(&self) -> usize {
        self.shared.nprocs()
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

    /// Live `Send` tasks: spawned and not yet completed or dropped.
    pub fn live_tasks(&self) -> usize {
        self.shared.tasks.len()
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
            local_steals: m.local_steals.get(),
            remote_steals: m.remote_steals.get(),
            parks: m.parks.get(),
            unparks: m.unparks.get(),
            spurious_wakeups: m.spurious_wakeups.get(),
            helps: driver.helps,
            watch_handoffs: driver.watch_handoffs,
            root_tasks_received: m.root_tasks_received.get(),
            handbacks: m.handbacks.get(),
            local_queue_depth: p.steal.len(),
            inbox_depth: p.inbox.len(),
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
            helps: procs.iter().map(|p| p.helps).sum(),
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

//! NUMA placement: binding M's to their node, `spawn_on`, `current_node`.

use crate::context;
use crate::runtime::Handle;
use crate::scheduler::Shared;
use crate::task::JoinHandle;
use numa_rt_numa::NodeId;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// Binds the calling M's thread to its node's CPUs (the node, not a core,
/// so the OS balances within it — Vyukov), or to one core with
/// `Builder::pin_cores`, and prefers the node's memory. Failures (e.g. a
/// container without permission) are reported once per process and the
/// runtime carries on.
pub(crate) fn bind_machine(shared: &Arc<Shared>, node: usize, first_p: Option<usize>) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    let report = |what: &str, e: std::io::Error| {
        if !REPORTED.swap(true, Relaxed) {
            eprintln!("numa_rt: {what} failed ({e}); continuing without it");
        }
    };
    let n = &shared.topology.nodes()[node];
    if shared.config.pin_cores {
        let cpus: Vec<usize> = n.cpus().iter().collect();
        let k = first_p.map_or(0, |p| p - shared.nodes[node].procs.start);
        if let Some(&cpu) = cpus.get(k % cpus.len().max(1)) {
            if !numa_rt_numa::sys::pin_to_core(cpu) {
                report(
                    "pinning a worker to a core",
                    std::io::Error::other(format!("core {cpu}")),
                );
            }
        }
    } else if let Err(e) = numa_rt_numa::sys::set_thread_affinity(n.cpus()) {
        report("binding a worker to its node's CPUs", e);
    }
    if shared.topology.nodes().len() > 1 {
        if let Err(e) = numa_rt_numa::sys::set_preferred_node(n.os_id()) {
            report("set_mempolicy(MPOL_PREFERRED)", e);
        }
    }
}

/// The node of the worker running the caller; `None` outside a worker.
pub fn current_node() -> Option<NodeId> {
    context::with_worker(|w| w.map(|w| NodeId::from(w.machine.node)))
}

/// Spawns a task that starts on `node`: it goes to that node's queue, and a
/// P of another node takes it only by the normal steal order (when the
/// thief's own node has nothing to run).
///
/// # Panics
/// Outside a runtime, or if `node` is not one of the runtime's nodes.
#[track_caller]
pub fn spawn_on<F>(node: impl Into<NodeId>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let h = crate::spawn::current_handle("numa_rt::numa::spawn_on");
    h.spawn_on(node, future)
}

impl Handle {
    /// Spawns a task that starts on `node`; see [`spawn_on`].
    #[track_caller]
    pub fn spawn_on<F>(&self, node: impl Into<NodeId>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let node: usize = node.into().into();
        let n = self.shared.nodes.len();
        assert!(
            node < n,
            "numa_rt::numa::spawn_on: node {node} does not exist (the runtime has {n} node(s))"
        );
        self.shared.spawn(future, Some(node))
    }
}

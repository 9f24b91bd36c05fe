//! NUMA placement: `spawn_on`, `current_node`.

use crate::runtime::Handle;
use crate::scheduler::context;
use crate::task::JoinHandle;
use numa_rt_numa::NodeId;
use std::future::Future;

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

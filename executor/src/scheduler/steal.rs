//! The steal order, written once: where a thief looks, nearest first.

use super::Shared;

/// One place a thief may take work from, in [`Shared::steal_walk`]'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StealFrom {
    /// The P's of the thief's own node (the thief's own P among them).
    OwnProcs(usize),
    /// The queue of another node, nobody of whose own can take it.
    NodeQueue(usize),
    /// The P's of another node, nobody of whose own can take their work.
    NodeProcs(usize),
}

impl StealFrom {
    /// The node this place belongs to.
    pub(crate) fn node(self) -> usize {
        match self {
            StealFrom::OwnProcs(n) | StealFrom::NodeQueue(n) | StealFrom::NodeProcs(n) => n,
        }
    }
}

/// What a visit of [`Shared::steal_walk`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen<T> {
    /// Work a thief may take (or took): the walk ends.
    Found(T),
    /// Only owner-only work (a kept batch, a ring within its reserve): on
    /// the thief's own node this ends the walk; elsewhere it is nothing.
    OwnerOnly,
    Nothing,
}

impl Shared {
    /// Walks the steal order from a thief on `node`, calling `visit` on each
    /// place until one finds work: this node's P's; then, only if they held
    /// nothing at all, the queues of the other nodes that have nobody of
    /// their own to take work (every P inside a task: [`Shared::saturated`],
    /// read as the walk reaches each), nearest node first; then those
    /// nodes' P's, nearest first (docs/architecture.md, "Per node").
    ///
    /// Owner-only work on this node stops the walk: the node is not out of
    /// work, and a steal across nodes moves a task further than the local
    /// steal the policy just refused (issue 4: "a P of another node takes it
    /// only when the thief's own node has nothing to run"). Returns
    /// [`Seen::OwnerOnly`] then. `Worker::steal` takes along this walk and
    /// `Shared::any_work` looks along it, so the park re-check looks where
    /// the thief would have taken.
    pub(crate) fn steal_walk<T>(
        &self,
        node: usize,
        mut visit: impl FnMut(StealFrom) -> Seen<T>,
    ) -> Seen<T> {
        match visit(StealFrom::OwnProcs(node)) {
            Seen::Nothing => {}
            seen => return seen,
        }
        let remote = &self.nodes[node].remote_order;
        let places = remote.iter().map(|&rn| StealFrom::NodeQueue(rn));
        let places = places.chain(remote.iter().map(|&rn| StealFrom::NodeProcs(rn)));
        for place in places {
            // Read as the walk gets there, as a thief's look would.
            if !self.saturated(place.node()) {
                continue;
            }
            if let Seen::Found(t) = visit(place) {
                return Seen::Found(t);
            }
        }
        Seen::Nothing
    }
}

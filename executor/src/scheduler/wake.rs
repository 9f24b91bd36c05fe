//! The wake protocol: where a woken task goes, who is woken for it, and
//! whether a parking M has work left (`any_work`).

use super::placement::{self, Look, WakeTo};
use super::processor::{Core, Processor};
use super::steal::{Seen, StealFrom};
use super::{context, Shared};
use crate::task::registry::Registry;
use crate::task::Runnable;
use std::sync::atomic::{fence, Ordering::*};
use std::sync::Arc;

impl Shared {
    /// The schedule function of every `Send` task: where a woken task goes.
    ///
    /// - On a worker of this runtime holding a P: to `runnext` (displacing the
    ///   previous occupant to the tail, or to the batch queue when it is in
    ///   the waker's kept batch: the policy's `route`), so a woken consumer runs right
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
    pub(super) fn enqueue(self: &Arc<Self>, task: Runnable, yielded: bool, edge: bool) {
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
                let node = core.node;
                // A wake edge: the waker is the task in this core's poll.
                let waker = if edge {
                    // SAFETY: the schedule function, on this core's M,
                    // outside the driver (the branch above): inside the
                    // poll `polling` names (`Core::polling`).
                    unsafe { core.polling() }
                } else {
                    None
                };
                let clock_ms = core.clock_ms;
                let (st, queue) = (&mut core.policy_state, &mut core.queue);
                let woken = placement::Woken {
                    task,
                    st,
                    p: p.policy(),
                    waker,
                    clock_ms,
                    busy: || self.busy_time(),
                    runnext: |t| queue.swap_runnext(t),
                };
                match self.policy.route(woken) {
                    // A new task is new work (Go's `newproc` wakes a P): a
                    // spawner that keeps running must not hold its child
                    // back from an idle P.
                    WakeTo::Runnext => (!edge).then_some(node),
                    WakeTo::Ring(old) => {
                        core.queue.push_back(old, &self.nodes[node].inject);
                        Some(node)
                    }
                    WakeTo::Kept => None,
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
            p: v.policy(),
        };
        self.policy.look(victim, ask)
    }

    /// Whether P `p`'s core (`core`) holds work a thief woken now could take
    /// (beyond the policy's reserve; `next`: tasks this M runs first): the
    /// policy's [`Policy::worth_waking`].
    ///
    /// [`Policy::worth_waking`]: placement::Policy::worth_waking
    #[inline]
    pub(crate) fn shareable(&self, core: &Core, next: usize) -> bool {
        let p = &self.procs[core.index];
        self.policy
            .worth_waking(&core.policy_state, p.policy(), core.queue.len(), next)
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
        // What `Worker::steal` may take, along its walk: this node's rings,
        // and only if none of them holds even owner-only work, saturated
        // nodes' queues and rings.
        let look = |n: usize| {
            let mut seen = Seen::Nothing;
            for q in &self.procs[self.nodes[n].procs.clone()] {
                match self.steal_look(q, false) {
                    _ if q.index == me => {}
                    l if l.stealable() => return Seen::Found(()),
                    Look::OwnerOnly => seen = Seen::OwnerOnly,
                    _ => {}
                }
            }
            seen
        };
        let seen = self.steal_walk(p.node, |from| match from {
            StealFrom::OwnProcs(n) | StealFrom::NodeProcs(n) => look(n),
            StealFrom::NodeQueue(n) if !self.nodes[n].inject.is_empty() => Seen::Found(()),
            StealFrom::NodeQueue(_) => Seen::Nothing,
        });
        seen == Seen::Found(())
    }
}

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
pub(super) fn schedule_task(task: Runnable, info: async_task::ScheduleInfo) {
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

//! Step 7, parking: the M gives its P back or parks in the P's driver.

use super::Worker;
use crate::scheduler::processor::Core;
use crate::scheduler::BoxCore;
use std::sync::atomic::{fence, Ordering::*};
use std::sync::Arc;

impl Worker {
    /// Releases the P, runs the barrier and re-check, then parks in the P's
    /// driver. Returns with the P held again, spinning if woken to spin.
    /// These are steps 1–7 of docs/architecture.md, "Parking, step by step".
    pub(super) fn park(&self, core: BoxCore) -> Option<BoxCore> {
        let shared = &*self.shared;
        let idx = core.index;
        // Rather than idling, return the P to the M that gave it away.
        let core = match self.give_back(core) {
            Ok(()) => return None,
            Err(c) => c,
        };
        let mut core = core;
        // Builder::on_thread_park, while the P is held and before the
        // re-check: work a hook makes is found, and the M does not sleep.
        shared.config.before_park();
        let was_spinning = core.spinning;
        // Unparks sent from here on are this park's (`note_woken`): one
        // sent earlier but taken only now would time this M's whole run.
        shared.procs[idx].metrics.forget_unpark();
        shared.procs[idx].set_running(false);
        shared.idle.release(idx);
        if was_spinning {
            core.spinning = false;
            shared.idle.stop_spinning(core.node);
        }
        // (barrier) Pairs with the fence in `Shared::wake_idle_p`: a
        // submitter either sees our P idle and no spinner and wakes us, or
        // we see its work below.
        fence(SeqCst);
        let work = shared.any_work(idx, was_spinning)
            || !self.machine.local.is_empty()
            || core.has_local_work()
            || self.asker_waiting(idx, core.node);
        if !work && !shared.is_shutdown() {
            shared.procs[idx].metrics.parks.incr();
            core.flush_busy(&shared.procs[idx].metrics, false);
            core = self.poll_driver(core, true);
            shared.procs[idx].metrics.park_wakes.incr();
        }
        // Woken by an unpark (or by I/O after one was sent), or unparked
        // between releasing the P and the re-check that found work: how
        // long the wake-up took to get this M running.
        shared.procs[idx].metrics.note_woken();
        match shared.idle.reclaim(idx) {
            crate::scheduler::idle::Reclaim::Spinning => core.spinning = true,
            crate::scheduler::idle::Reclaim::Plain if work && was_spinning => {
                // Go: a spinner that finds work in its re-check goes back to spinning.
                core.spinning = true;
                shared.idle.start_spinning(core.node);
            }
            crate::scheduler::idle::Reclaim::Plain => {}
        }
        shared.procs[idx].set_running(true);
        shared.config.after_unpark();
        Some(core)
    }

    /// Whether an M waits in its pool to get P `idx` back (the park
    /// re-check). One that asked but is not in its pool (still running a
    /// `block_in_place` closure, or on its way) does not count: the holder
    /// would spin until it came. It asks again, and wakes the P, once there.
    fn asker_waiting(&self, idx: usize, node: usize) -> bool {
        let p = &self.shared.procs[idx];
        if !p.has_asker() {
            return false;
        }
        let pool = self.shared.nodes[node].idle_machines.lock().unwrap();
        p.any_asker(|m| pool.iter().any(|x| Arc::ptr_eq(x, m)))
    }

    /// Hands `core` to the M waiting to get this P back, if there is one and
    /// it is still in its pool (a concurrent handoff may have taken it).
    pub(super) fn give_back(&self, mut core: BoxCore) -> Result<(), BoxCore> {
        let shared = &*self.shared;
        // One load on every park: the pool's lock only when someone asks.
        if !shared.procs[core.index].has_asker() {
            return Err(core);
        }
        // Under the pool's lock: an asker still in it cannot be handed a
        // core by anyone else meanwhile.
        let mut pool = shared.nodes[core.node].idle_machines.lock().unwrap();
        let me = &self.machine;
        let Some(m) = shared.procs[core.index]
            .take_asker(|m| !Arc::ptr_eq(m, me) && pool.iter().any(|x| Arc::ptr_eq(x, m)))
        else {
            return Err(core);
        };
        let pos = pool.iter().position(|x| Arc::ptr_eq(x, &m));
        pool.swap_remove(pos.expect("take_asker picked an M of the pool"));
        drop(pool);
        if core.spinning {
            core.spinning = false;
            if shared.idle.stop_spinning(core.node) {
                shared.wake_idle_p(core.node);
            }
        }
        shared.procs[core.index].metrics.handbacks.incr();
        m.give(core);
        Ok(())
    }
}

impl Core {
    /// Whether this P has queued work of its own: ring, `runnext` or the
    /// policy's batch queue (the park re-check's last question).
    #[inline]
    fn has_local_work(&self) -> bool {
        !self.queue.is_empty() || self.policy_state.has_work()
    }
}

//! Question 1, where a task arriving goes: a new task the policy places
//! ([`NewTask`]: a root, a `spawn_near`) or a woken one on its way to
//! `runnext` ([`Woken`]), with the wake edge it teaches the batches and
//! the task it displaces.

use super::state::BATCH_QUEUE_CAP;
use super::{
    at, batch, share_out, Arrival, BusyTime, NewTask, PolicyCore, PolicyP, Route, Rule, Rules,
    Spawned, WakeTo, Woken,
};
use crate::counters::ProcCounters;
use crate::task::Anchor;
use crate::task::{Runnable, TaskMeta};
use std::sync::atomic::Ordering::Relaxed;

impl<H: FnOnce() -> Option<usize>> Arrival for NewTask<'_, H> {
    type To = Route;

    /// - [`Spawned::Root`] ([`Rule::Roots`], Vyukov): the next P
    ///   round-robin, skipping this one, which runs the accept loop;
    ///   with the rule off, like a wake.
    /// - [`Spawned::Near`]: the anchor's batch, and the inbox of the P that
    ///   last polled the anchor, unless that is this P (then like a wake) or
    ///   retired, or the anchor never ran. `spawn_near` is the program's
    ///   own request: it holds with every rule off.
    #[inline]
    fn route(self, policy: &Rules) -> Route {
        policy.route_new(self.meta, self.how, self.active, self.here, || {
            self.next_root.fetch_add(1, Relaxed)
        })
    }

    /// Go: a root like a wake; a `spawn_near` still beside its anchor.
    #[inline]
    fn go(self) -> Route {
        match self.how {
            Spawned::Root => Route::Wake,
            Spawned::Near(a) => near(self.meta, a, self.active, self.here),
        }
    }
}

impl<S, B> Arrival for Woken<'_, S, B>
where
    S: FnOnce(Runnable) -> Option<Runnable>,
    B: BusyTime,
{
    type To = WakeTo;

    /// A wake edge first teaches the batches ([`Rule::Batches`]); the task
    /// goes to `runnext`, and the task it displaces to the ring or, a
    /// member of a kept hub's batch, the batch queue.
    #[inline]
    fn go(self) -> WakeTo {
        match (self.runnext)(self.task) {
            None => WakeTo::Runnext,
            Some(old) => WakeTo::Ring(old),
        }
    }

    #[inline]
    fn route(self, policy: &Rules) -> WakeTo {
        let Woken {
            task,
            st,
            p,
            waker,
            clock_ms,
            busy,
            runnext,
        } = self;
        let bits = match waker {
            Some(waker) => policy.on_wake(st, waker, task.metadata(), clock_ms, p.m, busy),
            None => 0,
        };
        match runnext(task) {
            None => WakeTo::Runnext,
            Some(old) => match policy.displaced(st, p, old, bits, clock_ms) {
                Some(old) => WakeTo::Ring(old),
                None => WakeTo::Kept,
            },
        }
    }
}

/// A `spawn_near`'s place, with every rule or none: the anchor's batch, and
/// the inbox of the P that last polled the anchor, unless that is this P
/// (then like a wake) or retired, or the anchor never ran.
fn near(meta: &TaskMeta, a: Anchor, active: usize, here: impl FnOnce() -> Option<usize>) -> Route {
    meta.set_batch(a.batch);
    let here = here();
    match a.last_p.filter(|&p| p < active) {
        Some(p) if here != Some(p) => Route::Near(p),
        _ => Route::Wake,
    }
}

impl Rules {
    // ---- spawns ---------------------------------------------------------

    /// Where a new task that is a root or placed beside another goes
    /// ([`NewTask`]). `active`: the P's allowed to take work (retired ones
    /// get none); `here`: this thread's P, if it holds one; `next_root`:
    /// the runtime's round-robin cursor, advanced by one.
    fn route_new(
        &self,
        meta: &TaskMeta,
        how: Spawned,
        active: usize,
        here: impl FnOnce() -> Option<usize>,
        next_root: impl FnOnce() -> usize,
    ) -> Route {
        match how {
            Spawned::Root if self.on(Rule::Roots) => {
                let n = active.max(1);
                let k = next_root() % n;
                Route::Root(match here() {
                    Some(here) if k == here => (k + 1) % n,
                    _ => k,
                })
            }
            Spawned::Root => Route::Wake,
            Spawned::Near(a) => near(meta, a, active, here),
        }
    }

    // ---- wakes ----------------------------------------------------------

    /// `waker`, in a poll on this P, woke `wakee` ([`Rule::Batches`]: learn
    /// the edge, count a hub poll). Returns the batch both are in now (0:
    /// none, or the rule is off). `clock_ms`: the P's busy clock.
    #[inline]
    fn on_wake(
        &self,
        st: &mut PolicyCore,
        waker: &TaskMeta,
        wakee: &TaskMeta,
        clock_ms: u32,
        m: &ProcCounters,
        busy: impl BusyTime,
    ) -> u32 {
        if !self.on(Rule::Batches) {
            return 0;
        }
        let bits = batch::learn_edge(waker, wakee, clock_ms, m);
        if batch::note_wake(st, wakee) {
            self.note_hub_poll(st, waker, bits, clock_ms, m, busy);
        }
        bits
    }

    /// A poll has just woken its [`HUB_WAKES`](crate::tuning::HUB_WAKES)th different task:
    /// count it and mark its batch a hub's. Cold: once per hub poll.
    #[cold]
    #[inline(never)]
    fn note_hub_poll(
        &self,
        st: &PolicyCore,
        waker: &TaskMeta,
        bits: u32,
        clock_ms: u32,
        m: &ProcCounters,
        busy: impl BusyTime,
    ) {
        m.batch_hub_polls.incr();
        if bits != 0 {
            self.hubs.mark(bits, clock_ms);
            // The hub's spawn site: its `Location`'s address, only compared.
            let site = || {
                waker
                    .location()
                    .map_or(0, |l| std::ptr::from_ref(l) as usize)
            };
            self.hub_modes.claim(bits, st.running, site, &at(busy));
        }
    }

    /// Where the task a wake displaced from `runnext` goes: `None` if the
    /// policy keeps it (the batch queue), else `Some` for the ring's tail.
    /// A member of the waker's batch (`bits`) is one of two members
    /// runnable at once: occam-π's cue to split. It waits in the batch
    /// queue only when its batch is a hub's held kept; otherwise it goes
    /// to the ring shared out, so a thief may take it however soon this P
    /// would reach it. Out of line: most wakes displace nothing.
    #[inline(never)]
    fn displaced(
        &self,
        st: &mut PolicyCore,
        p: PolicyP<'_>,
        old: Runnable,
        bits: u32,
        clock_ms: u32,
    ) -> Option<Runnable> {
        if bits == 0
            || old.metadata().batch_bits() != bits
            || batch::live_batch(old.metadata(), clock_ms).is_none()
        {
            return Some(old);
        }
        let keep = self.hub_modes.keeps(bits)
            && (batch::in_hub_poll(st) || self.hubs.is_hub(bits, clock_ms));
        if !keep {
            share_out(p.hints);
            return Some(old);
        }
        if st.bq.len() >= BATCH_QUEUE_CAP {
            return Some(old);
        }
        p.m.batch_queued.incr();
        st.bq.push_back(old);
        p.hints.bq_len.store(st.bq.len() as u32, Relaxed);
        None
    }
}

//! The scheduling loop: what an M does while it holds a P.
//!
//! The loop (docs/architecture.md, "The scheduling loop"):
//! 1. every `global_queue_interval`-th tick: this M's pinned tasks (one),
//!    then a take from the P's inbox or the node queue, for fairness;
//! 2. every `event_interval`-th tick: poll the P's driver without blocking;
//! 3. `runnext` (at most `MAX_LIFO_POLLS` in a row), the batch queue (at most
//!    `MAX_BATCH_RUN` in a row), then the local ring;
//! 4. pinned tasks, the inbox, a take from the node queue;
//! 5. the driver without blocking;
//! 6. steal (if spinning is allowed): same-node P's, then remote node
//!    queues, then remote P's;
//! 7. park in the P's driver ([`Worker::park`]; the protocol, both crates'
//!    steps of it and its barrier: docs/architecture.md, "Idle P's and
//!    parked M's: the park/unpark protocol").
//!
//! The thread's life around the loop (start, node binding, hand-off, the
//! pool of M's without a P) is `lifecycle.rs`, the M's shared face
//! `machine.rs`; the thread-local that lets a waker reach the running P's
//! queue is `context.rs`.

mod park;
mod thief;

use super::machine::Machine;
use super::placement::{Next, Poll, Turn};
use super::processor::{Core, Processor};
use super::{BoxCore, Shared};
use crate::counters::ProcCounters;
use crate::task::Runnable;
use crate::tuning::{MAX_LIFO_POLLS, QUIET_POLLS};
use numa_rt_reactor::coop;
use std::cell::Cell;
use std::sync::atomic::{fence, Ordering::*};
use std::sync::Arc;
use std::time::Instant;

/// The state of an M's thread. Lives on the M's stack for its whole life.
pub(crate) struct Worker {
    pub(crate) shared: Arc<Shared>,
    /// The M; while a task is polled or the driver runs, the P's core sits
    /// in its seat (`machine.seat`, see `seat`), so the schedule function
    /// can push to the local queue.
    pub(crate) machine: Arc<Machine>,
    /// Set while the P's driver fires wakers: those wakes are queued FIFO.
    pub(crate) in_driver: Cell<bool>,
}

/// What a retired P's M does next (`Worker::retired_round`).
enum Retired {
    /// The quota grew back (or shutdown): the P works again.
    Resume(BoxCore),
    /// Run this pinned task of the M.
    Run(BoxCore, Runnable),
    /// The P went back to the M that lent it away.
    Gone,
}

impl Worker {
    pub(crate) fn new(shared: Arc<Shared>, machine: Arc<Machine>) -> Self {
        Worker {
            shared,
            machine,
            in_driver: Cell::new(false),
        }
    }

    /// Runs tasks on `core` until the core is handed away or shutdown.
    /// Returns true if `block_in_place` lent the P to another M, or sysmon
    /// took it (retake).
    pub(crate) fn run_core(&self, mut core: BoxCore) -> bool {
        let index = core.index;
        self.shared.procs[index].set_holder(&self.machine);
        self.machine.local.set_machine_p(index);
        self.shared.procs[index]
            .metrics
            .machine
            .store(self.machine.id, Relaxed);
        numa_rt_reactor::context::set_current_p(Some(index));
        self.shared.procs[index].set_running(true);
        // This M's P for the whole loop (it ends when the P goes): indexed
        // once, not twice per poll, on the path every task takes.
        let p = &self.shared.procs[index];
        let lent = loop {
            let task;
            (core, task) = match self.find_runnable(p, core) {
                Some(x) => x,
                None => break false, // shutdown, or given back
            };
            core = match self.run_task(p, core, task) {
                Some(c) => c,
                None => break true, // lent by block_in_place, or retaken
            };
        };
        self.machine.local.set_machine_p(usize::MAX);
        numa_rt_reactor::context::set_current_p(None);
        lent
    }

    /// Runs `task` on `core`, whose processor is `p`.
    fn run_task(&self, p: &Processor, mut core: BoxCore, task: Runnable) -> Option<BoxCore> {
        debug_assert_eq!(p.index, core.index);
        if core.spinning {
            // Go's resetspinning: the last spinner to find work wakes another,
            // since there may be more work than it can take — but only if
            // there is more: other work visible to a spinner after this M
            // stopped counting as one (what it stole and keeps counts not:
            // `Shared::shareable`). A submitter that saw this spinner
            // woke nobody; its push comes before its SeqCst fence and load
            // of `nmspinning`, our SeqCst decrement before our fence and
            // look, so one of us sees the other (the park barrier's
            // pattern). Waking unconditionally, as Go does, woke many M's
            // for nothing when spawns come from outside the P's
            // (spawn_many_remote_idle).
            core.spinning = false;
            if self.shared.idle.stop_spinning(core.node) {
                fence(SeqCst);
                if self.shared.shareable(&core, 0) || self.shared.any_work(core.index, true) {
                    self.shared.wake_idle_p(core.node);
                }
            }
        }
        let meta = task.metadata();
        // The batch before the poll: the task may be gone after it.
        let bits = meta.batch_bits();
        // `Err`: it last ran elsewhere (one load on the common path); `home`:
        // that P, if it was another active one, where the policy may send
        // the task back.
        let moved = meta.polled_last_on(core.index).err();
        let home = moved
            .flatten()
            .filter(|&h| h != core.index && h < self.shared.active_procs());
        let home_p = |h: usize| {
            let h = &self.shared.procs[h];
            h.in_task.load(Relaxed).then(|| h.policy())
        };
        let st = &mut core.policy_state;
        match self
            .shared
            .policy
            .begin_poll(st, p.policy(), meta, bits, home, home_p)
        {
            Poll::Here => {}
            Poll::Home(home) => {
                self.shared.push_inbox(home, task);
                return Some(core);
            }
        }
        if let Some(last) = moved {
            if last.is_some() {
                p.metrics.migrated_polls.incr();
            }
            meta.record_ran_on(core.index);
        }
        p.metrics.polls.incr();
        // Busy time runs from the first task found to the next search for
        // work (see `counters`); a clock read only when a stretch begins.
        core.begin_busy(&p.metrics);
        core.busy_polls = core.busy_polls.wrapping_add(1);
        let hist = p.metrics.poll_histogram.as_deref();
        meta.note_polled(core.clock_ms);
        p.current_task.store(meta.id.as_u64(), Relaxed);
        p.current_site.store(meta.site_bits(), Relaxed);
        core.set_polling(meta);
        p.in_task.store(true, Relaxed);
        // SAFETY: this thread is the M owning the seat.
        unsafe { self.machine.seat.enter_poll(core) };
        let (forced, ns) = match hist {
            None => (coop::budget_counting(|| task.run()).1, 0),
            Some(_) => {
                let t0 = Instant::now();
                let forced = coop::budget_counting(|| task.run()).1;
                let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
                (forced, ns)
            }
        };
        // SAFETY: as above.
        let Some(core) = (unsafe { self.machine.seat.leave_poll() }) else {
            // The P went to another M during the poll (block_in_place, or
            // sysmon's retake): its counters and flags are that M's now, so
            // this poll's end is not recorded on it. A retaken poll was
            // counted as running without a P until here (`retake_p`).
            if self.machine.retaken.swap(false, Relaxed) {
                self.shared.in_place.fetch_sub(1, Relaxed);
            }
            return None;
        };
        p.in_task.store(false, Relaxed);
        if let (Some(buckets), Some(shape)) = (hist, self.shared.config.poll_histogram.as_ref()) {
            buckets[shape.bucket_of(ns)].incr();
            p.metrics.poll_ns.add(ns);
        }
        if forced {
            p.metrics.forced_yields.incr();
        }
        // The end of a hub's poll may end its batch's measurement.
        let busy = || self.shared.busy_time();
        self.shared
            .policy
            .end_poll(&core.policy_state, p.policy(), bits, busy);
        Some(core)
    }

    /// Finds the next task, parking when there is none (Go's `findRunnable`;
    /// the steps are docs/architecture.md, "The scheduling loop"). `None`
    /// on shutdown (the core is then left in its processor's `core_slot`).
    /// `p`: `core`'s processor. The placement policy is asked at two
    /// points, in `local_next` (what the owner runs after `runnext`) and
    /// `on_event_tick` (a split for an idle P); the steal asks it what a
    /// thief may take.
    fn find_runnable(&self, p: &Processor, mut core: BoxCore) -> Option<(BoxCore, Runnable)> {
        debug_assert_eq!(p.index, core.index);
        let shared = &*self.shared;
        let cfg = &shared.config;
        // Woken from a park and not yet found anything: parking again with
        // this set is a spurious wake-up.
        let mut woke = false;
        loop {
            if shared.is_shutdown() {
                core.flush_busy(&p.metrics, false);
                *p.core_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(core);
                return None;
            }
            // Above a shrunk CPU quota: no work but pinned tasks.
            if core.retired {
                match self.retired_round(core) {
                    Retired::Resume(c) => core = c,
                    Retired::Run(c, t) => return Some((c, t)),
                    Retired::Gone => return None,
                }
                continue;
            }
            // 1. Fairness: the other queues first, once in a while.
            if cfg.global_queue_interval.hits(core.tick) {
                if let Some(t) = self.pinned_or_global(&mut core) {
                    return Some((core, t));
                }
            }
            // 2. Keep this P's I/O and timers moving while it is busy.
            if cfg.event_interval.hits(core.tick) && core.tick != core.last_event_tick {
                core = self.on_event_tick(p, core);
                if core.retired {
                    continue;
                }
            }
            // 3. runnext, the policy's pick, the ring.
            if let Some(t) = self.local_next(p, &mut core) {
                return Some((core, t));
            }
            // 4. Pinned tasks, the inbox, the node queue.
            if let Some(t) = self.pinned_or_global(&mut core) {
                return Some((core, t));
            }
            // 5. The poller, without blocking.
            let found;
            (core, found) = self.poll_quietly(core);
            if let Some(t) = found {
                return Some((core, t));
            }
            // 6. Steal. Searching is not busy time: the stretch closes here.
            core.flush_busy(&p.metrics, false);
            if let Some(t) = self.steal_work(&mut core, woke) {
                core.tick = core.tick.wrapping_add(1);
                return Some((core, t));
            }
            // 7. Park (or give the P back to the M that lent it).
            if core.index >= shared.active_procs() {
                core.retired = true;
                continue;
            }
            if woke {
                p.metrics.spurious_wakeups.incr();
            }
            core = self.park(core)?;
            woke = true;
            // Woken to retire (sysmon's quota re-read wakes idle P's above it).
            if core.index >= shared.active_procs() {
                core.retired = true;
            }
        }
    }

    /// This M's pinned tasks (one), then a share of the P's inbox or the
    /// node queue (`take_global`).
    #[inline]
    fn pinned_or_global(&self, core: &mut Core) -> Option<Runnable> {
        if let Some(t) = self.machine.local.pop() {
            core.tick = core.tick.wrapping_add(1);
            return Some(t);
        }
        // A share, not one task: with local work that never runs out
        // (tasks that keep yielding), one task per 61 ticks would starve
        // the node queue (tokio's spawn_many_remote_busy1).
        self.take_global(core)
    }

    /// Once per `event_interval` ticks: the busy stretch's flush, a
    /// non-blocking poll of the P's driver, the quota re-read (marks the
    /// core retired), and the policy's split for an idle P.
    fn on_event_tick(&self, p: &Processor, mut core: BoxCore) -> BoxCore {
        let shared = &*self.shared;
        core.last_event_tick = core.tick;
        core.flush_busy(&p.metrics, true);
        core = self.poll_driver(core, false);
        if core.index >= shared.active_procs() {
            core.retired = true;
            return core;
        }
        let idle_p = shared.idle.node_npidle_hint(core.node) != 0;
        let node = core.node;
        let inject = &shared.nodes[node].inject;
        let (st, queue) = (&mut core.policy_state, &mut core.queue);
        if let Next::Split(tasks) = shared
            .policy
            .owner_next(st, p.policy(), Turn::Tick { idle_p })
        {
            for t in tasks {
                queue.push_back(t, inject);
            }
            shared.wake_idle_p(node);
        }
        core
    }

    /// `runnext` (at most [`MAX_LIFO_POLLS`] in a row), the policy's pick
    /// (its batch queue), then the ring; `runnext` past its cap when the
    /// ring is empty.
    #[inline]
    fn local_next(&self, p: &Processor, core: &mut Core) -> Option<Runnable> {
        let m = &p.metrics;
        if core.lifo_polls < MAX_LIFO_POLLS {
            if let Some(t) = core.queue.pop_runnext() {
                core.lifo_polls += 1;
                m.runnext_polls.incr();
                return Some(t);
            }
        }
        let policy = &self.shared.policy;
        if core.policy_state.has_work() {
            let node = core.node;
            let inject = &self.shared.nodes[node].inject;
            let ring_empty = core.queue.ring_is_empty();
            let (st, queue) = (&mut core.policy_state, &mut core.queue);
            let run = match policy.owner_next(st, p.policy(), Turn::Pick { ring_empty }) {
                Next::Run(t) => Some(t),
                Next::Split(tasks) => {
                    for t in tasks {
                        queue.push_back(t, inject);
                    }
                    self.shared.wake_idle_p(node);
                    None
                }
                Next::Ring => None,
            };
            if let Some(t) = run {
                core.lifo_polls = 0;
                core.tick = core.tick.wrapping_add(1);
                return Some(t);
            }
        }
        if let Some((t, lifo)) = core.queue.pop(false) {
            if lifo {
                // The ring was empty: runnext past its cap, the ring's turn
                // taken by nobody. That turn is a tick, and the cap starts
                // over: a pair waking each other through `runnext` stopped
                // the ticks, and with them step 1, for as long as it
                // ping-ponged (a task in the node queue or inbox waited until
                // it stopped). Not step 2: the P's poller is left to the
                // node's watcher and sysmon's poll (Go too leaves the network
                // to sysmon while work remains); polling it here cost the
                // 44 ns pipeline 4-7%. One tick per cap, not per poll: the
                // pair's polls still inherit the tick. Go bounds the same
                // pair with sysmon's 10 ms preemption of an inherited slice;
                // tokio requeues the task, which then takes a full tick.
                core.lifo_polls = 0;
                core.tick = core.tick.wrapping_add(1);
                core.last_event_tick = core.tick;
                m.runnext_polls.incr();
            } else {
                core.lifo_polls = 0;
                policy.owner_next(&mut core.policy_state, p.policy(), Turn::RingRan);
                core.tick = core.tick.wrapping_add(1);
            }
            return Some(t);
        }
        core.lifo_polls = 0;
        policy.owner_next(&mut core.policy_state, p.policy(), Turn::RingDry);
        None
    }

    /// Step 5: the P's poller without blocking, and what it queued. The
    /// node's watcher may skip it while it keeps finding nothing: its park
    /// blocks on every poller of the node, its own included, so it sees
    /// the same events one syscall later. It still polls once per
    /// [`QUIET_POLLS`] skips, and every time again once one finds work.
    fn poll_quietly(&self, mut core: BoxCore) -> (BoxCore, Option<Runnable>) {
        let skip = core.quiet_polls >= QUIET_POLLS
            && core.skipped_polls < QUIET_POLLS
            && core.driver.as_ref().is_some_and(|d| d.watches());
        if skip {
            core.skipped_polls += 1;
            return (core, None);
        }
        core.skipped_polls = 0;
        core = self.poll_driver(core, false);
        if let Some((t, _)) = core.queue.pop(true) {
            core.quiet_polls = 0;
            core.tick = core.tick.wrapping_add(1);
            return (core, Some(t));
        }
        core.quiet_polls = core.quiet_polls.saturating_add(1);
        (core, None)
    }

    /// One stay of a P above a shrunk CPU quota (sysmon's re-read; see
    /// docs/architecture.md, "sysmon"): the P is marked retired (not idle:
    /// nobody wakes it for work), hands what is queued on it (ring,
    /// `runnext`, inbox) to its node's queue for the other P's, runs only
    /// this M's pinned tasks (they cannot move), returns itself to an M
    /// that lent it away and asks for it back, and otherwise sleeps in its
    /// driver. Targeted wakes reach it (`Idle::take_specific`): a pinned
    /// task, an inbox push, an asker, the quota growing back. As its node's
    /// watcher it may fire I/O wakers into its own ring; the next turn of
    /// the loop hands them on. Its poller is watched like an idle P's.
    fn retired_round(&self, mut core: BoxCore) -> Retired {
        let shared = &*self.shared;
        let (idx, node) = (core.index, core.node);
        let p = &shared.procs[idx];
        if !p.retired.load(Relaxed) {
            core.flush_busy(&p.metrics, false);
            if core.spinning {
                core.spinning = false;
                if shared.idle.stop_spinning(node) {
                    shared.wake_idle_p(node);
                }
            }
            p.set_running(false);
            p.retired.store(true, Relaxed);
            // (barrier) Under the idle lock: a targeted waker pushes, then
            // takes that lock in `take_specific`; our checks below come
            // after it, so one of us sees the other.
            shared.idle.retire(idx);
        }
        loop {
            if shared.is_shutdown() || idx < shared.active_procs() {
                shared.idle.unretire(idx);
                p.retired.store(false, Relaxed);
                p.set_running(true);
                core.retired = false;
                return Retired::Resume(core);
            }
            let mut moved = core.drain_local(p);
            moved.extend(p.inbox.drain());
            if !moved.is_empty() {
                let inject = &shared.nodes[node].inject;
                for t in moved {
                    inject.push(t);
                }
                shared.wake_idle_p(node);
            }
            if let Some(t) = self.machine.local.pop() {
                return Retired::Run(core, t);
            }
            core = match self.give_back(core) {
                Ok(()) => return Retired::Gone,
                Err(c) => c,
            };
            p.metrics.forget_unpark();
            core = self.poll_driver(core, true);
            // A targeted wake (a pinned task, the quota) unparks this M too:
            // its sample is taken here, not left for a later park.
            p.metrics.note_woken();
        }
    }

    /// Takes a share of the P's inbox or else the node queue into the
    /// local queue (Go's `globrunqget` share, capped by the room in the
    /// ring); returns the oldest to run now.
    fn take_global(&self, core: &mut Core) -> Option<Runnable> {
        let shared = &*self.shared;
        let p = &shared.procs[core.index];
        let node = &shared.nodes[core.node];
        // The common case at light load, checked before any bookkeeping:
        // nothing queued for this P or its node.
        if p.inbox.is_empty() && node.inject.is_empty() {
            return None;
        }
        // At most half the room left in the ring (it may hold work already,
        // at a fairness check), and Go's share of the node queue.
        let room = (crate::queue::CAPACITY - core.queue.len().min(crate::queue::CAPACITY)) / 2;
        let max = room.clamp(1, crate::queue::CAPACITY / 2);
        let mut grab = std::mem::take(&mut core.grab);
        if !p.inbox.is_empty() {
            p.inbox.take(max, &mut grab);
        } else if !node.inject.is_empty() {
            let len = node.inject.len();
            let n = (len / node.procs.len().max(1) + 1).min(len).min(max);
            node.inject.take(n, &mut grab);
        }
        // Oldest first: run the first, queue the rest in order.
        let mut tasks = grab.drain(..);
        let first = tasks.next();
        if first.is_some() {
            p.metrics.global_polls.incr();
            core.tick = core.tick.wrapping_add(1);
        }
        for t in tasks {
            core.queue.push_back(t, &node.inject);
        }
        core.grab = grab;
        first
    }

    /// Polls (or parks in) the P's driver. The core sits in the thread's
    /// context meanwhile, so the wakers the driver fires reach its queue.
    fn poll_driver(&self, mut core: BoxCore, block: bool) -> BoxCore {
        let mut driver = core
            .driver
            .take()
            .expect("a P's driver is only out while its M is in it");
        // SAFETY: this thread is the M owning the seat (outside a poll).
        unsafe { self.machine.seat.with_owned(|s| *s = Some(core)) };
        self.in_driver.set(true);
        if block {
            driver.park(None);
        } else {
            driver.poll_now();
        }
        self.in_driver.set(false);
        // SAFETY: as above.
        let mut core = unsafe { self.machine.seat.with_owned(Option::take) }
            .expect("the core stays with its M while in the driver");
        core.driver = Some(driver);
        // The driver queued what it woke here without waking anybody (see
        // `Shared::schedule`). This M runs the next task itself; only if more
        // are queued than this M reserves for itself is a spinner worth a
        // wake-up (tokio's rule, bounded by the keep rule's reserve; Go's `startIdle`
        // wakes one M per extra goroutine).
        if core.queue.len() > 1 && self.shared.shareable(&core, 1) {
            self.shared.wake_idle_p_hint(core.node);
        }
        core
    }
}

/// The owner's bookkeeping of a P's busy stretches and queues, kept beside
/// the loop that is their only writer (`Core` is defined in
/// `processor.rs` with the P it belongs to).
impl Core {
    /// Every queued task of this P (ring, `runnext`, batch queue).
    pub(crate) fn drain_local(&mut self, p: &Processor) -> Vec<Runnable> {
        let mut out = self.queue.drain();
        out.extend(self.policy_state.drain(p.policy()));
        out
    }

    /// Starts a busy stretch now unless one is open (a P handed over by
    /// `block_in_place` stays busy across the hand-over).
    #[inline]
    pub(crate) fn begin_busy(&mut self, counters: &ProcCounters) {
        if self.busy_since.is_none() {
            let now = Instant::now();
            self.busy_since = Some(now);
            let ns = crate::task::epoch_ns(now);
            self.clock_ms = crate::task::ms_of_epoch_ns(ns);
            self.busy_polls = 0;
            counters.open_busy(ns);
        }
    }

    /// Adds the open busy stretch to `counters`; keeps measuring from now if
    /// `cont`, else closes it (the P goes idle).
    pub(crate) fn flush_busy(&mut self, counters: &ProcCounters, cont: bool) {
        let Some(since) = self.busy_since else { return };
        let now = Instant::now();
        let ns = now.saturating_duration_since(since).as_nanos();
        counters.record_busy(ns.min(u64::MAX as u128) as u64, self.busy_polls);
        if counters.unbroken_busy.load(Relaxed) != cont {
            counters.unbroken_busy.store(cont, Relaxed);
        }
        self.busy_polls = 0;
        self.busy_since = cont.then_some(now);
        if cont {
            let ns = crate::task::epoch_ns(now);
            self.clock_ms = crate::task::ms_of_epoch_ns(ns);
            counters.open_busy(ns);
        } else {
            counters.close_busy();
        }
    }
}

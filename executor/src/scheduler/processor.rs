//! A processor (Go's P): the right to run tasks.
//!
//! [`Processor`] is what everyone may see: the thief's end of the local run
//! queue, the inbox for tasks sent to this P, the unparker of its driver and
//! its metrics. [`Core`] is what only the M currently holding the P touches:
//! the owner's end of the queue, the driver (poller and timers), tick
//! counters and the random source for stealing. Handing a P to another M
//! (block_in_place, shutdown) is moving its `Box<Core>`.
//!
//! `Core`'s methods live beside their only users, so that following the
//! core through the run loop stays in the loop's files: the busy stretch
//! and `drain_local` in `worker/mod.rs`, the victim order's `rand` in
//! `worker/thief.rs`, the park re-check's `has_local_work` in
//! `worker/park.rs`. Here: the task-in-poll address, whose `unsafe`
//! reader's contract needs the field private.

use super::inject::Inject;
use super::machine::Machine;
use super::placement::{Hints, PolicyCore, PolicyP, RunningBatch};
use crate::counters::{NewLine, ProcCounters};
use crate::queue;
use crate::task::{Runnable, TaskMeta};
use numa_rt_reactor::{Driver, Unparker};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// On its own cache lines (128 bytes, as `queue::Inner`), the P's sit side
/// by side in one slice, and within it fields are grouped by who writes
/// them: what thieves and wakers read (written when the P parks, splits or
/// changes its batch queue), what its owner writes on every poll
/// (`in_task`, `current_task`), the inbox other threads push to, and the
/// counters (three groups of their own, see `ProcCounters`). A spinning
/// thief's look at a victim must not take the line the victim's M writes
/// per poll away from it.
#[repr(C, align(128))]
pub(crate) struct Processor {
    pub(crate) index: usize,
    pub(crate) node: usize,
    pub(crate) steal: queue::Steal<Runnable>,
    /// Wakes the M parked in this P's driver.
    pub(crate) unparker: Unparker,
    /// True while an M is running tasks on this P (not parked): a thief only
    /// waits for `runnext` (Go's 3 µs rule) when its owner may run it soon.
    pub(crate) running: AtomicBool,
    /// True while the P is retired: above a CPU quota that shrank (sysmon's
    /// re-read), it takes no work. Relaxed, like `in_task`: `saturated`
    /// leaves it out, and a stale value only delays a remote steal.
    pub(crate) retired: AtomicBool,
    /// The placement policy's hints for thieves and sysmon: written rarely,
    /// read by every look, so on this first line. Placement's type, its
    /// fields private to it; private here too: read only through
    /// [`Processor::policy`].
    policy_hints: Hints,
    _owner: NewLine,
    /// True while the P's M is inside a task's poll. A node all of whose P's
    /// are in a task has nobody about to look at its queue, and only then
    /// may M's of other nodes steal from it (`Shared::saturated`). Relaxed:
    /// a stale value only delays or hastens a remote steal; the node's own
    /// M's find the work through the park barrier either way.
    pub(crate) in_task: AtomicBool,
    /// Release on set, Acquire on check: pairs so the holder that sees true
    /// finds the asker under the lock.
    has_asker: AtomicBool,
    /// The id of the task in (or last in) a poll on this P: sysmon's stall
    /// report and the schedtrace read it. Relaxed: a diagnostic.
    pub(crate) current_task: AtomicU64,
    /// Beside `current_task`: its spawn location while it has no registry
    /// entry (its first poll; `TaskMeta::site_bits`), for the stall report
    /// of a task stuck in its first poll, which the dump does not list.
    /// Relaxed: a diagnostic.
    pub(crate) current_site: std::sync::atomic::AtomicU32,
    /// The batch of the task in a poll (placement's `RunningBatch`),
    /// written by the owner per poll while batches are on, so on this line
    /// with `in_task`. Private, like `policy_hints`.
    policy_running: RunningBatch,
    /// The M that holds (or last held) this P: where sysmon's retake finds
    /// the core of a P stuck in a poll (in that M's seat). Set once per
    /// `run_core`; it may name an M that has just given the P away, which
    /// retake checks under its protocol (see `seat`).
    holder: Mutex<Option<Arc<Machine>>>,
    /// Where a `Core` rests when no M holds it: only during shutdown.
    pub(crate) core_slot: Mutex<Option<Box<Core>>>,
    /// The M's that lost this P (block_in_place, a retake) and want it
    /// back, oldest first; `has_asker` lets the holder check without
    /// locking. Several may wait (a retaken M, then the M that took over
    /// and was retaken in turn): an M with pinned tasks is served before
    /// one without, since only it can run them (see `take_asker`).
    askers: Mutex<Vec<Arc<Machine>>>,
    _inbox: NewLine,
    /// Tasks other threads sent to this P specifically (root-task
    /// distribution); the owner drains it like a small global queue.
    pub(crate) inbox: Inject,
    pub(crate) metrics: ProcCounters,
}

const _: () = {
    assert!(std::mem::offset_of!(Processor, in_task) == 128);
    assert!(std::mem::offset_of!(Processor, inbox) % 128 == 0);
    assert!(std::mem::offset_of!(Processor, metrics) % 128 == 0);
};

pub(crate) struct Core {
    pub(crate) index: usize,
    pub(crate) node: usize,
    pub(crate) queue: queue::Local<Runnable>,
    /// `None` only while the M is parked in it (the core then sits in the
    /// thread's context so wakes fired by the driver can reach the queue).
    pub(crate) driver: Option<Driver>,
    /// Scheduling ticks: one per task not taken from `runnext`. Every
    /// `global_queue_interval`-th tick checks the node queue first.
    pub(crate) tick: u32,
    /// Consecutive `runnext` polls in the current tick (capped: see
    /// `MAX_LIFO_POLLS`).
    pub(crate) lifo_polls: u32,
    /// Whether this P's M is counted in `nmspinning`.
    pub(crate) spinning: bool,
    /// xorshift state for random victim order.
    pub(crate) rng: u64,
    /// The tick at which the driver was last polled for `event_interval`
    /// (ticks do not move during runnext runs: poll once per tick value).
    pub(crate) last_event_tick: u32,
    /// Consecutive non-blocking polls before a park (step 5 of the loop)
    /// that found nothing, and how many such polls the watcher has skipped
    /// since its last one: see `Worker::find_runnable`.
    pub(crate) quiet_polls: u8,
    pub(crate) skipped_polls: u8,
    /// Reused buffer for the tasks taken at once from the inbox or node
    /// queue (`Worker::take_global`).
    pub(crate) grab: Vec<Runnable>,
    /// When the current busy stretch began: set when the M runs a task with
    /// no stretch open, flushed into the P's counters every `event_interval`
    /// ticks, and closed when the M runs out of tasks and starts to search
    /// or park (see `counters`).
    pub(crate) busy_since: Option<Instant>,
    /// Task polls since `busy_since`.
    pub(crate) busy_polls: u32,
    /// The clock of the current busy stretch in ms since the task epoch, stamped
    /// on each task polled (the task dump's "last polled").
    pub(crate) clock_ms: u32,
    /// Set while this P is retired (above a shrunk CPU quota): the run loop
    /// then only hands its work to the node and runs its M's pinned tasks.
    pub(crate) retired: bool,
    /// The placement policy's owner-only state (the batch queue, the
    /// poll's wake edges): placement's type, its fields private to
    /// `placement/`; the mechanism only hands it to the policy's verbs
    /// (beside the ring where an answer may move tasks) and asks it
    /// [`PolicyCore::has_work`] and [`PolicyCore::drain`].
    pub(crate) policy_state: PolicyCore,
    /// The `TaskMeta` address of the task in a poll on this core (0: none
    /// yet), for the schedule function to name the waker of a wake edge
    /// ([`Core::polling`]). An address so that `Core` stays `Send`.
    polling: usize,
}

impl Core {
    /// Notes `meta` as the task whose poll on this core begins now.
    #[inline]
    pub(crate) fn set_polling(&mut self, meta: &TaskMeta) {
        self.polling = std::ptr::from_ref(meta) as usize;
    }

    /// The task in the poll on this core (a reference for as long as the
    /// caller stays inside that poll: not tied to `self`, so the core's
    /// policy state and ring can be handed out beside it).
    ///
    /// # Safety
    ///
    /// Only during that poll, from its own M: the schedule function
    /// reaching this core through its seat outside the driver (the seat
    /// holds the core only in a poll or in the driver, and a core handed
    /// to another M is reached through that M's seat, in that M's poll).
    /// `Worker::run_task` sets the address before each poll, and async-task
    /// keeps the task's allocation alive for the whole poll.
    #[inline]
    pub(crate) unsafe fn polling<'t>(&self) -> Option<&'t TaskMeta> {
        // SAFETY: the caller's contract: the address names the task whose
        // poll is in progress, alive until the poll returns; only shared
        // access, to atomics and immutable fields.
        (self.polling != 0).then(|| unsafe { &*(self.polling as *const TaskMeta) })
    }
}

impl Processor {
    pub(crate) fn new(
        index: usize,
        node: usize,
        driver: Driver,
        histogram: Option<&crate::HistogramConfig>,
    ) -> (Processor, Box<Core>) {
        let (local, steal) = queue::new();
        let p = Processor {
            index,
            node,
            steal,
            inbox: Inject::new(),
            unparker: driver.unparker(),
            running: AtomicBool::new(true),
            in_task: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            metrics: ProcCounters::new(histogram),
            policy_hints: Hints::default(),
            current_task: AtomicU64::new(0),
            current_site: std::sync::atomic::AtomicU32::new(crate::task::NO_SITE),
            policy_running: RunningBatch::default(),
            holder: Mutex::new(None),
            core_slot: Mutex::new(None),
            askers: Mutex::new(Vec::new()),
            has_asker: AtomicBool::new(false),
            _owner: NewLine,
            _inbox: NewLine,
        };
        let core = Box::new(Core {
            index,
            node,
            queue: local,
            driver: Some(driver),
            tick: 0,
            lifo_polls: 0,
            spinning: false,
            rng: seed(index),
            last_event_tick: u32::MAX,
            quiet_polls: 0,
            skipped_polls: 0,
            grab: Vec::new(),
            busy_since: None,
            busy_polls: 0,
            clock_ms: 0,
            retired: false,
            policy_state: PolicyCore::new(),
            polling: 0,
        });
        (p, core)
    }

    /// The placement policy's state of this P (the policy's view over its
    /// two fields, one per cache line, and the P's counters).
    #[inline]
    pub(crate) fn policy(&self) -> PolicyP<'_> {
        PolicyP::new(&self.policy_hints, &self.policy_running, &self.metrics)
    }

    /// Records `m` as wanting this P back.
    pub(crate) fn ask_back(&self, m: &Arc<Machine>) {
        let mut a = self.askers.lock().unwrap_or_else(|e| e.into_inner());
        if !a.iter().any(|x| Arc::ptr_eq(x, m)) {
            a.push(m.clone());
        }
        self.has_asker.store(true, Release);
    }

    /// Whether an asker satisfies `f`.
    pub(crate) fn any_asker(&self, f: impl FnMut(&Arc<Machine>) -> bool) -> bool {
        self.askers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(f)
    }

    /// Forgets `m` as an asker (it is exiting: a holder must not wait for
    /// it to reach its pool).
    pub(crate) fn forget_asker(&self, m: &Arc<Machine>) {
        let mut a = self.askers.lock().unwrap_or_else(|e| e.into_inner());
        a.retain(|x| !Arc::ptr_eq(x, m));
        self.has_asker.store(!a.is_empty(), Relaxed);
    }

    /// Whether an M waits to get this P back (the holder's park re-check).
    pub(crate) fn has_asker(&self) -> bool {
        // Acquire pairs with the Release store in `ask_back`.
        self.has_asker.load(Acquire)
    }

    /// Takes the M that should get this P back, among those for which
    /// `usable` holds (waiting in its pool): one with pinned tasks queued
    /// first, then one with pinned tasks alive, then the oldest. Askers
    /// that hold a P again are forgotten; one neither holding a P nor in
    /// its pool yet (on its way there) stays for the next look.
    pub(crate) fn take_asker(
        &self,
        mut usable: impl FnMut(&Arc<Machine>) -> bool,
    ) -> Option<Arc<Machine>> {
        if !self.has_asker.load(Acquire) {
            return None;
        }
        let mut a = self.askers.lock().unwrap_or_else(|e| e.into_inner());
        a.retain(|m| !m.local.holds_p());
        let ok: Vec<bool> = a.iter().map(&mut usable).collect();
        let pick = (0..a.len())
            .find(|&i| ok[i] && !a[i].local.is_empty())
            .or_else(|| (0..a.len()).find(|&i| ok[i] && a[i].local.has_live_tasks()))
            .or_else(|| (0..a.len()).find(|&i| ok[i]));
        let m = pick.map(|i| a.remove(i));
        self.has_asker.store(!a.is_empty(), Relaxed);
        m
    }

    /// Records the M that now holds this P (`Worker::run_core`).
    pub(crate) fn set_holder(&self, m: &Arc<Machine>) {
        let mut h = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        if !h.as_ref().is_some_and(|x| Arc::ptr_eq(x, m)) {
            *h = Some(m.clone());
        }
    }

    /// Forgets `m` as this P's holder (it is handing the P on; the next
    /// holder records itself): retake then makes no request to an M that
    /// lost this P (see `seat`). Returns whether `m` was the holder.
    pub(crate) fn clear_holder(&self, m: &Arc<Machine>) -> bool {
        let mut h = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        if h.as_ref().is_some_and(|x| Arc::ptr_eq(x, m)) {
            *h = None;
            true
        } else {
            false
        }
    }

    /// The M that holds (or last held) this P (sysmon's retake).
    pub(crate) fn holder(&self) -> Option<Arc<Machine>> {
        self.holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_running(&self, running: bool) {
        // Relaxed: a hint for thieves, never a correctness condition.
        self.running.store(running, Relaxed);
    }
}

fn seed(index: usize) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1
}

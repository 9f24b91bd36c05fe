//! A processor (Go's P): the right to run tasks.
//!
//! [`Processor`] is what everyone may see: the thief's end of the local run
//! queue, the inbox for tasks sent to this P, the unparker of its driver and
//! its metrics. [`Core`] is what only the M currently holding the P touches:
//! the owner's end of the queue, the driver (poller and timers), tick
//! counters and the random source for stealing. Handing a P to another M
//! (block_in_place, shutdown) is moving its `Box<Core>`.

use super::hub_mode::HubModes;
use super::inject::Inject;
use super::machine::Machine;
use crate::counters::{NewLine, ProcCounters};
use crate::queue;
use crate::task::Runnable;
use numa_rt_reactor::{Driver, Unparker};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What [`Processor::steal_look`] saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Look {
    Nothing,
    /// Queued tasks its own M reaches soon (`keep_for_owner`).
    Kept,
    Stealable,
}

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
    /// A thief that found nothing else asks the owner to split its batch
    /// queue into the ring. Relaxed: the owner reads it before each
    /// batch-queue pop; the tasks never depend on it (the owner runs them
    /// itself otherwise), only how soon they spread does.
    pub(crate) split: AtomicBool,
    /// The owner split its batch: members of the running batch went to the
    /// ring for another P to take (a wake displaced one while a P was idle,
    /// or `bq_split`). Until the ring next runs dry, the owner
    /// keeps none of it from thieves (`keep_for_owner`): those tasks were
    /// put there to run in parallel, and keeping them made the woken P find
    /// nothing and park again (an 8-stage pipeline at 2 P's: ~450 spurious
    /// wake-ups per 100,000 values). Relaxed: a hint, like `split`.
    pub(crate) shared_out: AtomicBool,
    /// Tasks in the owner's batch queue (`Core::bq`), published for
    /// thieves and the park re-check. Relaxed: a hint; a stale value delays
    /// a split by one look, and the tasks are the owner's to run anyway.
    pub(crate) bq_len: AtomicU32,
    /// The number of a poll sysmon found running long while tasks waited
    /// in the ring and a P idled (`mark_long_poll`; 0: none): while the
    /// P's poll counter still reads it, thieves keep nothing from it.
    /// Relaxed: a hint; the mark expires by itself when the next poll
    /// begins.
    pub(crate) long_mark: AtomicU64,
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
    /// The batch of the task in a poll (`TaskMeta::batch_bits`; 0: none),
    /// for sysmon's offer (`sysmon::offer_queue`), which leaves a batch
    /// held kept here alone. Relaxed: a hint read between rounds.
    pub(crate) running_bits: AtomicU32,
    /// The M that holds (or last held) this P: where sysmon's retake finds
    /// the core of a P stuck in a poll (in that M's seat). Set once per
    /// `run_core`; it may name an M that has just given the P away, which
    /// retake checks under its protocol (see `seat`).
    holder: Mutex<Option<Arc<Machine>>>,
    /// Where a `Core` rests when no M holds it: only during shutdown.
    pub(crate) core_slot: Mutex<Option<Box<Core>>>,
    /// The M that gave this P away (block_in_place) and wants it back;
    /// `has_asker` lets the holder check without locking.
    asker: Mutex<Option<Arc<Machine>>>,
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
    /// Reused buffer for batches taken from the inbox or node queue.
    pub(crate) batch: Vec<Runnable>,
    /// When the current busy batch began: set when the M runs a task with
    /// no batch open, flushed into the P's counters every `event_interval`
    /// ticks, and closed when the M runs out of tasks and starts to search
    /// or park (see `counters`).
    pub(crate) busy_since: Option<Instant>,
    /// Task polls since `busy_since`.
    pub(crate) batch_polls: u32,
    /// The clock of the current batch in ms since the task epoch, stamped
    /// on each task polled (the task dump's "last polled").
    pub(crate) clock_ms: u32,
    /// Set while this P is retired (above a shrunk CPU quota): the run loop
    /// then only hands its work to the node and runs its M's pinned tasks.
    pub(crate) retired: bool,
    /// The address of the `TaskMeta` of the task in a poll on this P, set
    /// by `Worker::run_task` before each poll (0 before the first): the
    /// waker side of a wake edge (`Shared::schedule` learns batches from
    /// it). Only read while a poll is in progress, when it names the task
    /// being polled: see `Shared::learn_edge`. An address, not a pointer, so
    /// that `Core` stays `Send`.
    pub(crate) running_meta: usize,
    /// The different tasks the poll in progress has woken (reset before
    /// each poll; counted against the last two wakees, so a pipeline stage
    /// waking its two neighbours again and again counts 2): a poll that
    /// reaches `batch::HUB_WAKES` is a hub's (see `batch::note_wake`).
    pub(crate) poll_wakes: u32,
    /// The last two tasks the poll woke (cleared before each poll).
    pub(crate) last_wakees: [usize; 2],
    /// The batch queue: tasks of a hub's batch held kept (`hub_mode`) that
    /// a wake displaced from `runnext` (docs/architecture.md, "Batches").
    /// Owner-only: thieves never take from it; a thief that finds nothing
    /// else asks the owner to split it (`Processor::split`), which the
    /// owner does once the batch is no longer kept.
    pub(crate) bq: std::collections::VecDeque<Runnable>,
    /// Batch-queue polls since the ring's last turn (see `MAX_BATCH_RUN`).
    pub(crate) bq_run: u32,
}

/// Most tasks a batch queue holds; beyond it, displaced members go to the
/// ring as before, stealable. A kept hub batch is one measured to carry
/// little work per release (`hub_mode`), so the queue holds a large fan-in's producers (the 64-producer
/// fan-in needs 63; at 32, the rest went to thieves and fought the kept
/// half for the channel). Owner-only and run before the ring
/// (`MAX_BATCH_RUN` in a row), so a deep queue delays the ring's tasks by
/// at most that many polls per turn.
pub(crate) const BATCH_QUEUE_CAP: usize = 1024;

impl Core {
    /// Whether this P has queued work of its own: ring, `runnext` or batch queue.
    #[inline]
    pub(crate) fn has_local_work(&self) -> bool {
        !self.queue.is_empty() || !self.bq.is_empty()
    }

    /// Whether this P (`p`, this core's processor) holds work a thief woken
    /// now could take: ring tasks beyond those the keep rule leaves to its
    /// own M ([`Processor::keep_while_held`]; `next`: tasks at the ring's
    /// head this M runs before anything else), or a batch queue (a thief
    /// asks it to split). The wake rules after a driver poll and after a
    /// spinner's steal ask this, not whether any work is queued: a P woken
    /// for kept work found only that, spun `KEPT_SPIN` and parked again. At
    /// 4 HTTP connections on 2 CPUs that was ~0.07 wake-ups per request,
    /// each an eventfd write, a futile steal pass, a spin and a park.
    #[inline]
    pub(crate) fn shareable(&self, p: &Processor, next: usize) -> bool {
        !self.bq.is_empty() || self.queue.len().saturating_sub(next) > p.keep_while_held() as usize
    }

    /// Every queued task of this P (ring, `runnext`, batch queue).
    pub(crate) fn drain_local(&mut self, p: &Processor) -> Vec<Runnable> {
        let mut out = self.queue.drain();
        out.extend(self.bq.drain(..));
        p.bq_len.store(0, Relaxed);
        out
    }

    /// Keeps `t`, a member of the running batch, in the batch queue.
    #[inline]
    pub(crate) fn bq_push(&mut self, t: Runnable, p: &Processor) {
        self.bq.push_back(t);
        p.bq_len.store(self.bq.len() as u32, Relaxed);
    }

    /// The batch queue's oldest task.
    #[inline]
    pub(crate) fn bq_pop(&mut self, p: &Processor) -> Option<Runnable> {
        let t = self.bq.pop_front()?;
        p.bq_len.store(self.bq.len() as u32, Relaxed);
        Some(t)
    }

    /// Splits the batch queue for a thief (occam-π's rule: members
    /// runnable at once while another P is idle): its tasks go to the ring,
    /// where thieves may take them. True if anything moved.
    pub(crate) fn bq_split(&mut self, p: &Processor, overflow: &Inject) -> bool {
        p.split.store(false, Relaxed);
        if self.bq.is_empty() {
            return false;
        }
        while let Some(t) = self.bq.pop_front() {
            self.queue.push_back(t, overflow);
        }
        p.bq_len.store(0, Relaxed);
        p.metrics.batch_splits.incr();
        p.share_out();
        true
    }
}

/// The queued work a running P keeps from thieves, in time: the tasks its
/// own M reaches within this long at its mean poll time stay with it (see
/// [`Processor::keep_for_owner`]). 20 µs: four ~5 µs HTTP polls, or 80 of
/// the scheduler benches' sub-µs polls (their rings hold 100-256, so they
/// are still shared). tokio and Go steal half of any non-empty queue.
/// Measured on 2 CPUs at 16 P's and 4 connections: stolen polls per request
/// 0.23-0.24 -> 0.15 (50 µs: 0.12); see docs/architecture.md, "Stealing".
/// Polls that run far longer than this break the promise that kept tasks
/// run soon: sysmon offers their P's queue (`sysmon::offer_queue`, from
/// 100 µs per poll on average).
const STEAL_BACKLOG_NS: u64 = 20_000;

/// The floor of the per-task estimate in [`Processor::keep_for_owner`]:
/// a fresh P's mean poll time is 0, and a queue of tiny tasks still costs
/// its dispatch.
const MIN_POLL_ESTIMATE_NS: u64 = 250;

impl Processor {
    /// How many of the tasks in this P's ring a thief leaves to it: those
    /// its own M reaches within [`STEAL_BACKLOG_NS`] at its mean poll time,
    /// or none when nobody runs the P (its M is parked or being handed it).
    /// Stealing those would only move tasks (a cold cache, a socket whose
    /// readiness keeps arriving at this P's poller, a task woken back here)
    /// to save less time than the move costs. A P whose queues have not run
    /// dry for a whole `event_interval` keeps nothing either: its ring is
    /// refilled as fast as it runs (yielding tasks, a pipeline), so it
    /// never finishes it soon, and an idle P must share the load. Nor does
    /// a P whose ring holds batch work it shared out (`shared_out`: the
    /// batch split, and the tasks went to the ring to run elsewhere). The
    /// steal loop and the park re-check (`Shared::any_work`) both use it, so
    /// a spinner that leaves a short queue alone also sleeps.
    ///
    /// Polls that run long make the mean, folded at batch flushes, a poor
    /// guess for `event_interval` polls: sysmon, which sees each P's polls
    /// and busy time between its rounds, marks a P running long polls
    /// while its ring waits and a P idles (`long_mark`), and a marked P
    /// keeps nothing for the rest of that poll (`sysmon::offer_queue`).
    /// Relaxed loads: a hint; a stale answer steals one round later or one
    /// task more, and the queue's own atomics order the steal itself.
    #[inline]
    pub(crate) fn keep_for_owner(&self) -> u32 {
        if !self.running.load(Relaxed) {
            return 0;
        }
        self.keep_while_held()
    }

    /// [`Processor::keep_for_owner`] for a P held by an M, whether or not
    /// `running` says so yet: an M back from its park's poll with tasks
    /// sets it a moment later, and the thieves then see this keep.
    #[inline]
    pub(crate) fn keep_while_held(&self) -> u32 {
        if self.metrics.unbroken_batch.load(Relaxed) || self.shared_out.load(Relaxed) {
            return 0;
        }
        let per = self
            .metrics
            .poll_time_ewma_ns
            .get()
            .max(MIN_POLL_ESTIMATE_NS);
        // sysmon saw this P's polls run long: the mean says nothing of
        // them yet. (The poll counter is read only when a mark exists.)
        if self.long_poll_marked() {
            return 0;
        }
        (STEAL_BACKLOG_NS / per).min(u64::from(u32::MAX)) as u32
    }

    /// Whether a task in this P's `runnext` is its owner's (when its ring is
    /// empty) because a kept batch runs here (`hubs`: the hub modes): one
    /// of its members is in the poll (`running_bits`), or waits in the
    /// batch queue (only kept members wait in one). `runnext` then holds
    /// the batch's next member or its hub. Taken, a member ran beside the
    /// hub on another core, contending on the channel the batch is kept
    /// for (a producer there finds room at every try, never blocks and so
    /// never comes back), and a hub taken took the batch's wakes to another
    /// P while the members queued here still ran here (docs/architecture.md,
    /// "Batches"). The first member a hub's drain wakes waits in `runnext`
    /// for the rest of the drain (~25 µs on 16 cores), past Go's 3 µs grace.
    /// sysmon's long-poll mark lifts this, as it lifts the ring's keep.
    #[inline]
    pub(crate) fn runnext_kept(&self, hubs: &HubModes) -> bool {
        if self.long_poll_marked() {
            return false;
        }
        if self.bq_len.load(Relaxed) != 0 {
            return true;
        }
        let bits = self.running_bits.load(Relaxed);
        bits != 0 && hubs.keeps(bits)
    }

    /// A thief's request that the owner split its batch queue (`split`).
    /// Written only when not set yet: every spinning thief that looks asks,
    /// and a store per look would take the line from its owner each time.
    #[inline]
    pub(crate) fn ask_split(&self) {
        if !self.split.load(Relaxed) {
            self.split.store(true, Relaxed);
        }
    }

    /// Whether sysmon marked the poll this P is in as long
    /// (`mark_long_poll`): thieves may take everything they can reach.
    /// (The poll counter is read only when a mark exists.)
    #[inline]
    pub(crate) fn long_poll_marked(&self) -> bool {
        let mark = self.long_mark.load(Relaxed);
        mark != 0 && mark == self.metrics.polls.get()
    }

    /// sysmon saw this P's polls run long (`sysmon::offer_queue`): thieves
    /// keep nothing from it until poll number `polls` ends.
    pub(crate) fn mark_long_poll(&self, polls: u64) {
        self.long_mark.store(polls, Relaxed);
    }

    /// What a thief may take from this P now: a ring worth stealing, or an
    /// empty ring with a task in `runnext` (taken on the last steal pass
    /// only, after Go's grace), is [`Look::Stealable`]; a ring whose tasks
    /// its own M reaches soon, or only a batch queue (the owner splits it
    /// when a thief asks), or a `runnext` that [`Processor::runnext_kept`]
    /// keeps for a kept batch, is [`Look::Kept`].
    #[inline]
    pub(crate) fn steal_look(&self, hubs: &HubModes) -> Look {
        let len = self.steal.len();
        if len == 0 {
            let runnext = !self.steal.is_empty();
            if runnext && !self.runnext_kept(hubs) {
                Look::Stealable
            } else if runnext || self.bq_len.load(Relaxed) != 0 {
                // The owner's batch queue (it splits it when a thief asks,
                // and then wakes an idle P), or a kept batch's `runnext`.
                Look::Kept
            } else {
                Look::Nothing
            }
        } else if len > self.keep_for_owner() as usize {
            Look::Stealable
        } else {
            Look::Kept
        }
    }

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
            bq_len: AtomicU32::new(0),
            long_mark: AtomicU64::new(0),
            split: AtomicBool::new(false),
            shared_out: AtomicBool::new(false),
            current_task: AtomicU64::new(0),
            running_bits: AtomicU32::new(0),
            holder: Mutex::new(None),
            core_slot: Mutex::new(None),
            asker: Mutex::new(None),
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
            batch: Vec::new(),
            busy_since: None,
            batch_polls: 0,
            clock_ms: 0,
            retired: false,
            running_meta: 0,
            poll_wakes: 0,
            last_wakees: [0; 2],
            bq: std::collections::VecDeque::with_capacity(32),
            bq_run: 0,
        });
        (p, core)
    }

    /// Records `m` as wanting this P back (the first asker wins).
    pub(crate) fn ask_back(&self, m: &Arc<Machine>) {
        let mut a = self.asker.lock().unwrap();
        if a.is_none() {
            *a = Some(m.clone());
            self.has_asker.store(true, Release);
        }
    }

    /// Whether an M waits to get this P back (the holder's park re-check).
    pub(crate) fn has_asker(&self) -> bool {
        // Acquire pairs with the Release store in `ask_back`.
        self.has_asker.load(Acquire)
    }

    /// Takes the M waiting for this P, if any.
    pub(crate) fn take_asker(&self) -> Option<Arc<Machine>> {
        if !self.has_asker.load(Acquire) {
            return None;
        }
        let mut a = self.asker.lock().unwrap();
        self.has_asker.store(false, Relaxed);
        a.take()
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

    /// Marks the ring as holding split batch work (`shared_out`).
    #[inline]
    pub(crate) fn share_out(&self) {
        if !self.shared_out.load(Relaxed) {
            self.shared_out.store(true, Relaxed);
        }
    }

    pub(crate) fn set_running(&self, running: bool) {
        // Relaxed: a hint for thieves, never a correctness condition.
        self.running.store(running, Relaxed);
    }
}

impl Core {
    /// Starts a busy batch now unless one is open (a P handed over by
    /// `block_in_place` stays busy across the hand-over).
    #[inline]
    pub(crate) fn begin_busy(&mut self, counters: &ProcCounters) {
        if self.busy_since.is_none() {
            let now = Instant::now();
            self.busy_since = Some(now);
            let ns = crate::task::epoch_ns(now);
            self.clock_ms = crate::task::ms_of_epoch_ns(ns);
            self.batch_polls = 0;
            counters.open_busy(ns);
        }
    }

    /// Adds the open batch to `counters`; keeps measuring from now if
    /// `cont`, else closes it (the P goes idle).
    pub(crate) fn flush_busy(&mut self, counters: &ProcCounters, cont: bool) {
        let Some(since) = self.busy_since else { return };
        let now = Instant::now();
        let ns = now.saturating_duration_since(since).as_nanos();
        counters.record_batch(ns.min(u64::MAX as u128) as u64, self.batch_polls);
        if counters.unbroken_batch.load(Relaxed) != cont {
            counters.unbroken_batch.store(cont, Relaxed);
        }
        self.batch_polls = 0;
        self.busy_since = cont.then_some(now);
        if cont {
            let ns = crate::task::epoch_ns(now);
            self.clock_ms = crate::task::ms_of_epoch_ns(ns);
            counters.open_busy(ns);
        } else {
            counters.close_busy();
        }
    }

    /// A random number in `0..n` (n > 0).
    pub(crate) fn rand(&mut self, n: usize) -> usize {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        ((x >> 32) as usize * n) >> 32
    }
}

fn seed(index: usize) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_running_p_keeps_a_short_ring_unless_it_shared_its_batch_out() {
        let reactor = numa_rt_reactor::Reactor::new(1).unwrap();
        let (p, _core) = Processor::new(0, 0, reactor.driver(0), None);
        // A fresh P runs polls estimated at the floor: its M reaches
        // STEAL_BACKLOG_NS / MIN_POLL_ESTIMATE_NS tasks soon.
        let kept = (STEAL_BACKLOG_NS / MIN_POLL_ESTIMATE_NS) as u32;
        assert_eq!(p.keep_for_owner(), kept);
        p.share_out();
        assert_eq!(p.keep_for_owner(), 0, "split batch work is for thieves");
        p.shared_out.store(false, Relaxed);
        assert_eq!(p.keep_for_owner(), kept);
        p.set_running(false);
        assert_eq!(p.keep_for_owner(), 0, "nobody runs the P");
    }

    /// The wake rules wake a thief only for work the keep rule lets it
    /// take, also while the P's M is back from its park's poll and not yet
    /// marked running (the driver's wakes are queued then).
    #[test]
    fn a_thief_is_woken_only_for_work_beyond_the_keep() {
        let reactor = numa_rt_reactor::Reactor::new(1).unwrap();
        let (p, mut core) = Processor::new(0, 0, reactor.driver(0), None);
        let inject = crate::scheduler::inject::Inject::new();
        // Polls of ~10 µs: the M reaches two queued tasks within the backlog.
        p.metrics.record_batch(STEAL_BACKLOG_NS / 2, 1);
        assert_eq!(p.keep_for_owner(), 2);
        let mut handles = Vec::new();
        let mut push = |core: &mut Core| {
            let (task, handle) = crate::task::spawn_untracked(async {}, |_| {});
            core.queue.push_back(task, &inject);
            handles.push(handle);
        };
        for _ in 0..3 {
            push(&mut core);
        }
        // Three queued, the first run next by this M: two left, both kept.
        assert!(!core.shareable(&p, 1));
        assert!(core.shareable(&p, 0), "three left after a steal's own task");
        push(&mut core);
        assert!(core.shareable(&p, 1), "a third beyond the keep");
        drop(core.queue.pop(false));
        // Back from the park's poll with three queued, before `running`
        // is set again: the thieves will see the keep a moment later.
        p.set_running(false);
        assert_eq!(p.keep_for_owner(), 0);
        assert!(!core.shareable(&p, 1));
        p.set_running(true);
        // Work the owner shared out keeps nothing.
        p.share_out();
        assert!(core.shareable(&p, 1), "shared-out work is for thieves");
        p.shared_out.store(false, Relaxed);
        while core.queue.pop(false).is_some() {}
        drop(handles);
    }

    /// A task in `runnext` is the owner's, like the batch queue, while a
    /// kept batch runs on the P (a batch queue beside it, or a member of a
    /// kept hub batch in the poll), until sysmon marks the P's poll long;
    /// otherwise it is a thief's after Go's grace, as before.
    #[test]
    fn a_kept_batchs_runnext_is_kept_unless_the_poll_runs_long() {
        use crate::scheduler::hub_mode::At;
        let reactor = numa_rt_reactor::Reactor::new(1).unwrap();
        let (p, mut core) = Processor::new(0, 0, reactor.driver(0), None);
        let hubs = HubModes::default();
        let (task, _handle) = crate::task::spawn_untracked(async {}, |_| {});
        assert!(core.queue.swap_runnext(task).is_none());
        assert_eq!(p.steal_look(&hubs), Look::Stealable, "no batch queue");
        assert!(!p.runnext_kept(&hubs));
        p.bq_len.store(1, Relaxed);
        assert_eq!(p.steal_look(&hubs), Look::Kept, "beside a batch queue");
        assert!(p.runnext_kept(&hubs));
        p.metrics.polls.incr();
        p.mark_long_poll(p.metrics.polls.get());
        assert_eq!(p.steal_look(&hubs), Look::Stealable, "the poll runs long");
        assert!(!p.runnext_kept(&hubs));
        p.metrics.polls.incr();
        assert_eq!(
            p.steal_look(&hubs),
            Look::Kept,
            "the mark ends with its poll"
        );
        p.bq_len.store(0, Relaxed);
        // No batch queue, but a member of a hub's batch in the poll: kept
        // while the batch is (a new hub's batch is measured kept).
        let bits = 5 << crate::task::BATCH_SHIFT;
        p.running_bits.store(bits, Relaxed);
        assert_eq!(p.steal_look(&hubs), Look::Stealable, "not a hub's batch");
        let at = At {
            now_ms: || 1_000,
            busy: || 0,
        };
        hubs.claim(bits, 0x1000, || 0, &at);
        assert_eq!(p.steal_look(&hubs), Look::Kept, "a kept hub's batch runs");
        assert!(p.runnext_kept(&hubs));
        p.running_bits.store(0, Relaxed);
        assert_eq!(p.steal_look(&hubs), Look::Stealable, "no batch runs");
        drop(core.queue.pop_runnext());
    }
}

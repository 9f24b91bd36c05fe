//! The counters the scheduler writes: one `ProcCounters` per P, read by `metrics`.
//!
//! Counters are written by the M holding a P (single writer: a Relaxed load
//! and store, no read-modify-write on the hot path) and read by anyone.
//!
//! Time is measured in busy stretches, as tokio does: the M reads the clock
//! when it runs a task after a search for work (a stretch begins), every
//! `event_interval` ticks while it keeps running, and when its queues run
//! dry (the stretch ends: searching, stealing and parking are not busy) —
//! not per poll. Each reading adds the time since the last
//! one to `busy_ns` and folds the stretch's mean poll time into
//! `poll_time_ewma_ns`. Only the optional poll-time histogram reads the
//! clock around every poll.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::tuning::EWMA_ALPHA;

/// A counter with one writer at a time (the M holding the P).
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn incr(&self) {
        self.add(1);
    }
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        // Single writer: a plain load and store is enough and avoids a
        // locked instruction per poll.
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    /// Sets a gauge (single writer, as `add`).
    #[inline]
    pub(crate) fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
    /// For counters written by other threads than the P's M.
    #[inline]
    pub(crate) fn incr_shared(&self) {
        self.0.fetch_add(1, Relaxed);
    }
    /// Takes back an [`Counter::incr_shared`] whose event did not happen.
    #[inline]
    pub(crate) fn decr_shared(&self) {
        self.0.fetch_sub(1, Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Starts a new 128-byte line in a `#[repr(C)]` struct: a zero-sized
/// field aligned to 128 moves the fields after it to the next line (two
/// 64-byte lines, as the adjacent-line prefetcher pulls them in pairs).
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct NewLine;

/// One P's counters; `ProcMetrics` (in `metrics`) says what each counts.
///
/// Three groups on separate lines, by who writes and who reads them: what
/// thieves and the hub measurement read from other P's (written once per
/// busy stretch or flush), what the P's M writes on every poll, and what
/// other threads write (wakers, the monitor). On 16 cores a thief looking
/// at a victim, or a waker counting an unpark, would otherwise take the
/// line the victim's M writes per poll away from it.
#[derive(Default)]
#[repr(C)]
pub(crate) struct ProcCounters {
    /// The mean poll time, an exponentially weighted moving average in
    /// nanoseconds (see `record_busy`). Read by thieves (the policy's
    /// reserve, through `Policy::look` and `Policy::worth_waking`).
    pub(crate) poll_time_ewma_ns: Counter,
    /// Set when a busy stretch outlasts one `event_interval` flush (the P
    /// has run `event_interval` ticks without its queues running dry),
    /// cleared when the stretch closes. A thief leaves a running P's short
    /// ring alone only while this is clear (the policy's reserve): a ring that
    /// never runs dry (tasks that keep yielding or waking each other) is
    /// work the P cannot finish soon, however short it looks. Relaxed: a
    /// hint, written by the P's M only when it changes.
    pub(crate) unbroken_busy: AtomicBool,
    /// When the open busy stretch began (ns since `task::epoch`, plus one;
    /// 0: none open), so another thread can add it to `busy_ns`
    /// (`busy_now`). Written once per stretch by the P's M; Relaxed: a
    /// reading that straddles a flush counts a stretch twice or not at all
    /// for an instant, which a hint may.
    pub(crate) busy_open: AtomicU64,
    /// Nanoseconds the P's M spent running tasks and dispatching between
    /// them (not searching for work, not parked), flushed at each busy
    /// stretch's end or flush.
    pub(crate) busy_ns: Counter,
    _owner: NewLine,
    pub(crate) polls: Counter,
    pub(crate) runnext_polls: Counter,
    pub(crate) global_polls: Counter,
    pub(crate) steals: Counter,
    pub(crate) migrated_polls: Counter,
    pub(crate) local_steals: Counter,
    pub(crate) remote_steals: Counter,
    pub(crate) parks: Counter,
    /// Returns from those parks (the M blocked in its driver and woke):
    /// `parks + park_wakes` is tokio's `worker_park_unpark_count`, odd
    /// while the M is parked. Incremented by `Worker::park` right after the
    /// driver poll that `parks` counted.
    pub(crate) park_wakes: Counter,
    pub(crate) spurious_wakeups: Counter,
    /// Wakes from a task's poll of a task already in the waker's batch.
    pub(crate) batch_wakes: Counter,
    /// Wakes from a task's poll that put the wakee in the waker's batch.
    pub(crate) batch_joins: Counter,
    /// Tasks kept in the batch queue instead of the ring.
    pub(crate) batch_queued: Counter,
    /// Polls of tasks taken from the batch queue.
    pub(crate) batch_polls: Counter,
    /// Times the owner split its batch queue into the ring for a thief.
    pub(crate) batch_splits: Counter,
    /// Polls that woke `tuning::HUB_WAKES` or more different tasks.
    pub(crate) batch_hub_polls: Counter,
    /// Measurements a hub's poll on this P ended in "kept" (`hub_mode`).
    pub(crate) batch_keeps: Counter,
    /// Measurements a hub's poll on this P ended in "spread".
    pub(crate) batch_spreads: Counter,
    /// The busy time per hub wake (ns) the last of them read (a gauge).
    pub(crate) batch_last_work_ns: Counter,
    /// Hubs of kept batches this P was about to poll, sent back to the P
    /// their batch runs on (`Policy::begin_poll`'s `Poll::Home`).
    pub(crate) batch_hub_homes: Counter,
    pub(crate) root_tasks_received: Counter,
    pub(crate) handbacks: Counter,
    /// Polls that returned `Pending` because the cooperative budget ran out.
    pub(crate) forced_yields: Counter,
    /// Unpark-to-run latency: nanoseconds from a waker's unpark of this P's
    /// M to that M running again, summed, and how many such wake-ups.
    pub(crate) unpark_latency_ns: Counter,
    pub(crate) unpark_latencies: Counter,
    /// One counter per bucket when the poll-time histogram is on.
    pub(crate) poll_histogram: Option<Box<[Counter]>>,
    /// Nanoseconds inside task polls, summed only while the histogram is on
    /// (its `_sum`).
    pub(crate) poll_ns: Counter,
    /// The id of the M that last held this P.
    pub(crate) machine: AtomicUsize,
    _shared: NewLine,
    /// Written by wakers on any thread (`incr_shared`).
    pub(crate) unparks: Counter,
    /// When the last unpark of this P's M was sent (`task::epoch_ns`, 0:
    /// none pending); written by wakers, taken by the M when it wakes.
    pub(crate) unparked_at_ns: AtomicU64,
    /// Written by the monitor thread (`incr_shared`).
    pub(crate) retakes: Counter,
    /// Times sysmon offered the P's queue (`sysmon::offer_queue`); written
    /// by the monitor thread (`incr_shared`).
    pub(crate) long_poll_offers: Counter,
}

const _: () = {
    assert!(std::mem::offset_of!(ProcCounters, polls) == 128);
    assert!(std::mem::offset_of!(ProcCounters, unparks) % 128 == 0);
};

impl ProcCounters {
    pub(crate) fn new(histogram: Option<&crate::HistogramConfig>) -> Self {
        ProcCounters {
            poll_histogram: histogram
                .map(|h| (0..h.buckets()).map(|_| Counter::default()).collect()),
            ..Default::default()
        }
    }

    /// Notes that a busy stretch began at `ns` (`task::epoch_ns`; see
    /// `busy_open`).
    #[inline]
    pub(crate) fn open_busy(&self, ns: u64) {
        self.busy_open.store(ns + 1, Relaxed);
    }

    /// Notes that the busy stretch ended (its time is in `busy_ns`).
    #[inline]
    pub(crate) fn close_busy(&self) {
        self.busy_open.store(0, Relaxed);
    }

    /// Busy time so far (ns) as of `now_ns` (since `task::epoch`): the
    /// flushed stretches and the open one.
    pub(crate) fn busy_now(&self, now_ns: u64) -> u64 {
        let open = match self.busy_open.load(Relaxed) {
            0 => 0,
            since => now_ns.saturating_sub(since - 1),
        };
        self.busy_ns.get() + open
    }

    /// The P's M is about to release its P and park: a stamp left by an
    /// unpark that raced its last wake-up is dropped, so that it is not read
    /// at the next wake-up as a wait spanning the M's whole run. Any waker
    /// that finds the P idle does so after the release (the idle lock), so
    /// its stamp comes after this store. A load first: most parks find none.
    pub(crate) fn forget_unpark(&self) {
        if self.unparked_at_ns.load(Relaxed) != 0 {
            self.unparked_at_ns.store(0, Relaxed);
        }
    }

    /// The P's M is back from a park: if an unpark was sent to it since
    /// [`ProcCounters::forget_unpark`], records how long ago (the
    /// unpark-to-run latency). Called by that M; a load first, so a park
    /// ended by I/O or by its own re-check costs no locked instruction.
    pub(crate) fn note_woken(&self) {
        if self.unparked_at_ns.load(Relaxed) == 0 {
            return;
        }
        let at = self.unparked_at_ns.swap(0, Relaxed);
        if at != 0 {
            let now = crate::task::epoch_ns(std::time::Instant::now());
            self.unpark_latency_ns.add(now.saturating_sub(at));
            self.unpark_latencies.incr();
        }
    }

    /// Adds a busy stretch: `busy_ns` long, `polls` task polls in it. Its
    /// mean poll time enters the average with the weight of `polls` single
    /// polls (`1 - (1-α)^polls`), so a long stretch moves it more than a
    /// short one.
    pub(crate) fn record_busy(&self, busy_ns: u64, polls: u32) {
        self.busy_ns.add(busy_ns);
        if polls == 0 {
            return;
        }
        let mean = busy_ns as f64 / polls as f64;
        let old = self.poll_time_ewma_ns.get();
        let new = if old == 0 {
            mean
        } else {
            let w = 1.0 - (1.0 - EWMA_ALPHA).powi(polls.min(1 << 16) as i32);
            w * mean + (1.0 - w) * old as f64
        };
        // Single writer (the M holding the P): a plain store.
        self.poll_time_ewma_ns.0.store(new.max(1.0) as u64, Relaxed);
    }
}

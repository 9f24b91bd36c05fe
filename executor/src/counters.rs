//! The counters the scheduler writes: one `ProcCounters` per P, read by `metrics`.
//!
//! Counters are written by the M holding a P (single writer: a Relaxed load
//! and store, no read-modify-write on the hot path) and read by anyone.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

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
    /// For counters written by other threads than the P's M.
    #[inline]
    pub(crate) fn incr_shared(&self) {
        self.0.fetch_add(1, Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// One P's counters; `ProcMetrics` (in `metrics`) says what each counts.
#[derive(Default)]
pub(crate) struct ProcCounters {
    pub(crate) polls: Counter,
    pub(crate) runnext_polls: Counter,
    pub(crate) global_polls: Counter,
    pub(crate) steals: Counter,
    pub(crate) local_steals: Counter,
    pub(crate) remote_steals: Counter,
    pub(crate) parks: Counter,
    /// Written by wakers on any thread (`incr_shared`).
    pub(crate) unparks: Counter,
    pub(crate) spurious_wakeups: Counter,
    pub(crate) root_tasks_received: Counter,
    pub(crate) handbacks: Counter,
    /// The id of the M that last held this P.
    pub(crate) machine: AtomicUsize,
}

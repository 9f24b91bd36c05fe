//! What the drivers count, and the reactor's diagnostics: [`Stats`], one
//! P's counters (written by whichever M is in its driver, read by the
//! monitor to tell whether anybody looked at a poller); [`DriverStats`],
//! their public copy for the executor's metrics; and the reactor's looks at
//! its sources, timers and watchers (the deadlock diagnostic's and sysmon's).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::{PState, Reactor};

/// Counters of one driver, written by whichever M is in it (Relaxed: they
/// order nothing).
#[derive(Default)]
pub(super) struct Stats {
    pub(super) wakeups: AtomicU64,
    pub(super) helps: AtomicU64,
    pub(super) handoffs: AtomicU64,
    /// Drains of the P's io poller (by its M, a watcher or the monitor),
    /// counted under the poller's lock: the monitor polls a poller whose
    /// count stays still while nobody watches it (see `monitor`).
    pub(super) drains: AtomicU64,
    /// Sources moved to this P's poller because their task runs here (see
    /// `registration`, "A source follows its task").
    pub(super) moves_in: AtomicU64,
    /// Times this P's io poller took its node's watch epoll in (hosting,
    /// see `watch_ops`).
    pub(super) hostings: AtomicU64,
    /// Times this P's io poller gave the watch back, for any reason.
    pub(super) unhostings: AtomicU64,
    /// Of those, the monitor's (its holder stayed out of its park a whole
    /// tick: `monitor`, the rescue).
    pub(super) releases: AtomicU64,
    /// Times this P's M, leaving its park with no other M of its node
    /// parked, lent its node's pollers to another node's watcher, or moved
    /// a lend away from its own node (see `lend`).
    pub(super) lends: AtomicU64,
    /// Drains of another node's poller by this P's M as a watcher (of
    /// `helps`).
    pub(super) remote_helps: AtomicU64,
}

/// What one P's driver did since the reactor was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverStats {
    /// Times the M parked in this driver woke from its blocking wait.
    pub wakeups: u64,
    /// Times the M parked here, as its node's watcher, drained another P's
    /// poller on its behalf.
    pub helps: u64,
    /// Times this P's M, unparked for new work while it was its node's
    /// watcher, handed the role to another parked M.
    pub watch_handoffs: u64,
    /// Sources moved into this P's poller from another P's because the task
    /// using them kept running here (see the reactor's registration docs).
    pub sources_moved_in: u64,
    /// Times this P's io poller took its node's watch epoll in, so that its
    /// M, holding the watcher role, blocks on its own poller (one
    /// `epoll_wait` per event on it instead of two; see docs/architecture.md,
    /// "Hosting").
    pub watch_hostings: u64,
    /// Times this P's io poller gave the watch back: its M's hosting score
    /// fell to 0, the role moved away, or the monitor took it back
    /// (below). Each hosting and give-back costs two `epoll_ctl`s under the
    /// kernel's global epoll mutex: a count that keeps pace with
    /// `watch_hostings` under steady load means churn.
    pub watch_unhostings: u64,
    /// Of `watch_unhostings`, the monitor's: the holder hosting the watch
    /// stayed out of its park for a whole monitor tick, so its poller went
    /// back into the watch where a parked M can see its events.
    pub watch_releases: u64,
    /// Times this P's M, leaving its park while no other M of its node
    /// stayed parked, lent its node's pollers to the nearest node whose
    /// watcher is parked (or moved a lend on; see docs/architecture.md,
    /// "Readiness across nodes"). Always 0 on a one-node runtime.
    pub watch_lends: u64,
    /// Of `helps`, drains of another node's poller (one lent to this P's
    /// node): the woken tasks moved to this P's node.
    pub remote_helps: u64,
}

impl PState {
    /// Counts a drain of the io poller (the monitor's "nobody looked").
    /// Called under the poller's lock, so a plain load and store (no RMW).
    pub(super) fn count_drain(&self) {
        let drains = &self.stats.drains;
        drains.store(
            drains.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }
}

impl Reactor {
    /// What P `index`'s driver did: wake-ups, helps, watcher hand-offs.
    pub fn driver_stats(&self, index: usize) -> DriverStats {
        let st = &self.shared.ps[index].stats;
        DriverStats {
            wakeups: st.wakeups.load(Ordering::Relaxed),
            helps: st.helps.load(Ordering::Relaxed),
            watch_handoffs: st.handoffs.load(Ordering::Relaxed),
            sources_moved_in: st.moves_in.load(Ordering::Relaxed),
            watch_hostings: st.hostings.load(Ordering::Relaxed),
            watch_unhostings: st.unhostings.load(Ordering::Relaxed),
            watch_releases: st.releases.load(Ordering::Relaxed),
            watch_lends: st.lends.load(Ordering::Relaxed),
            remote_helps: st.remote_helps.load(Ordering::Relaxed),
        }
    }

    /// The P whose M holds `node`'s watcher role now, if any.
    pub fn watcher(&self, node: usize) -> Option<usize> {
        self.shared.nodes.get(node).and_then(|w| w.role.watcher())
    }

    /// The node whose watcher also watches `node`'s pollers now, because
    /// no M of `node` was left parked (see docs/architecture.md,
    /// "Readiness across nodes"); `None` on a one-node runtime.
    pub fn lent_to(&self, node: usize) -> Option<usize> {
        (node < self.shared.nodes.len())
            .then(|| self.shared.lending.lent_to(node))
            .flatten()
    }

    /// Diagnostics: sources currently registered across all P's.
    pub fn registered_sources(&self) -> usize {
        let lock = |p: &PState| p.sources.lock().unwrap_or_else(|e| e.into_inner()).len();
        self.shared.ps.iter().map(lock).sum()
    }

    /// Diagnostics: timers currently pending across all P's.
    pub fn pending_timers(&self) -> usize {
        self.shared.ps.iter().map(|p| p.timers.len()).sum()
    }

    /// Diagnostics: P `index`'s registered sources and pending timers.
    pub fn proc_sources_and_timers(&self, index: usize) -> (usize, usize) {
        let p = &self.shared.ps[index];
        let sources = p.sources.lock().unwrap_or_else(|e| e.into_inner()).len();
        (sources, p.timers.len())
    }

    /// The earliest pending timer of P `index` (sysmon: a due timer on a
    /// stuck P is work waiting for it).
    pub fn next_timer_of(&self, index: usize) -> Option<Instant> {
        self.shared.ps[index].timers.next_deadline()
    }

    /// Diagnostics: sources on which a task waits (a stored waker), across
    /// all P's. Locks every source in turn: for rare checks (the deadlock
    /// diagnostic), not for hot paths.
    pub fn io_waiters(&self) -> usize {
        let mut n = 0;
        for p in self.shared.ps.iter() {
            let sources = p.sources.lock().unwrap_or_else(|e| e.into_inner());
            n += sources.iter().filter(|io| io.has_waiters()).count();
        }
        n
    }
}

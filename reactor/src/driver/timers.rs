//! One P's timers: an ordered map of deadlines plus the timerfd that makes the
//! earliest deadline an event in the P's io poller.
//!
//! The map is a `BTreeMap` keyed by `(deadline, sequence)`: ordered firing,
//! O(log n) insert and cancel, exact removal when a `Sleep` drops (no lazy
//! tombstones, so churn never grows it), about 40 bytes of payload per timer.
//! The owner M and helper M's both fire it, so it sits behind a mutex.
//!
//! The timerfd is armed to the earliest deadline. It is re-armed only when a
//! new deadline is earlier than the armed one, or after it fired; a cancelled
//! earliest timer leaves it armed, and the spurious expiry finds nothing due.
//!
//! While the runtime's clock is paused the timerfd stays disarmed: deadlines
//! are virtual, and only `time::advance` or the monitor's auto-advance
//! (`Reactor::auto_advance`) fire timers. Pausing disarms every P's timerfd
//! and resuming re-arms it ([`Timers::rearm`]).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;
use std::time::Instant;

use crate::sys;
use crate::time::clock::Clock;

/// Identifies one timer in its P's set.
pub(crate) type TimerKey = (Instant, u64);

#[derive(Default)]
struct TimerSet {
    map: BTreeMap<TimerKey, Waker>,
    next_seq: u64,
    /// The deadline the timerfd is armed for.
    armed: Option<Instant>,
    shutdown: bool,
}

/// What polling a registered timer found.
pub(crate) enum TimerState {
    /// Still pending; the waker is stored.
    Pending,
    /// Fired (removed by the driver).
    Fired,
    /// The runtime shut down: it will never fire.
    Shutdown,
}

/// The timers of one P.
pub(crate) struct Timers {
    set: Mutex<TimerSet>,
    timerfd: OwnedFd,
}

impl Timers {
    pub(crate) fn new(timerfd: OwnedFd) -> Timers {
        Timers {
            set: Mutex::new(TimerSet::default()),
            timerfd,
        }
    }

    pub(crate) fn timerfd(&self) -> &OwnedFd {
        &self.timerfd
    }

    fn lock(&self) -> MutexGuard<'_, TimerSet> {
        // A panic while holding this lock cannot leave the map inconsistent
        // (wakers are never called under it), so poisoning is ignored.
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(&self, set: &mut TimerSet, deadline: Option<Instant>, clock: &Clock) {
        // Paused: a virtual deadline is no real-time wait; leave it disarmed.
        let deadline = deadline.filter(|_| !clock.is_paused());
        set.armed = deadline;
        let after = deadline.map(|d| d.saturating_duration_since(clock.now()));
        // Arming a valid timerfd with a valid value cannot fail.
        let r = sys::timerfd_set(&self.timerfd, after);
        debug_assert!(r.is_ok(), "timerfd_settime: {r:?}");
    }

    /// Adds a timer; `None` if the runtime has shut down.
    pub(crate) fn insert(
        &self,
        deadline: Instant,
        waker: Waker,
        clock: &Clock,
    ) -> Option<TimerKey> {
        let mut set = self.lock();
        if set.shutdown {
            return None;
        }
        let key = (deadline, set.next_seq);
        set.next_seq += 1;
        set.map.insert(key, waker);
        if set.armed.is_none_or(|a| deadline < a) {
            self.arm(&mut set, Some(deadline), clock);
        }
        Some(key)
    }

    /// Checks a registered timer, refreshing its waker while pending.
    pub(crate) fn poll(&self, key: TimerKey, waker: &Waker) -> TimerState {
        let mut set = self.lock();
        if set.shutdown {
            return TimerState::Shutdown;
        }
        match set.map.get_mut(&key) {
            Some(w) => {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                TimerState::Pending
            }
            None => TimerState::Fired,
        }
    }

    /// Cancels a timer (no-op if it already fired).
    pub(crate) fn remove(&self, key: TimerKey) {
        let waker = self.lock().map.remove(&key);
        drop(waker); // outside the lock: dropping a waker may run task code
    }

    /// Removes every timer due at `now`, appending their wakers in deadline
    /// order, and re-arms the timerfd if it fired.
    pub(crate) fn fire_expired(&self, clock: &Clock, out: &mut Vec<Waker>) {
        let now = clock.now();
        let mut set = self.lock();
        while let Some(entry) = set.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove());
        }
        if set.armed.is_some_and(|a| a <= now) {
            let next = set.map.first_key_value().map(|(k, _)| k.0);
            self.arm(&mut set, next, clock);
        }
    }

    /// Removes every timer due at `now` with its key, for a caller that
    /// merges several P's timers into one deadline order (paused time).
    pub(crate) fn take_expired(&self, now: Instant, out: &mut Vec<(TimerKey, Waker)>) {
        let mut set = self.lock();
        while let Some(entry) = set.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove_entry());
        }
    }

    /// Arms the timerfd for the earliest deadline as `clock` now reads it:
    /// disarmed when it is paused, armed again when it resumes.
    pub(crate) fn rearm(&self, clock: &Clock) {
        let mut set = self.lock();
        let next = set.map.first_key_value().map(|(k, _)| k.0);
        self.arm(&mut set, next, clock);
    }

    /// The earliest pending deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.lock().map.first_key_value().map(|(k, _)| k.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Wakes every timer's waiter and refuses new timers. The runtime's own
    /// tasks, woken, are dropped by the executor (it has shut down); a
    /// waiter outside the runtime (a foreign thread's `block_on`) polls its
    /// timer again and learns that it will never fire ([`TimerState::Shutdown`]).
    pub(crate) fn shutdown(&self) {
        let map = {
            let mut set = self.lock();
            set.shutdown = true;
            set.armed = None;
            let r = sys::timerfd_set(&self.timerfd, None);
            debug_assert!(r.is_ok(), "timerfd_settime: {r:?}");
            std::mem::take(&mut set.map)
        };
        // Outside the lock: a waker may run arbitrary code, even poll the
        // timer again.
        for (_, w) in map {
            crate::fault::wake(w, "a timer's waker");
        }
    }
}

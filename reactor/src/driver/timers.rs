//! One P's timers: a timing wheel ([`super::wheel`]: O(1) insert and
//! cancel, exact deadlines) behind a mutex, plus the timerfd that makes the
//! earliest deadline an event in the P's io poller.
//!
//! The owner M and helper M's both fire the wheel, and a task that moved to
//! another P cancels its timer from there, so the wheel sits behind a mutex;
//! each operation holds it for a few dozen instructions and never calls a
//! waker under it. A `Sleep` reaches its P's timers through an
//! `Arc<Timers>` of their own, so arming and cancelling touch a reference
//! count that only that P's tasks share. (It used to hold the runtime's
//! `Arc<Shared>`, and registering cloned the current reactor to get it:
//! four atomic read-modify-writes per request on one cache line that every
//! P wrote, invisible in instruction counts and a likely share of the
//! timer's ~5% of CPU samples on 16 cores in issue 23.)
//!
//! The timerfd is armed to the exact earliest deadline (the wheel scans its
//! earliest occupied slot for it; cascades need no wake-up of their own).
//! It is re-armed only when a new deadline is earlier than the armed one,
//! or after it fired; a cancelled earliest timer leaves it armed, and the
//! spurious expiry finds nothing due. A stream of 30-second request timers,
//! each later than the last, re-arms nothing.
//!
//! While the runtime's clock is paused the timerfd stays disarmed: deadlines
//! are virtual, and only `time::advance` or the monitor's auto-advance
//! (`Reactor::auto_advance`) fire timers. Pausing disarms every P's timerfd
//! and resuming re-arms it ([`Timers::rearm`]).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Instant;

use super::wheel::{Fired, Key, Wheel};
use crate::clock::Clock;
use crate::sys;

/// Identifies one timer in its P's set.
pub(crate) type TimerKey = Key;

struct TimerSet {
    wheel: Wheel,
    /// The instant the timerfd is armed for.
    armed: Option<Instant>,
    shutdown: bool,
    /// Scratch for the timers one advance fires, sorted before their
    /// wakers are handed out.
    fired: Vec<Fired>,
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
    /// The runtime's clock (shared by every P's timers).
    clock: Arc<Clock>,
}

impl Timers {
    pub(crate) fn new(timerfd: OwnedFd, clock: Arc<Clock>) -> Timers {
        Timers {
            set: Mutex::new(TimerSet {
                wheel: Wheel::new(clock.now()),
                armed: None,
                shutdown: false,
                fired: Vec::new(),
            }),
            timerfd,
            clock,
        }
    }

    pub(crate) fn timerfd(&self) -> &OwnedFd {
        &self.timerfd
    }

    /// The runtime's clock.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, TimerSet> {
        // A panic while holding this lock cannot leave the set inconsistent
        // (wakers are never called under it), so poisoning is ignored.
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(&self, set: &mut TimerSet, at: Option<Instant>) {
        // Paused: a virtual deadline is no real-time wait; leave it disarmed.
        let at = at.filter(|_| !self.clock.is_paused());
        if at.is_none() && set.armed.is_none() {
            // Disarmed already (a timerfd without an interval disarms
            // itself when it fires, and `armed` is only cleared here).
            return;
        }
        set.armed = at;
        let after = at.map(|d| d.saturating_duration_since(self.clock.now()));
        // Arming a valid timerfd with a valid value cannot fail.
        let r = sys::timerfd_set(&self.timerfd, after);
        debug_assert!(r.is_ok(), "timerfd_settime: {r:?}");
    }

    /// Arms the timerfd for `deadline` if that is earlier than what it is
    /// armed for.
    fn arm_earlier(&self, set: &mut TimerSet, deadline: Instant) {
        if set.armed.is_none_or(|a| deadline < a) {
            self.arm(set, Some(deadline));
        }
    }

    /// Adds a timer; `None` if the runtime has shut down.
    pub(crate) fn insert(&self, deadline: Instant, waker: Waker) -> Option<TimerKey> {
        let mut set = self.lock();
        if set.shutdown {
            return None;
        }
        let key = set.wheel.insert(deadline, waker);
        self.arm_earlier(&mut set, deadline);
        Some(key)
    }

    /// Moves a pending timer to `deadline`, keeping its waker; `false` if
    /// it is no longer pending (fired, or the runtime shut down).
    pub(crate) fn reset(&self, key: TimerKey, deadline: Instant) -> bool {
        let mut set = self.lock();
        if !set.wheel.reset(key, deadline) {
            return false;
        }
        self.arm_earlier(&mut set, deadline);
        true
    }

    /// Checks a registered timer, refreshing its waker while pending.
    pub(crate) fn poll(&self, key: TimerKey, waker: &Waker) -> TimerState {
        let mut set = self.lock();
        if set.shutdown {
            return TimerState::Shutdown;
        }
        if set.wheel.poll(key, waker) {
            TimerState::Pending
        } else {
            TimerState::Fired
        }
    }

    /// Cancels a timer (no-op if it already fired).
    pub(crate) fn remove(&self, key: TimerKey) {
        let waker = self.lock().wheel.cancel(key);
        drop(waker); // outside the lock: dropping a waker may run task code
    }

    /// Removes every timer due now, appending their wakers in deadline
    /// order, and re-arms the timerfd if it fired.
    pub(crate) fn fire_expired(&self, out: &mut Vec<Waker>) {
        let now = self.clock.now();
        let mut set = self.lock();
        let set = &mut *set;
        set.wheel.advance(now, &mut set.fired);
        if set.fired.len() > 1 {
            set.fired.sort_unstable_by_key(|f| (f.0, f.1));
        }
        out.extend(set.fired.drain(..).map(|f| f.2));
        if set.armed.is_some_and(|a| a <= now) {
            let next = set.wheel.next_deadline();
            self.arm(set, next);
        }
    }

    /// Removes every timer due at `now` with its deadline, for a caller
    /// that merges several P's timers into one deadline order (paused time).
    pub(crate) fn take_expired(&self, now: Instant, out: &mut Vec<(Instant, Waker)>) {
        let mut set = self.lock();
        let set = &mut *set;
        set.wheel.advance(now, &mut set.fired);
        set.fired.sort_unstable_by_key(|f| (f.0, f.1));
        out.extend(set.fired.drain(..).map(|f| (f.0, f.2)));
    }

    /// Arms the timerfd for the wheel's next wake point as the clock now
    /// reads: disarmed when it is paused, armed again when it resumes.
    pub(crate) fn rearm(&self) {
        let mut set = self.lock();
        let next = set.wheel.next_deadline();
        self.arm(&mut set, next);
    }

    /// The earliest pending deadline (exact; scans a slot of the wheel, so
    /// not for a hot path).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.lock().wheel.next_deadline()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().wheel.len()
    }

    /// Wakes every timer's waiter and refuses new timers. The runtime's own
    /// tasks, woken, are dropped by the executor (it has shut down); a
    /// waiter outside the runtime (a foreign thread's `block_on`) polls its
    /// timer again and learns that it will never fire ([`TimerState::Shutdown`]).
    pub(crate) fn shutdown(&self) {
        let mut wakers = Vec::new();
        {
            let mut set = self.lock();
            set.shutdown = true;
            set.armed = None;
            let r = sys::timerfd_set(&self.timerfd, None);
            debug_assert!(r.is_ok(), "timerfd_settime: {r:?}");
            set.wheel.drain(&mut wakers);
        }
        // Outside the lock: a waker may run arbitrary code, even poll the
        // timer again.
        for w in wakers {
            crate::fault::wake(w, "a timer's waker");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;
    use std::time::Duration;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn setup() -> (Timers, Arc<Clock>, Arc<Count>, Waker) {
        let clock = Arc::new(Clock::new());
        clock.pause().unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        (
            Timers::new(sys::timerfd().unwrap(), clock.clone()),
            clock,
            count,
            waker,
        )
    }

    fn fire(t: &Timers) -> usize {
        let mut out = Vec::new();
        t.fire_expired(&mut out);
        let n = out.len();
        out.into_iter().for_each(Waker::wake);
        n
    }

    /// A cancelled timer leaves nothing behind, and its key, once the node
    /// is reused, names nothing: cancelling it again leaves the new timer.
    #[test]
    fn a_cancelled_timer_leaves_nothing() {
        let (t, clock, _, waker) = setup();
        let now = clock.now();
        let k = t
            .insert(now + Duration::from_secs(30), waker.clone())
            .unwrap();
        assert_eq!(t.len(), 1);
        t.remove(k);
        assert_eq!((t.len(), t.next_deadline()), (0, None));
        let k2 = t.insert(now + Duration::from_secs(31), waker).unwrap();
        assert_ne!(k2, k, "a reused node has a new generation");
        t.remove(k);
        assert_eq!(t.len(), 1, "a stale key removed nothing");
        t.remove(k2);
        assert_eq!(t.len(), 0);
    }

    /// A 30-second timer fires at its deadline, not before, and its key
    /// keeps working while it cascades down the wheel.
    #[test]
    fn a_far_timer_cascades_and_fires_on_time() {
        let (t, clock, count, waker) = setup();
        let now = clock.now();
        let far = t
            .insert(now + Duration::from_secs(30), waker.clone())
            .unwrap();
        for _ in 0..29 {
            clock.advance(Duration::from_secs(1)).unwrap();
            assert_eq!(fire(&t), 0);
            assert!(matches!(t.poll(far, &waker), TimerState::Pending));
        }
        clock.advance(Duration::from_millis(999)).unwrap();
        assert_eq!(fire(&t), 0, "not due yet");
        assert_eq!(t.next_deadline(), Some(now + Duration::from_secs(30)));
        clock.advance(Duration::from_millis(1)).unwrap();
        assert_eq!(fire(&t), 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(matches!(t.poll(far, &waker), TimerState::Fired));
        assert_eq!(t.len(), 0);
    }

    /// `reset` moves a pending timer, earlier or later, keeping its waker;
    /// a fired one cannot be reset.
    #[test]
    fn reset_moves_a_pending_timer() {
        let (t, clock, count, waker) = setup();
        let now = clock.now();
        let k = t.insert(now + Duration::from_secs(30), waker).unwrap();
        assert!(t.reset(k, now + Duration::from_millis(5)));
        assert_eq!(t.next_deadline(), Some(now + Duration::from_millis(5)));
        assert!(t.reset(k, now + Duration::from_millis(50)));
        clock.advance(Duration::from_millis(49)).unwrap();
        assert_eq!(fire(&t), 0);
        clock.advance(Duration::from_millis(1)).unwrap();
        assert_eq!(fire(&t), 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(!t.reset(k, now + Duration::from_secs(1)), "fired");
        assert_eq!(t.len(), 0);
    }

    /// Shutdown wakes near and far timers alike and refuses new ones.
    #[test]
    fn shutdown_wakes_every_timer() {
        let (t, clock, count, waker) = setup();
        let now = clock.now();
        for d in [1, 60_000, 86_400_000 * 365 * 10] {
            t.insert(now + Duration::from_millis(d), waker.clone())
                .unwrap();
        }
        t.shutdown();
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        assert_eq!(t.len(), 0);
        assert!(t.insert(now, waker).is_none());
    }
}

//! One P's timers: an ordered map of deadlines plus the timerfd that makes the
//! earliest deadline an event in the P's io poller.
//!
//! The map is a `BTreeMap` keyed by `(deadline, sequence)`: ordered firing,
//! O(log n) insert and cancel, exact removal when a `Sleep` drops (no lazy
//! tombstones, so churn never grows it), about 40 bytes of payload per timer.
//! The owner M and helper M's both fire it, so it sits behind a mutex.
//!
//! **Far timers** (deadline more than [`HORIZON`] × 2 ahead when inserted) go to
//! a slab instead: O(1) insert and cancel, no ordering. Most of them are
//! cancelled long before they are due (hyper's header-read timeout: one
//! 30-second sleep per request, dropped once the head is read), and the
//! map's insert and remove were about 760 of the ~9,000 user-space
//! instructions per request of hello_http at 50 connections (tokio's wheel:
//! ~300 for the same timers). The timerfd is armed for `far_min - HORIZON`
//! as well: at that point [`TimerSet::promote`] moves every far timer due
//! within 2 × `HORIZON` into the map, so a far timer is in the map at least
//! a `HORIZON` before it fires, and the slab is scanned at most once per
//! `HORIZON` (the far timers left are all later than `now + 2 × HORIZON`).
//! `far_min` may be stale-early after a cancel (it is not recomputed on
//! remove): that only brings the next scan forward, which recomputes it.
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
use std::time::{Duration, Instant};

use crate::sys;
use crate::time::clock::Clock;

/// Far timers are promoted into the map `HORIZON` before their deadline
/// at the latest (module docs).
const HORIZON: Duration = Duration::from_secs(1);

/// No far slot: the timer was inserted into the map.
const NEAR: u32 = u32::MAX;

/// Identifies one timer in its P's set: its deadline, its sequence number
/// (unique per P), and its slot in the far slab if it was inserted there
/// (it may have been promoted into the map since: then the slot no longer
/// holds its sequence number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey {
    pub(crate) deadline: Instant,
    seq: u64,
    slot: u32,
}

struct Far {
    deadline: Instant,
    seq: u64,
    waker: Waker,
}

#[derive(Default)]
struct TimerSet {
    map: BTreeMap<(Instant, u64), Waker>,
    far: Vec<Option<Far>>,
    far_free: Vec<u32>,
    far_len: usize,
    /// No far timer is due before this (exact after a promotion, maybe
    /// early after a cancel). `None`: no far timer.
    far_min: Option<Instant>,
    next_seq: u64,
    /// The instant the timerfd is armed for.
    armed: Option<Instant>,
    shutdown: bool,
}

impl TimerSet {
    /// When the timerfd must next fire: the earliest near deadline, or the
    /// point where far timers must move into the map.
    fn wake_at(&self) -> Option<Instant> {
        let near = self.map.first_key_value().map(|(k, _)| k.0);
        let far = self.far_min.map(|m| m.checked_sub(HORIZON).unwrap_or(m));
        match (near, far) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves every far timer due by `now + 2 × HORIZON` into the map and
    /// recomputes `far_min` exactly, if `now` has reached the point where
    /// that is due.
    fn promote(&mut self, now: Instant) {
        let Some(min) = self.far_min else { return };
        if now + HORIZON < min {
            return;
        }
        let limit = now + HORIZON * 2;
        let mut next: Option<Instant> = None;
        for (i, slot) in self.far.iter_mut().enumerate() {
            let Some(f) = slot else { continue };
            if f.deadline <= limit {
                let f = slot.take().expect("matched Some");
                self.map.insert((f.deadline, f.seq), f.waker);
                self.far_free.push(i as u32);
                self.far_len -= 1;
            } else {
                next = Some(next.map_or(f.deadline, |n| n.min(f.deadline)));
            }
        }
        self.far_min = next;
    }

    /// The far entry of `key`, if it is still in the slab.
    fn far_mut(&mut self, key: TimerKey) -> Option<&mut Far> {
        if key.slot == NEAR {
            return None;
        }
        self.far
            .get_mut(key.slot as usize)?
            .as_mut()
            .filter(|f| f.seq == key.seq)
    }

    /// The earliest deadline, near or far (exact: scans the slab).
    fn first_deadline(&self) -> Option<Instant> {
        let near = self.map.first_key_value().map(|(k, _)| k.0);
        let far = self.far.iter().flatten().map(|f| f.deadline).min();
        match (near, far) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
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
        // A panic while holding this lock cannot leave the set inconsistent
        // (wakers are never called under it), so poisoning is ignored.
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(&self, set: &mut TimerSet, at: Option<Instant>, clock: &Clock) {
        // Paused: a virtual deadline is no real-time wait; leave it disarmed.
        let at = at.filter(|_| !clock.is_paused());
        set.armed = at;
        let after = at.map(|d| d.saturating_duration_since(clock.now()));
        // Arming a valid timerfd with a valid value cannot fail.
        let r = sys::timerfd_set(&self.timerfd, after);
        debug_assert!(r.is_ok(), "timerfd_settime: {r:?}");
    }

    /// Adds a timer; `None` if the runtime has shut down. `now` (the
    /// caller's clock reading, one it made anyway) only decides whether the
    /// timer is far: a stale one at worst arms the timerfd early for a
    /// promotion.
    pub(crate) fn insert(
        &self,
        deadline: Instant,
        now: Instant,
        waker: Waker,
        clock: &Clock,
    ) -> Option<TimerKey> {
        let mut set = self.lock();
        if set.shutdown {
            return None;
        }
        let seq = set.next_seq;
        set.next_seq += 1;
        let far = now.checked_add(HORIZON * 2).is_some_and(|l| deadline > l);
        let (slot, wake_at) = if far {
            let entry = Some(Far {
                deadline,
                seq,
                waker,
            });
            let slot = match set.far_free.pop() {
                Some(i) => {
                    set.far[i as usize] = entry;
                    i
                }
                None => {
                    set.far.push(entry);
                    (set.far.len() - 1) as u32
                }
            };
            set.far_len += 1;
            set.far_min = Some(set.far_min.map_or(deadline, |m| m.min(deadline)));
            (slot, deadline - HORIZON)
        } else {
            set.map.insert((deadline, seq), waker);
            (NEAR, deadline)
        };
        if set.armed.is_none_or(|a| wake_at < a) {
            self.arm(&mut set, Some(wake_at), clock);
        }
        Some(TimerKey {
            deadline,
            seq,
            slot,
        })
    }

    /// Checks a registered timer, refreshing its waker while pending.
    pub(crate) fn poll(&self, key: TimerKey, waker: &Waker) -> TimerState {
        let mut set = self.lock();
        if set.shutdown {
            return TimerState::Shutdown;
        }
        let w = match set.far_mut(key) {
            Some(f) => &mut f.waker,
            None => match set.map.get_mut(&(key.deadline, key.seq)) {
                Some(w) => w,
                None => return TimerState::Fired,
            },
        };
        if !w.will_wake(waker) {
            *w = waker.clone();
        }
        TimerState::Pending
    }

    /// Cancels a timer (no-op if it already fired).
    pub(crate) fn remove(&self, key: TimerKey) {
        let mut set = self.lock();
        let waker = if set.far_mut(key).is_some() {
            let f = set.far[key.slot as usize].take();
            set.far_free.push(key.slot);
            set.far_len -= 1;
            if set.far_len == 0 {
                set.far_min = None;
            }
            f.map(|f| f.waker)
        } else {
            set.map.remove(&(key.deadline, key.seq))
        };
        drop(set);
        drop(waker); // outside the lock: dropping a waker may run task code
    }

    /// Removes every timer due at `now`, appending their wakers in deadline
    /// order, and re-arms the timerfd if it fired.
    pub(crate) fn fire_expired(&self, clock: &Clock, out: &mut Vec<Waker>) {
        let now = clock.now();
        let mut set = self.lock();
        set.promote(now);
        while let Some(entry) = set.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove());
        }
        if set.armed.is_some_and(|a| a <= now) {
            let next = set.wake_at();
            self.arm(&mut set, next, clock);
        }
    }

    /// Removes every timer due at `now` with its key, for a caller that
    /// merges several P's timers into one deadline order (paused time).
    pub(crate) fn take_expired(&self, now: Instant, out: &mut Vec<(TimerKey, Waker)>) {
        let mut set = self.lock();
        set.promote(now);
        while let Some(entry) = set.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((deadline, seq), w) = entry.remove_entry();
            out.push((
                TimerKey {
                    deadline,
                    seq,
                    slot: NEAR,
                },
                w,
            ));
        }
    }

    /// Arms the timerfd for the earliest deadline as `clock` now reads it:
    /// disarmed when it is paused, armed again when it resumes.
    pub(crate) fn rearm(&self, clock: &Clock) {
        let mut set = self.lock();
        let next = set.wake_at();
        self.arm(&mut set, next, clock);
    }

    /// The earliest pending deadline (far timers included: a scan of the
    /// slab, so not for a hot path).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.lock().first_deadline()
    }

    pub(crate) fn len(&self) -> usize {
        let set = self.lock();
        set.map.len() + set.far_len
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
            let far: Vec<Far> = std::mem::take(&mut set.far).into_iter().flatten().collect();
            set.far_free.clear();
            set.far_len = 0;
            set.far_min = None;
            (std::mem::take(&mut set.map), far)
        };
        // Outside the lock: a waker may run arbitrary code, even poll the
        // timer again.
        let (map, far) = map;
        for w in map.into_values().chain(far.into_iter().map(|f| f.waker)) {
            crate::fault::wake(w, "a timer's waker");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn setup() -> (Timers, Clock, Arc<Count>, Waker) {
        let clock = Clock::new();
        clock.pause().unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        (Timers::new(sys::timerfd().unwrap()), clock, count, waker)
    }

    fn fire(t: &Timers, clock: &Clock) -> usize {
        let mut out = Vec::new();
        t.fire_expired(clock, &mut out);
        let n = out.len();
        out.into_iter().for_each(Waker::wake);
        n
    }

    /// A far timer lives in the slab, not the map, and leaves nothing
    /// behind when cancelled: the slot is reused by the next far timer.
    #[test]
    fn a_cancelled_far_timer_leaves_nothing() {
        let (t, clock, _, waker) = setup();
        let now = clock.now();
        let k = t
            .insert(
                now + Duration::from_secs(30),
                clock.now(),
                waker.clone(),
                &clock,
            )
            .unwrap();
        assert_ne!(k.slot, NEAR, "30 s ahead is far");
        let near = t.lock().map.len();
        assert_eq!((near, t.len()), (0, 1));
        t.remove(k);
        assert_eq!(t.len(), 0);
        assert_eq!(t.lock().far_min, None);
        let k2 = t
            .insert(now + Duration::from_secs(31), clock.now(), waker, &clock)
            .unwrap();
        assert_eq!(k2.slot, k.slot, "the slot is reused");
        // The old key no longer names anything (another sequence number).
        t.remove(k);
        assert_eq!(t.len(), 1, "a stale key removed nothing");
    }

    /// A far timer fires at its deadline, not before: it is promoted into
    /// the map a HORIZON before it at the latest, and its key keeps working there.
    #[test]
    fn a_far_timer_is_promoted_and_fires_on_time() {
        let (t, clock, count, waker) = setup();
        let now = clock.now();
        let far = t
            .insert(
                now + Duration::from_secs(10),
                clock.now(),
                waker.clone(),
                &clock,
            )
            .unwrap();
        let near = t
            .insert(
                now + Duration::from_millis(100),
                clock.now(),
                waker.clone(),
                &clock,
            )
            .unwrap();
        assert_eq!(near.slot, NEAR);
        assert_eq!(t.next_deadline(), Some(now + Duration::from_millis(100)));
        t.remove(near);
        assert_eq!(
            t.next_deadline(),
            Some(now + Duration::from_secs(10)),
            "exact, far included"
        );
        clock.advance(Duration::from_secs(8)).unwrap();
        assert_eq!(fire(&t, &clock), 0);
        assert!(matches!(t.poll(far, &waker), TimerState::Pending));
        assert_eq!(t.lock().far_len, 1, "2 s ahead: still far");
        clock.advance(Duration::from_secs(1)).unwrap();
        assert_eq!(fire(&t, &clock), 0);
        assert_eq!(
            t.lock().far_len,
            0,
            "promoted a HORIZON before its deadline"
        );
        assert!(
            matches!(t.poll(far, &waker), TimerState::Pending),
            "found in the map"
        );
        clock.advance(Duration::from_millis(999)).unwrap();
        assert_eq!(fire(&t, &clock), 0, "not due yet");
        clock.advance(Duration::from_millis(1)).unwrap();
        assert_eq!(fire(&t, &clock), 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(matches!(t.poll(far, &waker), TimerState::Fired));
        assert_eq!(t.len(), 0);
    }

    /// Far timers with spread deadlines all fire, in order, and a promotion
    /// leaves the later ones in the slab.
    #[test]
    fn spread_far_timers_fire_in_order() {
        let (t, clock, _, _) = setup();
        let now = clock.now();
        let order = Arc::new(Mutex::new(Vec::new()));
        struct Rec(usize, Arc<Mutex<Vec<usize>>>);
        impl Wake for Rec {
            fn wake(self: Arc<Self>) {
                self.1.lock().unwrap().push(self.0);
            }
        }
        for i in (0..20).rev() {
            let w = Waker::from(Arc::new(Rec(i, order.clone())));
            t.insert(
                now + Duration::from_secs(3 + i as u64),
                clock.now(),
                w,
                &clock,
            )
            .unwrap();
        }
        assert_eq!(t.lock().far_len, 20);
        for _ in 0..50 {
            clock.advance(Duration::from_millis(500)).unwrap();
            fire(&t, &clock);
            let set = t.lock();
            if let Some(min) = set.far_min {
                assert!(
                    min > clock.now() + HORIZON,
                    "a far timer due within HORIZON was left in the slab"
                );
            }
        }
        assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
        assert_eq!(t.len(), 0);
    }

    /// Shutdown wakes far and near timers alike.
    #[test]
    fn shutdown_wakes_far_timers() {
        let (t, clock, count, waker) = setup();
        let now = clock.now();
        t.insert(
            now + Duration::from_secs(60),
            clock.now(),
            waker.clone(),
            &clock,
        )
        .unwrap();
        t.insert(now + Duration::from_millis(1), clock.now(), waker, &clock)
            .unwrap();
        t.shutdown();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(t.len(), 0);
    }
}

//! Paused time, the reactor's side: pausing and resuming the runtime's one
//! clock, moving it by hand (`time::advance`) and by itself when the runtime
//! is idle (auto-advance). The design and its race argument are in
//! `docs/architecture.md`, "Paused time (tests)".
//!
//! # Who auto-advances
//!
//! An M about to block in its park ([`Driver::park`](super::Driver::park)
//! calls [`advance_if_idle`] first) when it is the last thread to go idle.
//! A `block_on` about to park (`Reactor::auto_advance_parking`) and the
//! monitor thread once per round ([`Reactor::auto_advance`], the fallback
//! for idleness nobody parks into: a blocking-pool task that ends without
//! waking anything) check too, and when the runtime is idle with I/O
//! sources registered they unpark the M of the P with the earliest timer,
//! which advances as it parks again: only an M knows it has no event in
//! hand, since one whose `epoll_wait` has just returned still looks parked
//! to any other thread until it has dispatched what it got. Without
//! sources there is no such event, and they advance themselves. So the clock jumps to the
//! next deadline as soon as the last thread goes idle, with no monitor
//! round in between: a sleep in paused time costs a few microseconds, as on
//! tokio's current-thread runtime (10,000 random sleeps: 10.9 s at one
//! deadline per monitor round, now well under a second).
//!
//! # Why it is race-free enough
//!
//! Every advance happens under one lock ([`Paused::advance`]) and re-reads,
//! under it, every condition of "idle": every M parked (SeqCst, pairing
//! with the stores around each M's `epoll_wait`), every registered
//! `block_on`'s wake flag clear, and the executor's half through the
//! sysmon hook (`SysmonHook::runtime_idle`: every P idle, queues empty,
//! every `block_on` parked, nothing in the blocking pool or in a
//! `block_in_place`), and no io poller holding an event not yet dispatched
//! (a `poll(2)` peek: tokio, too, polls I/O before it advances, so a reply
//! already on its way beats a timeout around its read). A wake done by an advance is visible to the next one
//! before the lock is released: an M that advances from its park clears its
//! parked flag first (the woken tasks go to its own queue), a woken task
//! elsewhere takes its P out of the idle set before its M is unparked, and a
//! woken `block_on` has its wake flag set, which the registry lets the next
//! advance read. So two advances never run back to back while a task woken
//! by the first is still to run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use super::{Reactor, Shared};
use crate::clock::NOT_PAUSED;

/// The auto-advance's shared state (one per runtime).
#[derive(Default)]
pub(crate) struct Paused {
    /// Held across each auto-advance's checks, clock move and wake-ups:
    /// the next advance's checks see every wake-up of the previous one.
    advance: Mutex<()>,
    /// The wake flags of the `block_on`s in progress, by key: a flag set
    /// means that `block_on` has been woken and is about to run, though its
    /// thread may not have left its park yet.
    block_ons: Mutex<Vec<(u64, Arc<AtomicBool>)>>,
    next_key: std::sync::atomic::AtomicU64,
    /// Odd while the monitor drains a poller nobody watches
    /// (`monitor::poll_unwatched`): bumped before its `epoll_wait` and after
    /// it has fired what it found. An advance that reads the same even value
    /// before its checks and after its I/O peek knows no such drain held an
    /// event out of sight of both (a seqlock's read side).
    monitor_drains: AtomicU64,
}

impl Paused {
    /// The monitor is about to drain a poller (see `monitor_drains`).
    pub(crate) fn monitor_drain_begins(&self) {
        // SeqCst: pairs with the loads in `advance_if_idle`; the drain's
        // epoll_wait comes after this store.
        self.monitor_drains.fetch_add(1, SeqCst);
    }

    /// The monitor has fired what its drain found.
    pub(crate) fn monitor_drain_ends(&self) {
        // SeqCst: as above; the wake-ups it fired (queued tasks, which the
        // executor's idle check sees) come before this store.
        self.monitor_drains.fetch_add(1, SeqCst);
    }
}

/// A `block_on` registered with [`Reactor::register_block_on`]; unregisters
/// on drop.
pub struct BlockOnRegistration {
    shared: Arc<Shared>,
    key: u64,
}

impl Drop for BlockOnRegistration {
    fn drop(&mut self) {
        lock(&self.shared.paused.block_ons).retain(|(k, _)| *k != self.key);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks leaves them inconsistent on a panic (a
    // waker that panics is caught by `fault::wake`).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The auto-advance: if the clock is paused and the whole runtime is idle
/// (see the module docs), moves the clock to the earliest pending deadline
/// of all P's and wakes the timers due then, on the calling thread, in
/// deadline order. Returns how many it woke.
///
/// `parking`: the P whose M calls this from its park, with its parked flag
/// already set; it is cleared before any waker runs (the woken tasks are
/// queued on that P, which its M then runs).
pub(crate) fn advance_if_idle(shared: &Shared, parking: Option<usize>) -> usize {
    let _advancing = lock(&shared.paused.advance);
    // A few rounds at most: a deadline whose timer was cancelled meanwhile
    // moves the clock but wakes nothing; the next deadline is then tried.
    for _ in 0..16 {
        if !shared.clock.is_paused() || shared.is_shutdown() {
            return 0;
        }
        // SeqCst: pairs with the monitor's bumps around a drain (see
        // `Paused::monitor_drains`); read again after the I/O peek below.
        let drains = shared.paused.monitor_drains.load(SeqCst);
        if drains % 2 == 1 {
            return 0;
        }
        // SeqCst pairs with the stores around each M's epoll_wait in
        // `Driver::park`: an M seen parked here had nothing to run when it
        // parked (the executor's hook covers its queues).
        if !shared.ps.iter().all(|p| p.parked.load(SeqCst)) {
            return 0;
        }
        // SeqCst: a flag set by a wake-up before this advance took the lock
        // (under it, if that wake-up was an advance's) is seen.
        if lock(&shared.paused.block_ons)
            .iter()
            .any(|(_, woken)| woken.load(SeqCst))
        {
            return 0;
        }
        if !shared.monitor.hook_runtime_idle() {
            return 0;
        }
        // An I/O event already delivered to a poller but not yet dispatched
        // comes first, as in tokio (which polls its driver with a zero
        // timeout before it advances): the M that drains it (a parked
        // watcher the kernel is waking, or this M's own wait) runs its task,
        // and the last to go idle after that advances. A peek, so edge-
        // triggered events stay for their drainer.
        if crate::sys::any_readable(&shared.io_fds()) {
            return 0;
        }
        // The monitor's drain of an unwatched poller takes events out of
        // the peek's sight before its wake-ups queue the tasks that the idle
        // check above would see: one that began or ended since the first
        // read may hold a reply in hand (the port's idle-connection test in
        // the 4-node guest: its 30 s idle timeout fired at once).
        if shared.paused.monitor_drains.load(SeqCst) != drains {
            return 0;
        }
        let Some((next, owner)) = shared
            .ps
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.timers.next_deadline().map(|d| (d, i)))
            .min()
        else {
            return 0;
        };
        if parking.is_none() && has_io_sources(shared) {
            // Not an M (the monitor, or a `block_on` about to park), with
            // I/O registered: hand the advance to the M of the P that owns
            // the earliest timer. An M whose `epoll_wait` has just returned
            // an event (consumed: the peek above cannot see it) still looks
            // parked until it has dispatched it; advancing from here could
            // then fire a timeout around a read whose reply that M is about
            // to deliver (seen on one P in a slow TCG guest: the monitor
            // advanced past an echo reply, issue 45). The woken M finds
            // nothing to run, parks again and advances itself, after its
            // own events: on one P nobody else advances, so ready I/O always
            // comes first. Without sources no such event exists (the
            // timerfds are disarmed while paused; an unpark comes with
            // queued work, which the executor's check sees), and advancing
            // here saves an M's wake-up per deadline (10,000 sleeps in a
            // `block_on` took 6.5 s in a TCG guest with one per deadline).
            shared.ps[owner].unpark();
            return 0;
        }
        if !shared.clock.advance_to(next) {
            return 0;
        }
        if let Some(p) = parking {
            // SeqCst: the same pair as above; the next advance sees this M
            // awake until it parks again.
            shared.ps[p].parked.store(false, SeqCst);
        }
        let fired = fire_paused(shared);
        if fired > 0 {
            return fired;
        }
        if let Some(p) = parking {
            shared.ps[p].parked.store(true, SeqCst);
        }
    }
    0
}

/// Whether any P's poller has an I/O source registered (its sources lock,
/// briefly, per P; only while the clock is paused).
fn has_io_sources(shared: &Shared) -> bool {
    shared.ps.iter().any(|p| lock(&p.sources).len() > 0)
}

/// Wakes every timer due at the paused clock's now, across all P's, in
/// deadline order; returns how many.
fn fire_paused(shared: &Shared) -> usize {
    let now = shared.clock.now();
    let mut due: Vec<(std::time::Instant, Waker)> = Vec::new();
    for p in shared.ps.iter() {
        p.timers.take_expired(now, &mut due);
    }
    // Stable: ties keep P order, and each P's sequence order within it.
    due.sort_by_key(|(deadline, _)| *deadline);
    let n = due.len();
    // Outside every timer lock: a waker may run arbitrary code.
    for (_, w) in due {
        crate::fault::wake(w, "a timer's waker");
    }
    n
}

impl Reactor {
    /// Whether the runtime's clock is paused (a Relaxed load).
    pub fn is_clock_paused(&self) -> bool {
        self.shared.clock.is_paused()
    }

    /// The runtime's now: std's clock, or the paused (or resumed) virtual one,
    /// as std's `Instant` (`time::Instant::from_std` wraps it: the driver
    /// speaks std's type and `time` is built on the driver, not the other
    /// way round).
    pub fn clock_now(&self) -> std::time::Instant {
        self.shared.clock.now()
    }

    /// Pauses the runtime's clock: every P's timerfd is disarmed, and the
    /// monitor thread (started if it was not running) auto-advances it.
    ///
    /// # Panics
    /// If the clock is already paused, or the monitor thread cannot start.
    #[track_caller]
    pub fn pause_clock(&self) {
        let shared = &self.shared;
        if shared.clock.pause().is_err() {
            panic!(
                "numa_rt::time::pause: the clock is already paused (pause() twice, or pause() in \
                 a runtime built with start_paused)"
            );
        }
        for p in shared.ps.iter() {
            p.timers.rearm();
        }
        if let Err(e) = shared.monitor.start(shared) {
            panic!("numa_rt::time::pause: paused time is advanced by the monitor thread: {e}");
        }
        // A monitor asleep since the runtime went idle must look again: the
        // runtime may be idle with timers that only auto-advance can fire.
        shared.monitor.kick();
    }

    /// Lets the clock run again from where it stands and re-arms every P's
    /// timerfd.
    ///
    /// # Panics
    /// If the clock is not paused.
    #[track_caller]
    pub fn resume_clock(&self) {
        let shared = &self.shared;
        if shared.clock.resume().is_err() {
            panic!("{NOT_PAUSED}");
        }
        for p in shared.ps.iter() {
            p.timers.rearm();
        }
    }

    /// Moves the paused clock forward by `by` and wakes, on the calling
    /// thread and in deadline order, every timer of every P now due.
    ///
    /// # Panics
    /// If the clock is not paused.
    #[track_caller]
    pub fn advance_clock(&self, by: Duration) {
        if self.shared.clock.advance(by).is_err() {
            panic!("{NOT_PAUSED}");
        }
        self.fire_paused();
    }

    /// The auto-advance, from the monitor thread (the executor's sysmon):
    /// if the clock is paused and the whole runtime is idle, unparks the M
    /// of the P with the earliest timer, which advances the clock as it
    /// parks again (only M's advance: see the module docs). Returns whether
    /// it woke any timer itself (never, now; kept for the caller's
    /// bookkeeping). The threads that go idle advance by themselves; this
    /// round catches idleness nobody parked into.
    pub fn auto_advance(&self) -> bool {
        advance_if_idle(&self.shared, None) > 0
    }

    /// The auto-advance from a thread about to park in `block_on` (already
    /// counted as parked by the executor, its wake flag registered and
    /// clear): if the runtime is idle it unparks the M that advances (see
    /// the module docs); a timer of this `block_on` that M fires sets the
    /// flag and wakes it. Returns how many timers it woke itself (none). A
    /// Relaxed load and nothing else while time runs.
    pub fn auto_advance_parking(&self) -> usize {
        if !self.shared.clock.is_paused() {
            return 0;
        }
        advance_if_idle(&self.shared, None)
    }

    /// Registers a `block_on`'s wake flag (set by its waker before it
    /// unparks the thread, cleared by the `block_on` when it polls): an
    /// auto-advance does not run while a woken `block_on` is still to run.
    pub fn register_block_on(&self, woken: Arc<AtomicBool>) -> BlockOnRegistration {
        let key = self
            .shared
            .paused
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.shared.paused.block_ons).push((key, woken));
        BlockOnRegistration {
            shared: self.shared.clone(),
            key,
        }
    }

    /// Wakes every timer due at the paused clock's now.
    fn fire_paused(&self) -> usize {
        fire_paused(&self.shared)
    }
}

//! Paused time, the reactor's side: pausing and resuming the runtime's one
//! clock, moving it by hand (`time::advance`) and by itself when the runtime
//! is idle ([`Reactor::auto_advance`], run by the executor's sysmon on the
//! monitor thread). The design and its race argument are in
//! `docs/architecture.md`, "Paused time (tests)".

use std::task::Waker;
use std::time::{Duration, Instant};

use super::Reactor;
use crate::clock::NOT_PAUSED;

impl Reactor {
    /// Whether the runtime's clock is paused (a Relaxed load).
    pub fn is_clock_paused(&self) -> bool {
        self.shared.clock.is_paused()
    }

    /// The runtime's now: std's clock, or the paused (or resumed) virtual one.
    pub fn clock_now(&self) -> Instant {
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

    /// The auto-advance: while the clock is paused and every M is parked in
    /// its driver, moves the clock to the earliest pending deadline of all
    /// P's and wakes the timers due then, on the calling thread. Returns
    /// whether it woke any. The caller (the executor's sysmon) has checked
    /// that nothing else can run: see `docs/architecture.md`.
    pub fn auto_advance(&self) -> bool {
        let shared = &self.shared;
        if !shared.clock.is_paused() || shared.is_shutdown() {
            return false;
        }
        // SeqCst pairs with the stores around each M's epoll_wait in
        // `Driver::park`: an M seen parked here had nothing to run when it
        // parked (the executor's own check covers its queues).
        if !shared
            .ps
            .iter()
            .all(|p| p.parked.load(std::sync::atomic::Ordering::SeqCst))
        {
            return false;
        }
        let next = shared
            .ps
            .iter()
            .filter_map(|p| p.timers.next_deadline())
            .min();
        match next {
            Some(next) if shared.clock.advance_to(next) => self.fire_paused() > 0,
            _ => false,
        }
    }

    /// Wakes every timer due at the paused clock's now, across all P's, in
    /// deadline order; returns how many.
    fn fire_paused(&self) -> usize {
        let shared = &self.shared;
        let now = shared.clock.now();
        let mut due: Vec<(Instant, Waker)> = Vec::new();
        for p in shared.ps.iter() {
            p.timers.take_expired(now, &mut due);
        }
        // Stable: ties keep P order, and each P's sequence order within it.
        due.sort_by_key(|(deadline, _)| *deadline);
        let n = due.len();
        // Outside every lock: a waker may run arbitrary code.
        for (_, w) in due {
            crate::fault::wake(w, "a timer's waker");
        }
        n
    }
}

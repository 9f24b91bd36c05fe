//! The runtime's clock: std's monotonic clock, or, once a test pauses it, a
//! virtual one (tokio's `test-util` clock). It depends on nothing else in
//! the crate: the drivers' timers hold it, and `time` finds the current
//! runtime's clock through the thread's context.
//!
//! The clock works in `std::time::Instant`s (the timer sets and the driver
//! do); the public `numa_rt::time::Instant` wraps what [`Clock::now`] returns. A
//! runtime whose clock was never paused reads `Instant::now()` after one
//! Relaxed load of its [`Clock`]'s state (and code that has no reactor at
//! hand, one Relaxed load of [`NOT_REAL`], a static nobody writes unless a
//! test pauses time). Once paused, the clock reads `base` (frozen;
//! [`Clock::advance`] moves it), and after [`Clock::resume`]
//! `base + (std now - since)`: virtual time goes on from where it stood,
//! never backwards, as in tokio. A paused clock starts from std's now, so
//! the two kinds of instant share an epoch and convert for free.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// std's clock, unshifted: every runtime that never paused.
const REAL: u8 = 0;
/// Frozen at `base`.
const PAUSED: u8 = 1;
/// Resumed after a pause: `base + (std now - since)`.
const SHIFTED: u8 = 2;

/// How many live clocks are not [`REAL`]. Read Relaxed by [`Clock::now`]: zero in
/// any process that never pauses time, so that read is one load of a cache
/// line nobody writes.
static NOT_REAL: AtomicUsize = AtomicUsize::new(0);

/// One runtime's clock, shared by every P's timers.
pub(crate) struct Clock {
    /// [`REAL`], [`PAUSED`] or [`SHIFTED`]. Written under `inner`'s lock;
    /// read Relaxed on the fast path: a reader that sees a stale [`REAL`]
    /// right after a pause reads std's clock, at or after the instant the
    /// clock froze at, which is what it would have read a moment earlier.
    state: AtomicU8,
    inner: Mutex<Inner>,
}

struct Inner {
    /// The virtual instant at `since` (or now, while paused).
    base: Instant,
    /// The std instant when the clock resumed; `None` while paused.
    since: Option<Instant>,
}

/// The panic message of [`crate::time::advance`] and [`crate::time::resume`]
/// on a clock that is not paused.
pub(crate) const NOT_PAUSED: &str = "numa_rt::time: the clock is not paused: call \
     numa_rt::time::pause() (or build the runtime with start_paused) before advance() or resume()";

impl Clock {
    pub(crate) fn new() -> Clock {
        let now = Instant::now();
        Clock {
            state: AtomicU8::new(REAL),
            inner: Mutex::new(Inner {
                base: now,
                since: Some(now),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics under this lock (the panics below come after it is
        // dropped), so poisoning cannot leave it inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The runtime's now.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        if self.state.load(Relaxed) == REAL {
            return Instant::now();
        }
        self.slow_now()
    }

    #[cold]
    fn slow_now(&self) -> Instant {
        let inner = self.lock();
        match inner.since {
            None => inner.base,
            Some(since) => inner.base + since.elapsed(),
        }
    }

    /// Whether the clock is paused (Relaxed: a hint for the driver and the
    /// monitor; the transitions themselves go through the lock).
    pub(crate) fn is_paused(&self) -> bool {
        self.state.load(Relaxed) == PAUSED
    }

    /// Freezes the clock at its current now; `Err` if it is already paused.
    pub(crate) fn pause(&self) -> Result<(), ()> {
        let mut inner = self.lock();
        match self.state.load(Relaxed) {
            PAUSED => return Err(()),
            REAL => {
                NOT_REAL.fetch_add(1, Relaxed);
            }
            _ => {}
        }
        if let Some(since) = inner.since.take() {
            inner.base += since.elapsed();
        }
        self.state.store(PAUSED, Relaxed);
        Ok(())
    }

    /// Lets the clock run again from where it stands; `Err` if not paused.
    pub(crate) fn resume(&self) -> Result<(), ()> {
        let mut inner = self.lock();
        if self.state.load(Relaxed) != PAUSED {
            return Err(());
        }
        inner.since = Some(Instant::now());
        self.state.store(SHIFTED, Relaxed);
        Ok(())
    }

    /// Moves a paused clock forward by `by`; returns the new now, or `Err`
    /// if the clock is not paused.
    pub(crate) fn advance(&self, by: Duration) -> Result<Instant, ()> {
        let mut inner = self.lock();
        if self.state.load(Relaxed) != PAUSED {
            return Err(());
        }
        inner.base = inner.base.checked_add(by).unwrap_or(inner.base);
        Ok(inner.base)
    }

    /// Moves a paused clock forward to `to` (never back); returns whether
    /// the clock is paused.
    pub(crate) fn advance_to(&self, to: Instant) -> bool {
        let mut inner = self.lock();
        if self.state.load(Relaxed) != PAUSED {
            return false;
        }
        inner.base = inner.base.max(to);
        true
    }
}

impl Drop for Clock {
    fn drop(&mut self) {
        if *self.state.get_mut() != REAL {
            NOT_REAL.fetch_sub(1, Relaxed);
        }
    }
}

/// Whether no live clock of this process is paused or shifted: then every
/// runtime's now is `Instant::now()` (one Relaxed load of a line nobody
/// writes). `crate::time::now` reads the current runtime's clock otherwise.
#[inline]
pub(crate) fn all_real() -> bool {
    NOT_REAL.load(Relaxed) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_clock_moves_only_when_advanced_and_resumes_from_there() {
        let c = Clock::new();
        assert!(!c.is_paused());
        assert_eq!(c.advance(Duration::from_secs(1)), Err(()));
        assert_eq!(c.resume(), Err(()));
        c.pause().unwrap();
        assert_eq!(c.pause(), Err(()));
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        let t1 = c.advance(Duration::from_secs(3600)).unwrap();
        assert_eq!(t1, t0 + Duration::from_secs(3600));
        assert!(c.advance_to(t0));
        assert_eq!(c.now(), t1, "advance_to never goes back");
        c.resume().unwrap();
        assert!(c.now() >= t1);
        assert!(!c.is_paused());
        c.pause().unwrap();
        assert!(c.now() >= t1);
    }
}

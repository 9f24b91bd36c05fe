//! [`Instant`]: a point on the runtime's clock (tokio's `time::Instant`).
//!
//! A newtype over [`std::time::Instant`] whose [`Instant::now`] reads the
//! runtime's clock: std's while time runs, the virtual one while a test has
//! paused it (see the module docs of [`crate::time`]). Every deadline of
//! the time API ([`sleep_until`](super::sleep_until),
//! [`timeout_at`](super::timeout_at), [`interval_at`](super::interval_at),
//! [`Sleep::deadline`](super::Sleep::deadline), [`Interval::tick`](super::Interval::tick))
//! is one, so code that computes deadlines from `Instant::now()` keeps
//! working when its test pauses time, as it does on tokio.
//!
//! It has std's arithmetic; [`Instant::from_std`] and [`Instant::into_std`]
//! (and `From` both ways) convert for APIs that take std's type. Outside a
//! runtime `now()` is std's now.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

/// A measurement of the runtime's monotonic clock: std's, or the paused
/// virtual clock of a test (tokio's `time::Instant`).
///
/// ```
/// use numa_rt_reactor::time::Instant;
/// use std::time::Duration;
///
/// let t = Instant::now();
/// let later = t + Duration::from_millis(5);
/// assert_eq!(later - t, Duration::from_millis(5));
/// assert_eq!(later.duration_since(t), Duration::from_millis(5));
/// assert_eq!(t.saturating_duration_since(later), Duration::ZERO);
/// assert_eq!(Instant::from_std(t.into_std()), t);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    std: std::time::Instant,
}

impl Instant {
    /// The runtime's now: [`std::time::Instant::now`] unless the current
    /// runtime's clock is paused (or was, then resumed), in which case its
    /// virtual now. Outside a runtime, std's now.
    #[inline]
    pub fn now() -> Instant {
        Instant::from_std(super::std_now())
    }

    /// Wraps a std instant (no conversion: the clocks share their epoch;
    /// a paused clock only stops moving).
    #[inline]
    pub const fn from_std(std: std::time::Instant) -> Instant {
        Instant { std }
    }

    /// The std instant this one is.
    #[inline]
    pub const fn into_std(self) -> std::time::Instant {
        self.std
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later (std's
    /// `duration_since` behaves the same since Rust 1.60).
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// The time from `earlier` to `self`, or `None` if `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.std.checked_duration_since(earlier.std)
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// The time since `self` on the runtime's clock ([`Instant::now`]);
    /// zero if `self` is in the future.
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self + duration`, or `None` if it does not fit.
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_add(duration).map(Instant::from_std)
    }

    /// `self - duration`, or `None` if it does not fit.
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_sub(duration).map(Instant::from_std)
    }
}

impl From<std::time::Instant> for Instant {
    fn from(std: std::time::Instant) -> Instant {
        Instant::from_std(std)
    }
}

impl From<Instant> for std::time::Instant {
    fn from(t: Instant) -> std::time::Instant {
        t.into_std()
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// On overflow, like std's.
    fn add(self, rhs: Duration) -> Instant {
        Instant::from_std(self.std + rhs)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// On overflow, like std's.
    fn sub(self, rhs: Duration) -> Instant {
        Instant::from_std(self.std - rhs)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// Saturates at zero, like std's.
    fn sub(self, rhs: Instant) -> Duration {
        self.duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)
    }
}

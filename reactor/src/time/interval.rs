//! Periodic ticks with a choice of what to do about missed ones.

use std::future::poll_fn;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::{far_future, sleep_until, Instant, Sleep};

/// What an [`Interval`] does when ticks were missed (the task was late).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Fire the missed ticks back to back until caught up (the default, as
    /// in tokio): the schedule stays `start + n * period`.
    #[default]
    Burst,
    /// Restart the schedule from the late tick: the next is `now + period`.
    Delay,
    /// Drop the missed ticks and fire on the next multiple of the period
    /// after now: the schedule keeps its phase.
    Skip,
}

use crate::tuning::MISSED_SLACK;

impl MissedTickBehavior {
    fn next(self, scheduled: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => after(scheduled, period),
            MissedTickBehavior::Delay => after(now, period),
            MissedTickBehavior::Skip => {
                let late = (now - scheduled).as_nanos();
                let period_ns = period.as_nanos();
                let into_period = Duration::from_nanos((late % period_ns) as u64);
                after(now, period - into_period)
            }
        }
    }
}

/// `at + period`, or "never" ([`far_future`]) where that overflows: an
/// interval of `Duration::MAX` ticks once (tokio saturates the same way).
fn after(at: Instant, period: Duration) -> Instant {
    at.checked_add(period).unwrap_or_else(far_future)
}

/// Ticks every `period`, the first tick at once.
///
/// # Panics
/// If `period` is zero (at the caller's line).
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
/// If `period` is zero (at the caller's line).
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval period must be non-zero");
    Interval {
        delay: sleep_until(start),
        period,
        missed: MissedTickBehavior::default(),
    }
}

/// The stream of ticks returned by [`interval`].
#[derive(Debug)]
pub struct Interval {
    delay: Sleep,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    /// Completes at the next tick, returning the instant it was scheduled for.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        ready!(self.delay.poll_deadline(cx, true));
        let scheduled = self.delay.deadline();
        let now = self.delay.now();
        let next = if now > after(scheduled, MISSED_SLACK) {
            self.missed.next(scheduled, now, self.period)
        } else {
            after(scheduled, self.period)
        };
        self.delay.reset_unpinned(next);
        Poll::Ready(scheduled)
    }

    /// Restarts the schedule: the next tick is one period from now.
    pub fn reset(&mut self) {
        self.delay
            .reset_unpinned(after(Instant::now(), self.period));
    }

    /// Restarts the schedule with a tick at once.
    pub fn reset_immediately(&mut self) {
        self.delay.reset_unpinned(Instant::now());
    }

    /// Restarts the schedule: the next tick is `after` from now.
    pub fn reset_after(&mut self, after: Duration) {
        self.delay
            .reset_unpinned(self::after(Instant::now(), after));
    }

    /// Restarts the schedule: the next tick is at `deadline`.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.delay.reset_unpinned(deadline);
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The missed-tick behaviour.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets the missed-tick behaviour.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }
}

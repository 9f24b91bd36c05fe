//! Periodic ticks with a choice of what to do about missed ones.

use std::future::poll_fn;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use super::{far_future, now, sleep_until, Sleep};

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

/// A late tick counts as "missed" only beyond this slack, so scheduling
/// jitter does not change the schedule (tokio uses the same 5 ms).
const MISSED_SLACK: Duration = Duration::from_millis(5);

impl MissedTickBehavior {
    fn next(self, scheduled: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => scheduled + period,
            MissedTickBehavior::Delay => now + period,
            MissedTickBehavior::Skip => {
                let late = (now - scheduled).as_nanos();
                let period_ns = period.as_nanos();
                let into_period = Duration::from_nanos((late % period_ns) as u64);
                now + period - into_period
            }
        }
    }
}

/// Ticks every `period`, the first tick at once.
///
/// # Panics
/// If `period` is zero.
pub fn interval(period: Duration) -> Interval {
    interval_at(now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
/// If `period` is zero.
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
        let next = if now > scheduled + MISSED_SLACK {
            self.missed.next(scheduled, now, self.period)
        } else {
            scheduled + self.period
        };
        let next = if next < scheduled { far_future() } else { next };
        self.delay.reset_unpinned(next);
        Poll::Ready(scheduled)
    }

    /// Restarts the schedule: the next tick is one period from now.
    pub fn reset(&mut self) {
        self.delay.reset_unpinned(now() + self.period);
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

//! Timers: [`sleep`], [`sleep_until`], [`timeout`] and [`interval`].
//!
//! A timer registers, on its first poll, with the timer set of the P that
//! polls it (round-robin outside a worker) and lives there: the P's driver
//! fires it, or an idle M of the node fires it when that P is busy (see the
//! driver's design notes). A timer whose deadline has passed completes at
//! once without registering, but still takes a unit of coop budget. Dropping
//! a timer removes its entry, so churn never grows a P's timer set.
//!
//! After the runtime shuts down a timer can never fire. Shutdown wakes every
//! pending timer's waiter: the runtime's own tasks are dropped; a waiter
//! outside it (a foreign thread in `Handle::block_on` or another executor)
//! polls again and, like a timer first polled after shutdown, panics with
//! [`SHUTDOWN_MESSAGE`] instead of waiting forever (tokio does the same;
//! sockets return an error instead, since their operations return
//! `io::Result`). A task of the runtime polled by one of its M's while
//! shutdown is under way gets `Pending` instead: it is about to be dropped.
//! A timer whose deadline has already passed still completes.

mod interval;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

pub use std::time::Instant;

pub use self::interval::{interval, interval_at, Interval, MissedTickBehavior};
use crate::driver::timers::{TimerKey, TimerState};
use crate::driver::Shared;
use crate::{context, coop};

/// Errors of the time module.
pub mod error {
    use std::fmt;

    /// A [`timeout`](super::timeout) expired before its future completed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Elapsed(pub(super) ());

    impl fmt::Display for Elapsed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("deadline has elapsed")
        }
    }

    impl std::error::Error for Elapsed {}

    impl From<Elapsed> for std::io::Error {
        fn from(e: Elapsed) -> std::io::Error {
            std::io::Error::new(std::io::ErrorKind::TimedOut, e)
        }
    }
}

/// The panic message of a timer polled after its runtime shut down.
pub const SHUTDOWN_MESSAGE: &str = "numa_rt runtime has shut down: a timer (sleep, timeout, \
     interval) polled after its runtime shut down can never fire";

/// Waits until `duration` has elapsed.
///
/// # Panics
/// When polled (with a deadline still ahead) outside a numa_rt runtime, or
/// after the runtime shut down ([`SHUTDOWN_MESSAGE`]).
pub fn sleep(duration: Duration) -> Sleep {
    let now = Instant::now();
    sleep_until(now.checked_add(duration).unwrap_or_else(far_future))
}

/// Waits until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
    }
}

/// About 30 years from now: "never" for deadlines that would overflow.
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86400 * 365 * 30)
}

/// The future returned by [`sleep`] and [`sleep_until`].
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Entry>,
}

/// A registered timer: where it lives and its key there.
struct Entry {
    shared: Arc<Shared>,
    p: usize,
    key: TimerKey,
}

impl Sleep {
    /// The instant the sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Moves the deadline (the sleep becomes pending again if it is later).
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.get_mut().reset_unpinned(deadline);
    }

    pub(crate) fn reset_unpinned(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let Some(e) = self.entry.take() {
            e.shared.ps[e.p].timers.remove(e.key);
        }
    }

    /// Polls the deadline; `use_budget` is false when a [`Timeout`] polls its
    /// delay after the inner future spent the budget.
    pub(crate) fn poll_deadline(&mut self, cx: &mut Context<'_>, use_budget: bool) -> Poll<()> {
        if use_budget {
            ready!(coop::poll_proceed(cx));
        }
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        match &self.entry {
            Some(e) => match e.shared.ps[e.p].timers.poll(e.key, cx.waker()) {
                TimerState::Pending => Poll::Pending,
                TimerState::Shutdown => {
                    let e = self.entry.take().expect("matched Some");
                    shut_down(&e.shared)
                }
                TimerState::Fired => {
                    self.entry = None;
                    Poll::Ready(())
                }
            },
            None => {
                let (shared, p) = context::with_current(|r| (r.shared.clone(), r.pick_p()));
                match shared.ps[p]
                    .timers
                    .insert(self.deadline, cx.waker().clone())
                {
                    Some(key) => {
                        self.entry = Some(Entry { shared, p, key });
                        Poll::Pending
                    }
                    None => shut_down(&shared),
                }
            }
        }
    }
}

/// A timer of a runtime that has shut down: it can never fire, and waiting
/// for it would hang the caller, so it panics — except in a task of that
/// runtime, polled by one of its own M's while shutdown is under way: that
/// task is about to be dropped, and `Pending` lets it go quietly.
#[cold]
#[track_caller]
fn shut_down(shared: &Arc<Shared>) -> Poll<()> {
    let own_worker = context::current_p().is_some()
        && context::try_current().is_some_and(|r| Arc::ptr_eq(&r.shared, shared));
    if own_worker {
        return Poll::Pending;
    }
    panic!("{SHUTDOWN_MESSAGE}")
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_deadline(cx, true)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("registered", &self.entry.is_some())
            .finish()
    }
}

/// Runs `future` for at most `duration`: `Err(Elapsed)` if it did not finish.
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        delay: sleep(duration),
    }
}

/// Runs `future` until `deadline` at most.
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        delay: sleep_until(deadline),
    }
}

/// The future returned by [`timeout`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    delay: Sleep,
}

impl<F> Timeout<F> {
    /// The wrapped future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// Unwraps the future.
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, error::Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of a
        // pinned `Timeout` (no method hands it out by value while pinned, and
        // `Timeout` has no Drop impl that could move it). `delay` is `Unpin`
        // and treated as unpinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.future` stays where it is.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        let had_budget = coop::has_budget_remaining();
        if let Poll::Ready(v) = future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        // If the inner future spent the budget, still check the deadline:
        // otherwise an always-ready inner loop could never time out.
        let use_budget = had_budget && coop::has_budget_remaining();
        match this.delay.poll_deadline(cx, use_budget) {
            Poll::Ready(()) => Poll::Ready(Err(error::Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

//! Timers: [`sleep`], [`sleep_until`], [`timeout`] and [`interval`](interval()).
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
//!
//! # Paused time (tests)
//!
//! [`pause`] freezes the runtime's clock (one clock per runtime, read by
//! every P's timers), [`advance`] moves it by hand and [`resume`] lets it
//! run again from where it stands; `#[numa_rt::test(start_paused = true)]`
//! (or `Builder::start_paused`) starts a runtime paused. While the clock is
//! paused and every task of the runtime is idle (every P idle with empty
//! queues, every `block_on` parked, no blocking-pool work), the runtime
//! *auto-advances*: the clock jumps to the earliest pending deadline of all
//! P's and those timers fire, so a test that sleeps an hour finishes at
//! once. The semantics follow tokio's `test-util`, except that pausing is
//! allowed on the multi-threaded runtime (every numa_rt runtime is one;
//! tokio requires `current_thread`): auto-advance waits until *all* of its
//! P's are idle, so a test with `max_procs = 4` is as deterministic as the
//! tasks' own ordering allows.
//!
//! Deadlines are [`Instant`]s, whose [`Instant::now`] reads the runtime's
//! clock, paused or not (tokio's `time::Instant`; [`now`] is the same
//! call). [`Instant::from_std`] and [`Instant::into_std`] convert for APIs
//! that take std's type; `std::time::Instant::now()` reads the real clock
//! even while time is paused. When time is not paused, reading the clock
//! costs one Relaxed load more than std's `Instant::now()`.
//!
//! The top crate's `numa_rt::time` docs have an example; `tests/time_paused.rs`
//! has more.

mod instant;
mod interval;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
pub use std::time::Duration;

pub use self::instant::Instant;
pub use self::interval::{interval, interval_at, Interval, MissedTickBehavior};
use crate::driver::timers::{TimerKey, TimerState, Timers};
use crate::{clock, context, coop};

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

/// The runtime's now: [`Instant::now`] (std's now unless the runtime's
/// clock is paused, or was: after [`resume`] it runs on from where it
/// stood). Outside a runtime, std's now.
#[inline]
pub fn now() -> Instant {
    Instant::now()
}

/// The runtime's now as std's type: std's unless some runtime of this
/// process paused its clock; then the clock of the runtime this thread is
/// in (std's outside any runtime).
#[inline]
pub(crate) fn std_now() -> std::time::Instant {
    if clock::all_real() {
        return std::time::Instant::now();
    }
    paused_now()
}

#[cold]
fn paused_now() -> std::time::Instant {
    match context::try_current() {
        Some(r) => r.shared.clock.now(),
        None => std::time::Instant::now(),
    }
}

/// Pauses the current runtime's clock (tokio's `time::pause`): from now on
/// it moves only by [`advance`] or, while every task of the runtime is idle,
/// by auto-advance to the earliest pending timer (see the module docs).
///
/// Unlike tokio, which requires a `current_thread` runtime, this works on
/// every numa_rt runtime: auto-advance waits until all of its P's are idle.
///
/// # Panics
/// Outside a numa_rt runtime, or if the clock is already paused.
#[track_caller]
pub fn pause() {
    current_reactor("pause").pause_clock();
}

/// Lets the current runtime's clock run again, from where it stands (it
/// never goes back): pending timers fire when real time reaches them.
///
/// # Panics
/// Outside a numa_rt runtime, or if the clock is not paused.
#[track_caller]
pub fn resume() {
    current_reactor("resume").resume_clock();
}

/// Moves the current runtime's paused clock forward by `duration`, wakes
/// every timer of every P now due (in deadline order), then yields once so
/// the woken tasks get to run (tokio's `time::advance`).
///
/// # Panics
/// Outside a numa_rt runtime, or if the clock is not paused.
pub async fn advance(duration: Duration) {
    current_reactor("advance").advance_clock(duration);
    YieldOnce { yielded: false }.await
}

#[track_caller]
fn current_reactor(what: &str) -> crate::Reactor {
    context::try_current().unwrap_or_else(|| {
        panic!(
            "numa_rt::time::{what}() must be called from the context of a numa_rt runtime \
             (a task, block_on, or inside Handle::enter)"
        )
    })
}

/// Returns `Pending` once, waking itself: the task goes to the back of the
/// queue behind the tasks [`advance`] just woke.
struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
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
        polled: false,
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
    /// Whether the sleep was polled (or reset) yet: as in tokio, a sleep
    /// reports itself elapsed only once it has been, so a fresh
    /// `sleep(Duration::ZERO)` is not elapsed before its first poll.
    polled: bool,
}

/// A registered timer: the timers of the P it lives on, and its key there.
struct Entry {
    timers: Arc<Timers>,
    key: TimerKey,
}

impl Sleep {
    /// The instant the sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the sleep has elapsed: it has been polled (or reset) and its
    /// deadline has passed. As in tokio, a sleep that was never polled is
    /// not elapsed, even `sleep(Duration::ZERO)`.
    pub fn is_elapsed(&self) -> bool {
        self.polled && self.now() >= self.deadline
    }

    /// The now of the runtime this sleep is registered with (of the
    /// current one before it registers).
    fn now(&self) -> Instant {
        match &self.entry {
            Some(e) => Instant::from_std(e.timers.clock().now()),
            None => Instant::now(),
        }
    }

    /// Moves the deadline (the sleep becomes pending again if it is later).
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.get_mut().reset_unpinned(deadline);
    }

    /// Moves the deadline. A registered timer is moved in place, keeping
    /// its waker (one lock, no new entry); one that already fired
    /// registers again at the next poll, and one moved to a deadline that
    /// has passed is cancelled (the next poll completes).
    pub(crate) fn reset_unpinned(&mut self, deadline: Instant) {
        self.deadline = deadline;
        // tokio registers a sleep when it is reset.
        self.polled = true;
        let Some(e) = &self.entry else { return };
        let d = deadline.into_std();
        if d <= e.timers.clock().now() || !e.timers.reset(e.key, d) {
            self.cancel();
        }
    }

    fn cancel(&mut self) {
        if let Some(e) = self.entry.take() {
            e.timers.remove(e.key);
        }
    }

    /// Polls the deadline; `use_budget` is false when a [`Timeout`] polls its
    /// delay after the inner future spent the budget.
    pub(crate) fn poll_deadline(&mut self, cx: &mut Context<'_>, use_budget: bool) -> Poll<()> {
        if use_budget {
            ready!(coop::poll_proceed(cx));
        }
        self.polled = true;
        let now = self.now();
        if now >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        match &self.entry {
            Some(e) => match e.timers.poll(e.key, cx.waker()) {
                TimerState::Pending => Poll::Pending,
                TimerState::Shutdown => {
                    let e = self.entry.take().expect("matched Some");
                    shut_down(&e.timers)
                }
                TimerState::Fired => {
                    self.entry = None;
                    Poll::Ready(())
                }
            },
            None => {
                // The timers of this thread's P (no clone of the reactor:
                // one reference count of that P's timers).
                let timers = context::with_current(|r| r.shared.ps[r.pick_p()].timers.clone());
                match timers.insert(self.deadline.into_std(), cx.waker().clone()) {
                    Some(key) => {
                        self.entry = Some(Entry { timers, key });
                        Poll::Pending
                    }
                    None => shut_down(&timers),
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
fn shut_down(timers: &Arc<Timers>) -> Poll<()> {
    let own_worker = context::current_p().is_some()
        && context::try_current()
            .is_some_and(|r| r.shared.ps.iter().any(|p| Arc::ptr_eq(&p.timers, timers)));
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

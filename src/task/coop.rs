//! tokio's `task::coop`: the cooperative budget, for resources and
//! futures written outside numa_rt.
//!
//! Each task poll gets a budget of 128 operations; numa_rt's sockets,
//! timers and `io::{empty, repeat, sink}` spend one unit per operation and
//! make the task yield once it is gone. A future of your own takes part
//! with [`poll_proceed`] (or wraps another in [`cooperative`]).
//!
//! `numa_rt::sync` is tokio's code, which spends tokio's budget; only
//! tokio's scheduler can grant that one, so its channels do not make a
//! numa_rt task yield. Wrap a receive loop in [`cooperative`] where that
//! matters.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pub use numa_rt_reactor::coop::{
    consume_budget, has_budget_remaining, unconstrained, Unconstrained,
};

/// Takes one unit of the current task's budget, or wakes the task and
/// returns `Pending` when none is left. The unit goes back when the guard
/// drops, unless [`RestoreOnPending::made_progress`] says the operation
/// did something (tokio's contract).
///
/// ```
/// use numa_rt::task::coop;
/// use std::task::Poll;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// // A future that is always ready still takes turns with its processor.
/// let mut left = 1_000;
/// std::future::poll_fn(|cx| {
///     while left > 0 {
///         let guard = std::task::ready!(coop::poll_proceed(cx));
///         left -= 1;
///         guard.made_progress();
///     }
///     Poll::Ready(())
/// })
/// .await;
/// # }
/// ```
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<RestoreOnPending> {
    ready!(numa_rt_reactor::coop::poll_proceed(cx));
    Poll::Ready(RestoreOnPending { progress: false })
}

/// The unit of budget [`poll_proceed`] took, given back on drop unless
/// [`RestoreOnPending::made_progress`] was called.
#[derive(Debug)]
#[must_use = "the unit of budget goes back when this drops"]
pub struct RestoreOnPending {
    progress: bool,
}

impl RestoreOnPending {
    /// The operation did something: keep the unit spent.
    pub fn made_progress(mut self) {
        self.progress = true;
    }
}

impl Drop for RestoreOnPending {
    fn drop(&mut self) {
        if !self.progress {
            numa_rt_reactor::coop::refund();
        }
    }
}

/// Makes `future` spend the task's budget: each poll takes a unit first
/// (yielding when none is left), kept only when the future completes.
pub fn cooperative<F: Future>(future: F) -> Coop<F> {
    Coop { future }
}

/// The future [`cooperative`] returns.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Coop<F> {
    future: F,
}

impl<F: Future> Future for Coop<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let coop = ready!(poll_proceed(cx));
        // SAFETY: `future` is structurally pinned: never moved out of
        // `self`, and `Coop` has no `Drop` impl that could move it.
        let future = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        let out = ready!(future.poll(cx));
        coop.made_progress();
        Poll::Ready(out)
    }
}

//! The cooperative budget: how many operations a task may do in one poll.
//!
//! A task that loops over always-ready resources would otherwise never return
//! `Pending` and starve its processor. Every numa_rt resource calls
//! [`poll_proceed`] before doing work; once the budget of a poll is spent it
//! returns `Pending` after waking the task, so the task goes to the back of the
//! run queue. The executor wraps each task poll in [`budget`]. The figure is
//! tokio's (128), which was tuned on real servers.

use std::cell::Cell;
use std::task::{Context, Poll};

/// Operations a task may perform per poll before it is made to yield.
pub const BUDGET: u8 = 128;

thread_local! {
    /// `None` outside a task poll: resources used from plain `block_on`
    /// futures or foreign executors are never throttled.
    static CURRENT: Cell<Option<u8>> = const { Cell::new(None) };
    /// Set when `poll_proceed` turned a task away for want of budget during
    /// the current poll (read by `budget_counting`).
    static FORCED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (one task poll) with a fresh budget, restoring the previous one after.
///
/// Also clears the "just accepted a connection" flag (see
/// [`crate::context::take_accepted`]), which only describes the current poll.
#[inline]
pub fn budget<R>(f: impl FnOnce() -> R) -> R {
    budget_counting(f).0
}

/// [`budget`], also saying whether the budget ran out and forced the task to
/// yield during `f` (the executor counts these per processor).
#[inline]
pub fn budget_counting<R>(f: impl FnOnce() -> R) -> (R, bool) {
    struct Reset(Option<u8>);
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(CURRENT.with(|c| c.replace(Some(BUDGET))));
    crate::current::clear_accepted();
    let r = f();
    (r, FORCED.with(|c| c.replace(false)))
}

/// Takes one unit of budget, or wakes the task and returns `Pending` when none is left.
#[inline]
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    CURRENT.with(|c| match c.get() {
        None => Poll::Ready(()),
        Some(0) => {
            FORCED.with(|f| f.set(true));
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Some(n) => {
            c.set(Some(n - 1));
            Poll::Ready(())
        }
    })
}

/// Whether the current poll has budget left (always true outside a task poll).
pub fn has_budget_remaining() -> bool {
    CURRENT.with(|c| c.get() != Some(0))
}

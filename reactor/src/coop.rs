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

/// Operations a task may perform per poll before it is made to yield
/// (see `tuning.rs`).
pub const BUDGET: u8 = crate::tuning::BUDGET;

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

/// Gives back the unit the last [`poll_proceed`] took: the operation it was
/// taken for made no progress (tokio's `RestoreOnPending`). Does nothing
/// outside a task poll or inside [`unconstrained`].
pub fn refund() {
    CURRENT.with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n.saturating_add(1).min(BUDGET)));
        }
    });
}

/// Whether the current poll has budget left (always true outside a task poll).
pub fn has_budget_remaining() -> bool {
    CURRENT.with(|c| c.get() != Some(0))
}

/// Takes one unit of the current task's budget and, when none is left,
/// yields once so the processor runs other tasks (tokio's
/// `task::consume_budget`). For loops of CPU work that touch no numa_rt
/// resource but should still take turns with the rest of their processor.
///
/// Outside a task poll (plain `block_on`, a foreign executor, inside
/// [`unconstrained`]) it never yields.
pub async fn consume_budget() {
    std::future::poll_fn(poll_proceed).await
}

/// Runs `future` with no cooperative budget: numa_rt's resources never make
/// it yield for want of budget (tokio's `task::unconstrained`). The task's
/// own budget is what it was once the inner poll returns.
///
/// A future that loops over always-ready resources inside this wrapper never
/// gives its processor back: use it for short bursts that must not be cut.
pub fn unconstrained<F: std::future::Future>(future: F) -> Unconstrained<F> {
    Unconstrained { future }
}

/// The future [`unconstrained`] returns.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Unconstrained<F> {
    future: F,
}

impl<F: std::future::Future> std::future::Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        struct Restore(Option<u8>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // `self` (no method hands it out by value or by `&mut`), and
        // `Unconstrained` has no `Drop` impl that could move it.
        let future = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        // `None` is "outside a task poll": poll_proceed always proceeds. The
        // guard puts the task's remaining budget back, even on a panic.
        let _restore = Restore(CURRENT.with(|c| c.replace(None)));
        future.poll(cx)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::Waker;

    fn spend_all() {
        let mut cx = Context::from_waker(Waker::noop());
        while has_budget_remaining() {
            assert!(poll_proceed(&mut cx).is_ready());
        }
    }

    #[test]
    fn consume_budget_yields_only_once_the_budget_is_spent() {
        let mut cx = Context::from_waker(Waker::noop());
        budget(|| {
            let mut first = pin!(consume_budget());
            assert!(first.as_mut().poll(&mut cx).is_ready());
            spend_all();
            let mut second = pin!(consume_budget());
            assert!(second.as_mut().poll(&mut cx).is_pending());
        });
        // Outside a task poll it never yields.
        let mut outside = pin!(consume_budget());
        assert!(outside.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn unconstrained_lifts_the_budget_and_puts_it_back() {
        let mut cx = Context::from_waker(Waker::noop());
        budget(|| {
            spend_all();
            assert!(!has_budget_remaining());
            let mut inner = pin!(unconstrained(std::future::poll_fn(|cx| {
                for _ in 0..1000 {
                    assert!(poll_proceed(cx).is_ready());
                }
                Poll::Ready(())
            })));
            assert!(inner.as_mut().poll(&mut cx).is_ready());
            // The task's own (spent) budget is back.
            assert!(!has_budget_remaining());
        });
    }
}

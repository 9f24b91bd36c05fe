//! Helpers shared by the network tests (`mod support;` in each).
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Fails a test (instead of hanging it) if a lost wake-up stalls it.
pub const GUARD: Duration = Duration::from_secs(60);

/// Wraps a future and calls `on_pending` the first time it returns `Pending`:
/// "the task is now waiting", without sleeping to find out.
pub struct NotifyPending<F, N: FnOnce()> {
    pub fut: Pin<Box<F>>,
    pub on_pending: Option<N>,
}

impl<F: Future, N: FnOnce() + Unpin> Future for NotifyPending<F, N> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let r = self.fut.as_mut().poll(cx);
        if r.is_pending() {
            if let Some(n) = self.on_pending.take() {
                n();
            }
        }
        r
    }
}

/// `fut`, calling `on_pending` at its first `Pending`.
pub fn notify_pending<F: Future, N: FnOnce() + Unpin>(
    fut: F,
    on_pending: N,
) -> NotifyPending<F, N> {
    NotifyPending {
        fut: Box::pin(fut),
        on_pending: Some(on_pending),
    }
}

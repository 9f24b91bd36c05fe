//! `yield_now`: go to the back of the run queue (Go's Gosched).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields to the scheduler: the task goes to the back of its processor's run
/// queue (never to `runnext`), so every other runnable task there runs first.
pub async fn yield_now() {
    YieldNow { yielded: false }.await
}

struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // Waking ourselves while running: async-task reports it to the
        // schedule function as `woken_while_running`, which queues the task
        // at the tail instead of `runnext`.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

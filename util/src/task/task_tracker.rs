//! [`TaskTracker`]: waits for a group of tasks to exit (graceful shutdown).

use numa_rt::runtime::Handle;
use numa_rt::task::{JoinHandle, LocalSet};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Counts the tasks of a group and says when the group is done: closed
/// (no more are expected) and empty (every tracked task has exited).
///
/// The usual graceful shutdown: spawn every connection's task through the
/// tracker, and on shutdown [`close`](Self::close) it, tell the tasks to
/// stop (a [`CancellationToken`](crate::sync::CancellationToken)), and
/// [`wait`](Self::wait). Unlike a `JoinSet`, a tracker keeps no task's
/// output, so tasks that exit free their memory at once, and it does not
/// abort anything when dropped.
///
/// A task counts as exited when its future is dropped: after it completes,
/// is aborted, or when its runtime shuts down. Closing is not final:
/// [`reopen`](Self::reopen) undoes it, and tasks can be spawned on a closed
/// tracker (they count like any other).
///
/// ```
/// use numa_rt::time::{sleep, Duration};
/// use numa_rt_util::task::TaskTracker;
///
/// #[numa_rt::main(max_procs = 2, start_paused = true)]
/// async fn main() {
///     let tracker = TaskTracker::new();
///     for i in 0..10u64 {
///         tracker.spawn(async move { sleep(Duration::from_millis(10 * i)).await });
///     }
///     tracker.close();
///     tracker.wait().await; // every task has exited
///     assert!(tracker.is_empty());
/// }
/// ```
pub struct TaskTracker {
    inner: Arc<Inner>,
}

struct Inner {
    /// Bit 0: closed. The rest: the number of live tokens, times two.
    state: AtomicUsize,
    /// Woken (`notify_waiters`) at each moment the tracker becomes closed
    /// and empty.
    on_done: Notify,
}

const CLOSED: usize = 1;
const ONE_TASK: usize = 2;

impl Inner {
    fn is_closed_and_empty(&self) -> bool {
        // Acquire pairs with the AcqRel updates below: a waiter that sees
        // the tracker done sees everything the exited tasks did.
        self.state.load(Ordering::Acquire) == CLOSED
    }

    fn add_task(&self) {
        // Relaxed: a new token needs no ordering (it only delays `done`).
        let prev = self.state.fetch_add(ONE_TASK, Ordering::Relaxed);
        assert!(prev <= usize::MAX - ONE_TASK, "TaskTracker: too many tasks");
    }

    fn drop_task(&self) {
        // AcqRel: Release publishes the task's work to whoever sees the
        // tracker done (their Acquire load); Acquire orders this against
        // earlier exits, so the one that empties the tracker notifies.
        let prev = self.state.fetch_sub(ONE_TASK, Ordering::AcqRel);
        if prev == ONE_TASK | CLOSED {
            self.on_done.notify_waiters();
        }
    }

    /// Sets the closed bit; `true` if it was clear.
    fn close(&self) -> bool {
        // AcqRel: pairs with `drop_task` and the waiters' Acquire loads.
        let prev = self.state.fetch_or(CLOSED, Ordering::AcqRel);
        if prev == 0 {
            self.on_done.notify_waiters();
        }
        prev & CLOSED == 0
    }

    /// Clears the closed bit; `true` if it was set.
    fn reopen(&self) -> bool {
        // AcqRel: as in `close`.
        self.state.fetch_and(!CLOSED, Ordering::AcqRel) & CLOSED != 0
    }
}

impl TaskTracker {
    /// A new tracker: open and empty.
    #[must_use]
    pub fn new() -> Self {
        TaskTracker {
            inner: Arc::new(Inner {
                state: AtomicUsize::new(0),
                on_done: Notify::new(),
            }),
        }
    }

    /// Waits until the tracker is closed and empty.
    ///
    /// Ready at once if it is both when `wait` is called. Otherwise the
    /// future completes at the first moment after this call at which it is
    /// both — even if a later `reopen` or spawn undid that before the
    /// future was polled.
    pub fn wait(&self) -> TaskTrackerWaitFuture<'_> {
        TaskTrackerWaitFuture {
            notified: self.inner.on_done.notified(),
            inner: if self.inner.is_closed_and_empty() {
                None
            } else {
                Some(&self.inner)
            },
        }
    }

    /// Closes the tracker (waiters complete once it is also empty); `true`
    /// if it was open.
    pub fn close(&self) -> bool {
        self.inner.close()
    }

    /// Opens the tracker again; `true` if it was closed.
    pub fn reopen(&self) -> bool {
        self.inner.reopen()
    }

    /// Whether the tracker is closed.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) & CLOSED != 0
    }

    /// The number of tracked tasks (live tokens) now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.state.load(Ordering::Acquire) / ONE_TASK
    }

    /// Whether no task is tracked now.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Spawns `task` on the current runtime ([`numa_rt::spawn`]) and tracks it.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        numa_rt::spawn(self.track_future(task))
    }

    /// Spawns `task` on `handle`'s runtime and tracks it.
    #[track_caller]
    pub fn spawn_on<F>(&self, task: F, handle: &Handle) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        handle.spawn(self.track_future(task))
    }

    /// Spawns a `!Send` `task` pinned to this thread
    /// ([`numa_rt::spawn_local`]) and tracks it.
    ///
    /// Unlike tokio (where this needs a `LocalSet` or a local runtime),
    /// numa_rt pins the task to the calling M on any runtime.
    ///
    /// # Panics
    /// On a thread that is neither a worker nor inside `block_on` (nor in
    /// an entered or running [`LocalSet`]).
    #[track_caller]
    pub fn spawn_local<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        numa_rt::spawn_local(self.track_future(task))
    }

    /// Spawns a `!Send` `task` onto `local_set` and tracks it.
    #[track_caller]
    pub fn spawn_local_on<F>(&self, task: F, local_set: &LocalSet) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        local_set.spawn_local(self.track_future(task))
    }

    /// Runs `task` on the current runtime's blocking pool
    /// ([`numa_rt::spawn_blocking`]) and tracks it until it returns.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn_blocking<F, T>(&self, task: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let token = self.token();
        numa_rt::spawn_blocking(move || {
            let out = task();
            drop(token);
            out
        })
    }

    /// Runs `task` on `handle`'s blocking pool and tracks it.
    #[track_caller]
    pub fn spawn_blocking_on<F, T>(&self, task: F, handle: &Handle) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let token = self.token();
        handle.spawn_blocking(move || {
            let out = task();
            drop(token);
            out
        })
    }

    /// Tracks `future` until it is dropped (not merely until it completes),
    /// for futures run some other way than the `spawn` methods.
    ///
    /// ```
    /// use numa_rt_util::task::TaskTracker;
    ///
    /// # #[numa_rt::main(max_procs = 1)]
    /// # async fn main() {
    /// let tracker = TaskTracker::new();
    /// let fut = tracker.track_future(async { 1 });
    /// assert_eq!(tracker.len(), 1);
    /// assert_eq!(fut.await, 1); // awaiting consumes (drops) it
    /// assert!(tracker.is_empty());
    /// # }
    /// ```
    pub fn track_future<F: Future>(&self, future: F) -> TrackedFuture<F> {
        TrackedFuture {
            future,
            token: self.token(),
        }
    }

    /// A token that counts as one tracked task until it is dropped.
    pub fn token(&self) -> TaskTrackerToken {
        self.inner.add_task();
        TaskTrackerToken {
            task_tracker: self.clone(),
        }
    }

    /// Whether two trackers are the same one (clones of each other).
    #[must_use]
    pub fn ptr_eq(left: &TaskTracker, right: &TaskTracker) -> bool {
        Arc::ptr_eq(&left.inner, &right.inner)
    }
}

impl Default for TaskTracker {
    fn default() -> Self {
        TaskTracker::new()
    }
}

impl Clone for TaskTracker {
    /// Another handle to the same tracker.
    fn clone(&self) -> Self {
        TaskTracker {
            inner: self.inner.clone(),
        }
    }
}

impl fmt::Debug for TaskTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.load(Ordering::Acquire);
        f.debug_struct("TaskTracker")
            .field("len", &(state / ONE_TASK))
            .field("is_closed", &(state & CLOSED != 0))
            .finish()
    }
}

/// One tracked task, counted by its [`TaskTracker`] until dropped.
pub struct TaskTrackerToken {
    task_tracker: TaskTracker,
}

impl TaskTrackerToken {
    /// The tracker this token counts in.
    #[must_use]
    pub fn task_tracker(&self) -> &TaskTracker {
        &self.task_tracker
    }
}

impl Clone for TaskTrackerToken {
    /// Another token of the same tracker (one more task).
    fn clone(&self) -> Self {
        self.task_tracker.token()
    }
}

impl Drop for TaskTrackerToken {
    fn drop(&mut self) {
        self.task_tracker.inner.drop_task();
    }
}

impl fmt::Debug for TaskTrackerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskTrackerToken")
            .field("task_tracker", &self.task_tracker)
            .finish()
    }
}

pin_project! {
    /// A future tracked by a [`TaskTracker`] until it is dropped
    /// ([`TaskTracker::track_future`]).
    #[must_use = "futures do nothing unless polled"]
    pub struct TrackedFuture<F> {
        #[pin]
        future: F,
        token: TaskTrackerToken,
    }
}

impl<F: Future> Future for TrackedFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().future.poll(cx)
    }
}

impl<F: fmt::Debug> fmt::Debug for TrackedFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedFuture")
            .field("future", &self.future)
            .field("task_tracker", self.token.task_tracker())
            .finish()
    }
}

pin_project! {
    /// The future of [`TaskTracker::wait`].
    #[must_use = "futures do nothing unless polled"]
    pub struct TaskTrackerWaitFuture<'a> {
        #[pin]
        notified: Notified<'a>,
        // `None` once done.
        inner: Option<&'a Inner>,
    }
}

impl Future for TaskTrackerWaitFuture<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        let Some(inner) = *this.inner else {
            return Poll::Ready(());
        };
        // The notification counts from the `wait` call (tokio's `Notified`
        // sees a `notify_waiters` made after it was created, polled or not).
        if inner.is_closed_and_empty() || this.notified.poll(cx).is_ready() {
            *this.inner = None;
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl fmt::Debug for TaskTrackerWaitFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskTrackerWaitFuture")
            .field("done", &self.inner.is_none())
            .finish()
    }
}

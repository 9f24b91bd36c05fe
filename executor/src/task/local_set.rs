//! `LocalSet`: tokio's set of `!Send` tasks, on numa_rt's pinned queues.
//!
//! A set is one more `LocalQueue` (`crate::scheduler::local`),
//! the kind every M and every `block_on` already has. While the set is
//! being driven (`run_until`, `block_on`, the set awaited, or inside
//! `enter`), it is this thread's pinned queue: [`spawn_local`] puts tasks
//! there, and their wakers push them back there and wake whoever drives
//! the set. Its tasks run only while it is driven, on the driving thread,
//! as tokio's do; a task of a set is never stolen.
//!
//! Outside a set, numa_rt's `spawn_local` pins to the current M or
//! `block_on` thread (tokio would panic there): a set is needed only to run
//! `!Send` tasks at chosen times, or on a thread that is neither.
//!
//! [`spawn_local`]: crate::spawn_local

use crate::scheduler::context;
use crate::scheduler::local::{self, LocalQueue};
use crate::task::JoinHandle;
use crate::Runtime;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The most tasks of the set one turn runs before the driving future gets
/// its turn again (and, in a task, before the set yields to its P). tokio's
/// figure, the same turn as a P's global queue gets (`config::DEFAULT_TURN`):
/// a set with many ready tasks must not starve the future that `run_until`
/// waits for.
const TASKS_PER_TURN: usize = crate::config::DEFAULT_TURN as usize;

/// A set of `!Send` tasks that run on the thread that drives the set
/// (tokio's `task::LocalSet`).
///
/// Tasks go in with [`LocalSet::spawn_local`], or with
/// [`spawn_local`](crate::spawn_local) while the set is driven. They run
/// while the set is driven by [`LocalSet::run_until`],
/// [`LocalSet::block_on`] or by awaiting the set itself; dropping the set
/// drops every task it still holds, on its thread.
///
/// ```
/// use std::rc::Rc;
/// use numa_rt_executor::task::LocalSet;
///
/// let rt = numa_rt_executor::Runtime::new().unwrap();
/// let set = LocalSet::new();
/// let shared = Rc::new(20); // !Send
/// let out = set.block_on(&rt, async move {
///     let s = shared.clone();
///     let one = numa_rt_executor::spawn_local(async move { *s + 1 });
///     let two = numa_rt_executor::spawn_local(async move { *shared + 1 });
///     one.await.unwrap() + two.await.unwrap()
/// });
/// assert_eq!(out, 42);
/// ```
pub struct LocalSet {
    queue: Arc<LocalQueue>,
    /// Its tasks are `!Send` and belong to this thread.
    _not_send: PhantomData<*const ()>,
}

impl LocalSet {
    /// An empty set, owned by the current thread.
    pub fn new() -> LocalSet {
        LocalSet {
            queue: LocalQueue::for_set(),
            _not_send: PhantomData,
        }
    }

    /// Spawns a `!Send` task onto the set; it runs the next time the set is
    /// driven. May be called outside any runtime.
    #[track_caller]
    pub fn spawn_local<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        local::spawn_local(&self.queue, future)
    }

    /// Makes the set this thread's pinned queue until the guard drops:
    /// [`spawn_local`](crate::spawn_local) spawns onto it.
    pub fn enter(&self) -> LocalEnterGuard {
        LocalEnterGuard {
            _guard: context::set_local_queue(self.queue.clone()),
        }
    }

    /// Runs `future` to completion on the current thread with `rt` entered,
    /// driving the set's tasks meanwhile (tokio's `LocalSet::block_on`).
    ///
    /// # Panics
    /// As [`Runtime::block_on`]: on a runtime worker, or inside another
    /// `block_on`.
    #[track_caller]
    pub fn block_on<F: Future>(&self, rt: &Runtime, future: F) -> F::Output {
        rt.block_on(self.run_until(future))
    }

    /// Drives the set's tasks until `future` completes, and returns its
    /// output. Tasks still pending then stay in the set.
    pub fn run_until<F: Future>(&self, future: F) -> RunUntil<'_, F> {
        RunUntil { set: self, future }
    }

    /// The set's queue (for `LocalRuntime::enter`).
    pub(crate) fn queue(&self) -> &Arc<LocalQueue> {
        &self.queue
    }

    /// Runs up to `TASKS_PER_TURN` queued tasks, with the set as this
    /// thread's pinned queue. True when tasks were left queued.
    fn turn(&self, cx: &Context<'_>) -> bool {
        // Before the queue is read: a push after the read wakes this waker.
        self.queue.set_driver(cx.waker());
        let _set = context::set_local_queue(self.queue.clone());
        for _ in 0..TASKS_PER_TURN {
            match self.queue.pop() {
                Some(task) => {
                    task.metadata()
                        .note_polled(crate::task::epoch_ms(std::time::Instant::now()));
                    numa_rt_reactor::coop::budget(|| task.run());
                }
                None => return false,
            }
        }
        !self.queue.is_empty()
    }
}

impl Default for LocalSet {
    fn default() -> LocalSet {
        LocalSet::new()
    }
}

impl fmt::Debug for LocalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSet")
            .field("tasks", &self.queue.tasks.len())
            .field("queued", &self.queue.len())
            .finish()
    }
}

/// Awaiting the set drives its tasks until every one has completed.
impl Future for LocalSet {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.turn(cx) {
            // Tasks left queued: come back after the rest of the runtime
            // has had its turn.
            cx.waker().wake_by_ref();
            Poll::Pending
        } else if self.queue.has_live_tasks() {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

impl Drop for LocalSet {
    fn drop(&mut self) {
        // With the set entered, so that a destructor that spawns a local
        // task finds the (closed) set rather than another queue; not when
        // the set lives in a `thread_local!` being destroyed.
        let _set = context::try_set_local_queue(self.queue.clone());
        self.queue.close_and_drain();
    }
}

/// The future of [`LocalSet::run_until`].
#[must_use = "futures do nothing unless polled"]
pub struct RunUntil<'a, F> {
    set: &'a LocalSet,
    future: F,
}

impl<F: Future> Future for RunUntil<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // `self` (no `Unpin` bound is relied on, no method hands it out
        // unpinned) and is dropped in place with `self`.
        let this = unsafe { self.get_unchecked_mut() };
        let set = this.set;
        {
            let _set = context::set_local_queue(set.queue.clone());
            set.queue.set_driver(cx.waker());
            // SAFETY: see above; `this.future` stays where it is.
            let future = unsafe { Pin::new_unchecked(&mut this.future) };
            if let Poll::Ready(out) = numa_rt_reactor::coop::budget(|| future.poll(cx)) {
                return Poll::Ready(out);
            }
        }
        if set.turn(cx) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl<F> fmt::Debug for RunUntil<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunUntil").finish_non_exhaustive()
    }
}

/// Returned by [`LocalSet::enter`]: the set is this thread's pinned queue
/// until it drops.
#[must_use = "the set is entered only while the guard lives"]
pub struct LocalEnterGuard {
    _guard: context::LocalGuard,
}

impl fmt::Debug for LocalEnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LocalEnterGuard")
    }
}

//! [`JoinQueue`]: tasks joined in the order they were spawned.

use super::AbortOnDropHandle;
use numa_rt::runtime::Handle;
use numa_rt::task::{AbortHandle, Id, JoinError, JoinHandle};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A queue of tasks on numa_rt, whose results come out in the order the
/// tasks were spawned (a `JoinSet` gives them in completion order).
///
/// All tasks return the same type `T`. Dropping the queue aborts the
/// tasks still in it.
///
/// ```
/// use numa_rt::time::{sleep, Duration};
/// use numa_rt_util::task::JoinQueue;
///
/// # #[numa_rt::main(max_procs = 2, start_paused = true)]
/// # async fn main() {
/// let mut queue = JoinQueue::new();
/// for i in 0..5u64 {
///     // Later tasks finish first; they still come out in spawn order.
///     queue.spawn(async move {
///         sleep(Duration::from_millis(50 - 10 * i)).await;
///         i
///     });
/// }
/// let mut order = Vec::new();
/// while let Some(res) = queue.join_next().await {
///     order.push(res.unwrap());
/// }
/// assert_eq!(order, [0, 1, 2, 3, 4]);
/// # }
/// ```
pub struct JoinQueue<T>(VecDeque<AbortOnDropHandle<T>>);

impl<T> JoinQueue<T> {
    /// An empty queue.
    pub const fn new() -> Self {
        JoinQueue(VecDeque::new())
    }

    /// An empty queue with room for `capacity` tasks.
    pub fn with_capacity(capacity: usize) -> Self {
        JoinQueue(VecDeque::with_capacity(capacity))
    }

    /// The number of tasks in the queue (finished ones not yet joined
    /// included).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the queue holds no task.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn push(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        self.0.push_back(AbortOnDropHandle::new(handle));
        abort
    }

    /// Spawns `task` on the current runtime ([`numa_rt::spawn`]) at the
    /// back of the queue.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.push(numa_rt::spawn(task))
    }

    /// Spawns `task` on `handle`'s runtime at the back of the queue.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, task: F, handle: &Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.push(handle.spawn(task))
    }

    /// Spawns a `!Send` `task` pinned to this thread
    /// ([`numa_rt::spawn_local`]) at the back of the queue.
    ///
    /// # Panics
    /// On a thread that is neither a worker nor inside `block_on`.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        self.push(numa_rt::spawn_local(task))
    }

    /// Runs `f` on the current runtime's blocking pool, at the back of the
    /// queue. Aborting does not stop a closure that has started.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.push(numa_rt::spawn_blocking(f))
    }

    /// Runs `f` on `handle`'s blocking pool, at the back of the queue.
    #[track_caller]
    pub fn spawn_blocking_on<F>(&mut self, f: F, handle: &Handle) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.push(handle.spawn_blocking(f))
    }

    /// Waits for the task at the front and returns its result; `None` if
    /// the queue is empty.
    ///
    /// Cancel safe: dropped before it completes, it removes nothing.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// [`join_next`](Self::join_next) with the task's id (a [`JoinError`]
    /// carries its own).
    pub async fn join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// The front task's result if it has finished; `None` if it has not
    /// (or the queue is empty). Never waits.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.try_join_next_with_id()
            .map(|res| res.map(|(_, out)| out))
    }

    /// [`try_join_next`](Self::try_join_next) with the task's id.
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        let front = self.0.front_mut()?;
        if !front.is_finished() {
            return None;
        }
        // Outside the cooperative budget: this call cannot yield, so a spent
        // budget must not hide a finished task.
        let mut unconstrained = numa_rt::task::unconstrained(front);
        let polled = Pin::new(&mut unconstrained).poll(&mut Context::from_waker(Waker::noop()));
        match polled {
            Poll::Ready(res) => Some(self.pop_front_with(res)),
            Poll::Pending => None,
        }
    }

    /// Removes the front handle (finished: no abort) and attaches its id.
    fn pop_front_with(&mut self, res: Result<T, JoinError>) -> Result<(Id, T), JoinError> {
        let handle = self
            .0
            .pop_front()
            .expect("the front was just polled")
            .detach();
        let id = handle.id();
        res.map(|out| (id, out))
    }

    /// Aborts every task and waits for them all to end; the queue is then
    /// empty. Results (panics included) are dropped.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Waits for every task and returns their outputs in spawn order.
    ///
    /// # Panics
    /// If a task panicked (its panic is resumed here) or was cancelled; the
    /// remaining tasks are aborted (the queue is dropped).
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(res) = self.join_next().await {
            match res {
                Ok(v) => out.push(v),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("{e}"),
            }
        }
        out
    }

    /// Aborts every task; they stay in the queue until joined (cancelled,
    /// or with their output if they had finished).
    pub fn abort_all(&mut self) {
        self.0.iter().for_each(AbortOnDropHandle::abort);
    }

    /// Removes every task from the queue without aborting it: they run on
    /// detached.
    pub fn detach_all(&mut self) {
        self.0.drain(..).for_each(|h| drop(h.detach()));
    }

    /// The poll behind [`join_next`](Self::join_next): `Ready(None)` when
    /// the queue is empty, `Pending` while the front task runs (even if
    /// later ones have finished).
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_join_next_with_id(cx)
            .map(|res| res.map(|res| res.map(|(_, out)| out)))
    }

    /// The poll behind [`join_next_with_id`](Self::join_next_with_id).
    pub fn poll_join_next_with_id(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Id, T), JoinError>>> {
        let Some(front) = self.0.front_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(front).poll(cx) {
            Poll::Ready(res) => Poll::Ready(Some(self.pop_front_with(res))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> std::fmt::Debug for JoinQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<T> Default for JoinQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Spawns each future ([`numa_rt::spawn`]) in the iterator's order.
///
/// # Panics
/// Outside a numa_rt runtime.
impl<T, F> FromIterator<F> for JoinQueue<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut queue = JoinQueue::new();
        iter.into_iter().for_each(|task| {
            queue.spawn(task);
        });
        queue
    }
}

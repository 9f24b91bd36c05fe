//! `JoinSet`: a set of tasks whose outputs are taken in completion order.
//!
//! Each entry's `JoinHandle` is polled with a waker of the set's own (an
//! `EntryWaker`). When a task finishes, async-task wakes that waker, which
//! pushes the entry onto the set's ready list (once: a flag says it is
//! already there) and wakes whoever waits in `join_next`. `join_next` pops
//! from that list and polls only those entries: O(1) per completion, never
//! a scan of every handle. A new entry starts on the list, so that its first
//! poll registers the entry waker with async-task.

use super::harness::{contain, drop_payload};
use super::{AbortHandle, Id, JoinError, JoinHandle};
use crate::Handle;
use futures_task::ArcWake;
use numa_rt_numa::NodeId;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::AcqRel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// A set of tasks spawned on the current runtime, awaited in the order they
/// finish (tokio's `JoinSet`).
///
/// Dropping the set aborts every task still in it.
///
/// ```
/// use numa_rt_executor::task::JoinSet;
///
/// let rt = numa_rt_executor::Runtime::new().unwrap();
/// rt.block_on(async {
///     let mut set = JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { i * i });
///     }
///     let mut sum = 0;
///     while let Some(res) = set.join_next().await {
///         sum += res.unwrap();
///     }
///     assert_eq!(sum, 285);
/// });
/// ```
pub struct JoinSet<T> {
    /// A slab: `None` slots are listed in `free`.
    entries: Vec<Option<Entry<T>>>,
    free: Vec<usize>,
    len: usize,
    notify: Arc<Notify>,
}

struct Entry<T> {
    handle: JoinHandle<T>,
    waker: Arc<EntryWaker>,
}

/// Shared by the set and its entries' wakers.
#[derive(Default)]
struct Notify {
    state: Mutex<NotifyState>,
}

#[derive(Default)]
struct NotifyState {
    /// Entries to poll: woken since their last poll, or never polled. An
    /// entry removed meanwhile is skipped (its waker is no longer the slot's).
    ready: VecDeque<Arc<EntryWaker>>,
    /// Whoever waits in `join_next` (taken when woken).
    waiter: Option<Waker>,
    /// Set when the set is dropped: wakers still registered with tasks stop
    /// queueing (nothing would ever pop them, and they would keep `Notify`
    /// alive through a cycle).
    closed: bool,
}

impl Notify {
    fn lock(&self) -> MutexGuard<'_, NotifyState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        let waiter = self
            .state
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .waiter
            .take();
        // Possibly dropped by async-task (the last entry waker), where a
        // panic of the waiter's destructor would abort the process.
        if let Some(w) = waiter {
            if let Err(p) = contain(move || drop(w)) {
                drop_payload(p);
            }
        }
    }
}

/// The waker a `JoinSet` entry's handle is polled with.
struct EntryWaker {
    notify: Arc<Notify>,
    index: usize,
    /// Whether the entry is on the ready list. AcqRel on both sides (the
    /// wake's swap to true, the set's swap to false before polling): if the
    /// wake comes first, the set's poll sees what the task did before it.
    queued: AtomicBool,
}

impl ArcWake for EntryWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        if arc_self.queued.swap(true, AcqRel) {
            return;
        }
        let waiter = {
            let mut st = arc_self.notify.lock();
            if st.closed {
                return;
            }
            st.ready.push_back(arc_self.clone());
            st.waiter.take()
        };
        // Called by async-task where a panic aborts: contain the waiter's.
        if let Some(w) = waiter {
            if let Err(p) = contain(move || w.wake()) {
                drop_payload(p);
            }
        }
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        JoinSet {
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
            notify: Arc::new(Notify::default()),
        }
    }

    /// Tasks in the set: spawned and not yet returned by `join_next` (or
    /// `try_join_next`), finished or not.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        let index = self.free.pop().unwrap_or_else(|| {
            self.entries.push(None);
            self.entries.len() - 1
        });
        let waker = Arc::new(EntryWaker {
            notify: self.notify.clone(),
            index,
            queued: AtomicBool::new(true),
        });
        self.notify.lock().ready.push_back(waker.clone());
        self.entries[index] = Some(Entry { handle, waker });
        self.len += 1;
        abort
    }

    /// Aborts every task in the set. They stay in it: `join_next` returns
    /// each one (cancelled, or its output if it finished first).
    pub fn abort_all(&mut self) {
        for e in self.entries.iter().flatten() {
            e.handle.abort();
        }
    }

    /// Aborts every task and waits until each one's future has been dropped;
    /// the set is empty afterwards.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Waits for any task of the set to finish and returns its result;
    /// `None` if the set is empty. Cancel safe: a result is only taken out
    /// of the set in the poll that returns it.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// [`join_next`](Self::join_next) with the finished task's id (a
    /// [`JoinError`] carries its own: [`JoinError::id`]). Cancel safe.
    pub async fn join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// Removes every task from the set without aborting it: each runs on
    /// (detached) and its output is dropped when it finishes.
    pub fn detach_all(&mut self) {
        // Dropping a `JoinHandle` detaches its task. The entries' wakers
        // stay registered with their tasks; a late wake-up queues a waker
        // that no slot holds any more, which `poll_entry` skips.
        let entries = std::mem::take(&mut self.entries);
        self.free.clear();
        self.len = 0;
        let ready = std::mem::take(&mut self.notify.lock().ready);
        drop(ready);
        drop(entries);
    }

    /// Returns a finished task's result if one is ready now, without
    /// waiting: `None` if the set is empty or no task has finished.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.try_join_next_with_id()
            .map(|r| r.map(|(_, output)| output))
    }

    /// [`try_join_next`](Self::try_join_next) with the finished task's id
    /// (a [`JoinError`] carries its own: [`JoinError::id`]).
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        let mut budget = self.len + 32;
        while budget > 0 && self.len > 0 {
            budget -= 1;
            let next = self.notify.lock().ready.pop_front()?;
            if let Poll::Ready(r) = self.poll_entry(&next) {
                return Some(r);
            }
        }
        None
    }

    /// Waits for every task and returns their outputs in completion order.
    ///
    /// # Panics
    /// If a task panicked (the panic is resumed here) or was cancelled; the
    /// tasks still in the set are then aborted (the set is dropped).
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        while let Some(res) = self.join_next().await {
            match res {
                Ok(v) => out.push(v),
                Err(e) => match e.try_into_panic() {
                    Ok(p) => std::panic::resume_unwind(p),
                    Err(e) => panic!("JoinSet::join_all: {e}"),
                },
            }
        }
        out
    }

    /// The poll behind [`JoinSet::join_next`]: `Ready(None)` when empty.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_join_next_with_id(cx)
            .map(|r| r.map(|r| r.map(|(_, output)| output)))
    }

    /// The poll behind [`JoinSet::join_next_with_id`]: `Ready(None)` when
    /// empty.
    pub fn poll_join_next_with_id(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Id, T), JoinError>>> {
        if self.len == 0 {
            return Poll::Ready(None);
        }
        // One unit of the cooperative budget per call (entries are polled
        // outside it, with the set's own wakers).
        if numa_rt_reactor::coop::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        // Each pass pops one entry; entries come back only when woken, so
        // this ends. The bound keeps a storm of wake-ups from holding the
        // caller's thread: past it, yield and come back.
        let mut budget = self.len + 32;
        loop {
            if budget == 0 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            budget -= 1;
            let next = {
                let mut st = self.notify.lock();
                match st.ready.pop_front() {
                    Some(next) => next,
                    None => {
                        if st.waiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            return Poll::Pending;
                        }
                        drop(st);
                        // Cloned and swapped outside the lock (user code).
                        let new = cx.waker().clone();
                        let mut st = self.notify.lock();
                        if !st.ready.is_empty() {
                            // Woken meanwhile: go round again.
                            continue;
                        }
                        let old = st.waiter.replace(new);
                        drop(st);
                        drop(old);
                        return Poll::Pending;
                    }
                }
            };
            if let Poll::Ready(r) = self.poll_entry(&next) {
                return Poll::Ready(Some(r));
            }
        }
    }

    /// Polls the entry `next` names, if it is still the one in its slot;
    /// removes it from the set when it is done.
    fn poll_entry(&mut self, next: &Arc<EntryWaker>) -> Poll<Result<(Id, T), JoinError>> {
        let index = next.index;
        let Some(Some(entry)) = self.entries.get_mut(index) else {
            return Poll::Pending;
        };
        if !Arc::ptr_eq(&entry.waker, next) {
            return Poll::Pending; // a removed entry's late wake-up
        }
        // Pairs with the wake's swap: see `EntryWaker::queued`.
        next.queued.swap(false, AcqRel);
        let id = entry.handle.id();
        let waker = futures_task::waker_ref(next);
        match entry.handle.poll_trusted(&waker) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                self.entries[index] = None;
                self.free.push(index);
                self.len -= 1;
                Poll::Ready(r.map(|output| (id, output)))
            }
        }
    }
}

impl<T: 'static> JoinSet<T> {
    /// Spawns a task on the current runtime (see [`spawn`](crate::spawn()))
    /// and adds it to the set.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send,
    {
        self.insert(crate::spawn(future))
    }

    /// Spawns a task on the runtime of `handle` (tokio's `spawn_on`) and
    /// adds it to the set; callable from any thread, inside a runtime or not.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, future: F, handle: &Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send,
    {
        self.insert(handle.spawn(future))
    }

    /// Spawns a task that starts on NUMA `node` (see
    /// [`numa::spawn_on`](crate::numa::spawn_on)) and adds it to the set.
    ///
    /// # Panics
    /// Outside a runtime, or if `node` is not one of the runtime's nodes.
    #[track_caller]
    pub fn spawn_on_node<F>(&mut self, node: impl Into<NodeId>, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send,
    {
        self.insert(crate::numa::spawn_on(node, future))
    }

    /// Runs a blocking closure on the blocking pool of `handle`'s runtime
    /// (tokio's `spawn_blocking_on`) and adds it to the set.
    #[track_caller]
    pub fn spawn_blocking_on<F>(&mut self, f: F, handle: &Handle) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send,
    {
        self.insert(handle.spawn_blocking(f))
    }

    /// Spawns a `!Send` task pinned to this thread (see
    /// [`spawn_local`](crate::spawn_local)) and adds it to the set.
    ///
    /// # Panics
    /// On a thread that is neither a worker nor inside `block_on`.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
    {
        self.insert(crate::spawn_local(future))
    }

    /// Spawns a `!Send` task onto `local_set` (it runs while the set is
    /// driven) and adds it to the set.
    #[track_caller]
    pub fn spawn_local_on<F>(&mut self, future: F, local_set: &super::LocalSet) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
    {
        self.insert(local_set.spawn_local(future))
    }

    /// Runs a blocking closure on the blocking pool (see
    /// [`spawn_blocking`](crate::spawn_blocking)) and adds it to the set.
    /// Aborting it only has an effect before it starts.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send,
    {
        self.insert(crate::spawn_blocking(f))
    }
}

/// Spawns each future on the current runtime (as [`JoinSet::spawn`]).
///
/// # Panics
/// Outside a numa_rt runtime.
impl<T, F> Extend<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[track_caller]
    fn extend<I: IntoIterator<Item = F>>(&mut self, iter: I) {
        for future in iter {
            self.spawn(future);
        }
    }
}

/// Collects futures into a set, spawning each on the current runtime:
/// `let set: JoinSet<_> = urls.map(fetch).collect();`
///
/// # Panics
/// Outside a numa_rt runtime.
impl<T, F> FromIterator<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[track_caller]
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut set = JoinSet::new();
        set.extend(iter);
        set
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

impl<T> Drop for JoinSet<T> {
    /// Aborts every task still in the set.
    fn drop(&mut self) {
        self.abort_all();
        let (ready, waiter) = {
            let mut st = self.notify.lock();
            st.closed = true;
            (std::mem::take(&mut st.ready), st.waiter.take())
        };
        drop(ready);
        drop(waiter);
        // The entries' handles detach here; their futures are dropped by
        // the runtime (the abort), their outputs by `Output`'s destructor.
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len).finish()
    }
}

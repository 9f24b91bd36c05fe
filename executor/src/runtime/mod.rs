//! `Runtime` and `Handle`: starting, entering and stopping a runtime.

use crate::metrics::RuntimeMetrics;
use crate::scheduler::context::{self, EnterGuard};
use crate::scheduler::local::{self, LocalQueue};
use crate::scheduler::Shared;
use crate::task::JoinHandle;
use numa_rt_numa::Topology;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// A numa_rt runtime: `max_procs` processors, their machines (threads),
/// reactors and timers, and a blocking pool.
///
/// Dropping it (or [`Runtime::shutdown_timeout`]) stops every thread and
/// drops every pending task's future.
pub struct Runtime {
    handle: Handle,
    /// Set once shutdown ran, so `Drop` does not run it again.
    shut: bool,
}

// A runtime's state stays consistent when a caller's code panics: user
// code (tasks, hooks, wakers) runs inside `catch_unwind`, and every lock
// is taken poison-tolerant. So a `Runtime` or `Handle` may be used after a
// caught panic, as tokio's (whose are unwind-safe too; `catch_unwind`
// around `rt.block_on(..)` compiles as it does on tokio).
impl std::panic::UnwindSafe for Runtime {}
impl std::panic::RefUnwindSafe for Runtime {}
impl std::panic::UnwindSafe for Handle {}
impl std::panic::RefUnwindSafe for Handle {}

/// A cloneable reference to a runtime, usable from any thread.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

pub use crate::runtime_id::Id;

/// The index of the P the calling thread runs tasks for (tokio's
/// `runtime::worker_index`): `Some(0..max_procs)` inside a task on a
/// worker, `None` on any other thread — one in `block_on`, a blocking-pool
/// thread, a worker inside `block_in_place` (its P has moved on).
///
/// ```
/// let rt = numa_rt_executor::Builder::new().max_procs(2).build().unwrap();
/// let index = rt.block_on(rt.spawn(async { numa_rt_executor::worker_index() }));
/// assert!(matches!(index.unwrap(), Some(0 | 1)));
/// assert_eq!(rt.block_on(async { numa_rt_executor::worker_index() }), None);
/// ```
pub fn worker_index() -> Option<usize> {
    if !context::in_worker() {
        return None;
    }
    context::current_p_of(&context::current()?)
}

/// Returned by [`Handle::try_current`] outside a runtime.
#[derive(Debug)]
pub struct TryCurrentError(());

impl fmt::Display for TryCurrentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not inside a numa_rt runtime: call this from a runtime thread, a task, Runtime::block_on, or after Handle::enter")
    }
}

impl std::error::Error for TryCurrentError {}

impl Runtime {
    // `Runtime::new` (default settings) is in builder/build.rs, with `Builder::build`.

    pub(crate) fn from_handle(handle: Handle) -> Runtime {
        handle.shared.blocking.set_runtime(&handle.shared);
        Runtime {
            handle,
            shut: false,
        }
    }

    /// Runs `future` to completion on the current thread, with this runtime
    /// entered: tasks it spawns run on the runtime's processors, and
    /// `spawn_local` tasks run on this thread while `block_on` runs.
    ///
    /// # Panics
    /// When called from a numa_rt worker thread (inside a task): blocking a
    /// worker would stall its processor and can deadlock the runtime.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
    }

    /// Runs the future `make` builds as a task pinned to one worker (an M
    /// holding a P), waits for it on the current thread, shuts the runtime
    /// down and returns the task's output; a panic in the task resumes here.
    /// With `max_procs(1)` this is tokio's current-thread `block_on`: the
    /// future is polled on the one P, so it never runs at the same time as
    /// the tasks it spawns (`#[numa_rt::test]`'s default,
    /// `flavor = "current_thread"`). [`Runtime::block_on`] instead polls its
    /// future on the calling thread, beside the P's.
    ///
    /// The future is built on the worker, so it need not be `Send`; nor need
    /// its output, which comes back only after shutdown has joined every
    /// thread of the runtime (hence `self` by value).
    ///
    /// ```
    /// let rt = numa_rt_executor::Builder::new().max_procs(1).build().unwrap();
    /// let out = rt.run_on_worker(|| async {
    ///     let rc = std::rc::Rc::new(6); // !Send, across an await
    ///     let seven = numa_rt_executor::spawn(async { 7 }).await.unwrap();
    ///     *rc * seven
    /// });
    /// assert_eq!(out, 42);
    /// ```
    ///
    /// # Panics
    /// When called from a numa_rt worker thread (see [`Runtime::block_on`]);
    /// if the task panics (with its payload); if the runtime shuts down
    /// before the task completes.
    #[track_caller]
    pub fn run_on_worker<M, F>(self, make: M) -> F::Output
    where
        M: FnOnce() -> F + Send + 'static,
        F: Future + 'static,
        F::Output: 'static,
    {
        let task = self.spawn(async move {
            crate::spawn_local(async move { AfterShutdown(make().await) }).await
        });
        let out = self.block_on(task);
        // Joins every thread of the runtime: see `AfterShutdown`.
        drop(self);
        match out {
            Ok(Ok(AfterShutdown(v))) => v,
            Err(e) | Ok(Err(e)) => match e.try_into_panic() {
                Ok(payload) => std::panic::resume_unwind(payload),
                Err(e) => panic!("Runtime::run_on_worker: the task did not complete: {e}"),
            },
        }
    }

    /// Spawns a task on the runtime.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Spawns a task beside another: see [`Handle::spawn_near`].
    #[track_caller]
    pub fn spawn_near<F>(&self, near: &impl crate::task::Near, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn_near(near, future)
    }

    /// Runs a blocking closure on the blocking pool.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// A handle to this runtime.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Enters the runtime on this thread: `numa_rt::spawn` and I/O types work
    /// until the guard drops.
    ///
    /// # Panics
    /// When guards are dropped in another order than the reverse of the
    /// order they were made in (see [`Handle::enter`]).
    pub fn enter(&self) -> EnterGuard {
        self.handle.enter()
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        self.handle.metrics()
    }

    /// The live tasks: see [`Handle::dump`].
    pub fn dump(&self) -> crate::task::TaskDump {
        self.handle.dump()
    }

    /// Stops the runtime, waiting at most `timeout` for threads still busy
    /// (a task stuck in a long poll, a blocking closure). Threads still
    /// running after it are left to finish on their own.
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        // A timeout past what `Instant` can hold (`Duration::MAX`) waits
        // as long as it takes, as `shutdown` without one.
        self.shutdown(Instant::now().checked_add(timeout));
    }

    /// Stops the runtime without waiting for busy threads.
    pub fn shutdown_background(self) {
        self.shutdown_timeout(Duration::ZERO)
    }

    fn shutdown(&mut self, deadline: Option<Instant>) {
        if self.shut {
            return;
        }
        self.shut = true;
        let shared = &self.handle.shared;
        // Dropped from one of our own workers: it cannot wait for itself.
        let me = usize::from(context::current_node_of(shared).is_some());
        {
            // The futures dropped here see their runtime as tokio's do
            // (`Handle::try_current` in a destructor): entered from the
            // first wake (`begin_shutdown` drops every idle task on this
            // thread) to the drain, left before the side tokio runtime
            // stops. (Not when the runtime drops with its thread's locals.)
            let _entered = context::try_enter(shared.clone());
            shared.begin_shutdown();
            // Timers and I/O drop their wakers: idle tasks are scheduled
            // once and, the runtime being shut down, dropped.
            shared.reactor.shutdown();
            shared.machines.wait_all(deadline, me);
            shared.blocking.shutdown(deadline);
            shared.drain_all();
        }
        // Last: tokio resources inside the futures just dropped have
        // deregistered from a driver still alive.
        shared.stop_tokio(deadline);
    }
}

/// The output of [`Runtime::run_on_worker`]'s task, carried from the worker
/// to the caller's thread although it may not be `Send`.
struct AfterShutdown<T>(T);

// SAFETY: `run_on_worker` moves the value out of this wrapper only after it
// has dropped the runtime, whose shutdown (no deadline) has dropped every
// task, pinned or not, and waited until every M has left its scheduling
// loop and the blocking pool has stopped: no code of the runtime runs any
// more that could touch state the value shares (an `Rc` clone held by
// another task) at the same time as the caller. From the worker to the
// caller it moves through the JoinHandles' own synchronisation (happens-
// before). The one gap: a value sharing an `Rc` with a *thread-local* of a
// worker, whose destructor may run as that thread exits; the task would
// have to return a clone of a worker's thread-local, which tests and
// `main`s do not do.
unsafe impl<T> Send for AfterShutdown<T> {}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("procs", &self.handle.shared.nprocs())
            .finish_non_exhaustive()
    }
}

/// tokio's runtime kinds, as [`Handle::runtime_flavor`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuntimeFlavor {
    /// One processor: tasks take turns, never in parallel.
    CurrentThread,
    /// Several processors (or a count that follows the CPU quota).
    MultiThread,
}

impl Handle {
    /// The runtime entered on this thread.
    ///
    /// # Panics
    /// Outside a runtime; see [`Handle::try_current`].
    #[track_caller]
    pub fn current() -> Handle {
        match Handle::try_current() {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// The runtime entered on this thread, if any.
    pub fn try_current() -> Result<Handle, TryCurrentError> {
        context::current()
            .map(|shared| Handle { shared })
            .ok_or(TryCurrentError(()))
    }

    /// Spawns a task; it may run on any processor.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(future, None)
    }

    /// Spawns a task beside the task `near` is a handle of: in its batch
    /// (the tasks the scheduler keeps on one P and steals together; see
    /// docs/architecture.md, "Batches"), queued on the P that polled it
    /// last. For code that knows two tasks will talk before they do: the
    /// scheduler learns batches from wake-ups by itself, so nothing is
    /// needed for tasks that already talk. When `near`'s task has finished
    /// or never ran, this is [`Handle::spawn`].
    ///
    /// ```
    /// let rt = numa_rt_executor::Builder::new().max_procs(2).build().unwrap();
    /// rt.block_on(async {
    ///     let (tx, rx) = std::sync::mpsc::channel::<u32>();
    ///     let consumer = numa_rt_executor::spawn(async move { rx.recv().unwrap() });
    ///     let producer = numa_rt_executor::task::spawn_near(&consumer, async move {
    ///         tx.send(7).unwrap();
    ///     });
    ///     producer.await.unwrap();
    ///     assert_eq!(consumer.await.unwrap(), 7);
    /// });
    /// ```
    #[track_caller]
    pub fn spawn_near<F>(&self, near: &impl crate::task::Near, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn_near(future, near.__anchor())
    }

    /// Runs a blocking closure on the blocking pool.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.blocking.spawn(f)
    }

    /// Enters the runtime on this thread until the guard drops; guards
    /// nest, the last one made restoring what the one before entered.
    ///
    /// # Panics
    /// When a guard is dropped while a guard made after it on the same
    /// thread still lives (tokio's rule too): the runtime it would restore
    /// is no longer the one entered before it.
    pub fn enter(&self) -> EnterGuard {
        context::enter(self.shared.clone())
    }

    /// Which of tokio's runtime kinds this runtime behaves as:
    /// [`RuntimeFlavor::CurrentThread`] when it has one P, fixed
    /// (`Builder::new_current_thread`, `max_procs(1)`, `#[numa_rt::test]`'s
    /// default), so its tasks never run in parallel; otherwise
    /// [`RuntimeFlavor::MultiThread`]. Code that calls
    /// [`block_in_place`](crate::block_in_place) only where it may can ask
    /// this, as it asks tokio.
    ///
    /// ```
    /// use numa_rt_executor::{Builder, RuntimeFlavor};
    /// let rt = Builder::new_current_thread().build().unwrap();
    /// assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
    /// let rt = Builder::new_multi_thread().worker_threads(2).build().unwrap();
    /// assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
    /// ```
    pub fn runtime_flavor(&self) -> RuntimeFlavor {
        self.shared.config.flavor
    }

    /// This runtime's [`Id`]: equal for every handle of one runtime,
    /// different from every other live runtime's (tokio's `Handle::id`).
    pub fn id(&self) -> Id {
        self.shared.config.id
    }

    /// The name given with [`Builder::name`](crate::Builder::name), if any
    /// (tokio's `Handle::name`).
    pub fn name(&self) -> Option<&str> {
        self.shared.config.name.as_deref()
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        RuntimeMetrics {
            shared: self.shared.clone(),
        }
    }

    /// The live tasks (`Send` and pinned): id, spawn location, state
    /// (running on which P, scheduled, idle), time since the last poll.
    /// Read without stopping the runtime (a per-task snapshot; see
    /// [`TaskDump`](crate::task::TaskDump)). Its `Display` prints one line
    /// per task. A `Send` task still queued since its spawn, never polled,
    /// is counted but not listed.
    ///
    /// ```
    /// let rt = numa_rt_executor::Runtime::new().unwrap();
    /// let (tx, rx) = futures::channel::oneshot::channel::<()>();
    /// let (polled_tx, polled) = futures::channel::oneshot::channel::<()>();
    /// let h = rt.spawn(async move {
    ///     polled_tx.send(()).unwrap();
    ///     rx.await.ok()
    /// });
    /// rt.block_on(polled).unwrap();
    /// // Listed once its first poll has returned `Pending`.
    /// let dump = loop {
    ///     let dump = rt.dump();
    ///     if dump.tasks().iter().any(|t| t.id == h.id()) {
    ///         break dump;
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// let t = dump.tasks().iter().find(|t| t.id == h.id()).unwrap();
    /// assert_eq!(t.location.file(), file!());
    /// println!("{dump}");
    /// drop(tx);
    /// ```
    pub fn dump(&self) -> crate::task::TaskDump {
        crate::sysmon::dump(&self.shared)
    }

    /// The topology the runtime schedules on (discovered or given).
    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// See [`Runtime::block_on`]. Works from any thread that is not a
    /// runtime worker.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        if context::in_worker() {
            panic!(
                "Cannot start a runtime from within a runtime. This happens because a function \
                 (like `block_on`) attempted to block the current thread while the thread is \
                 being used to drive asynchronous tasks. If you are in an async function, use \
                 `.await` on the future instead of blocking on it. (numa_rt: \
                 Cannot block_on from inside a numa_rt worker thread: it would block the worker \
                 and can deadlock the runtime. Use `.await` in async code, or move the blocking \
                 part to numa_rt::spawn_blocking / numa_rt::block_in_place.)"
            );
        }
        // Not "a pinned queue is installed": `LocalSet::enter` and
        // `LocalRuntime::enter` install one outside any `block_on`.
        let Some(_in_block_on) = context::enter_block_on() else {
            // tokio's words first (code and tests match on them), then ours.
            panic!(
                "Cannot start a runtime from within a runtime. This happens because a function \
                 (like `block_on`) attempted to block the current thread while the thread is \
                 being used to drive asynchronous tasks. If you are in an async function, use \
                 `.await` on the future instead of blocking on it. (numa_rt: Cannot block_on \
                 inside another block_on on the same thread.)"
            );
        };
        let _enter = self.enter();
        // Inside the borrow of `self`, so `self.shared` outlives the guard.
        let _lent = context::lend_block_on(&self.shared);
        // The side tokio runtime's context for the duration (it nests
        // inside any context this thread has: tokio's guards are left in
        // reverse order, and this one drops when block_on returns).
        let _tokio = crate::scheduler::thread_life::enter_tokio(&self.shared);
        let notified = Arc::new(AtomicBool::new(true));
        let local = LocalQueue::for_block_on(notified.clone());
        self.shared.register_local(&local.tasks);
        let _local = context::set_local_queue(local.clone());
        let waker = Waker::from(Arc::new(ThreadWaker {
            thread: std::thread::current(),
            notified: notified.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        // Seen by sysmon's deadlock diagnostic (`crate::sysmon`).
        let block_ons = &self.shared.block_ons;
        struct Leave<'a>(&'a crate::scheduler::BlockOns, usize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.leave(self.1);
            }
        }
        let key = block_ons.enter();
        let _leave = Leave(block_ons, key);
        // Paused time's auto-advance must not run while this block_on has
        // been woken but not yet polled (see the reactor's `driver::paused`).
        let _registered = self.shared.reactor.register_block_on(notified.clone());
        let out = loop {
            // Acquire pairs with the Release store of whoever woke us.
            if notified.swap(false, Acquire) {
                block_ons.polls.fetch_add(1, Relaxed);
                if let Poll::Ready(v) = crate::task::enter_block_on(&waker, || {
                    numa_rt_reactor::coop::budget(|| future.as_mut().poll(&mut cx))
                }) {
                    break v;
                }
            }
            // Pinned tasks of this block_on: the ones queued now, then the
            // main future gets its turn again.
            let mut ran = false;
            for _ in 0..local.len() {
                match local.pop() {
                    Some(t) => {
                        t.metadata()
                            .note_polled(crate::task::epoch_ms(Instant::now()));
                        numa_rt_reactor::coop::budget(|| t.run());
                        ran = true;
                    }
                    None => break,
                }
            }
            // Acquire pairs with the wakers' Release store; a wake after this
            // check unparks the thread, so park returns at once.
            if !ran && !notified.load(Acquire) && local.is_empty() {
                block_ons.parked.fetch_add(1, Relaxed);
                // Paused time: if this thread is the last to go idle, it
                // unparks the M that moves the clock to the next deadline
                // (only M's advance: reactor `driver/paused.rs`). A timer of
                // its own future sets `notified` and unparks this thread.
                self.shared.reactor.auto_advance_parking();
                if self.shared.config.deadlock != crate::DeadlockMode::Off
                    || self.shared.reactor.is_clock_paused()
                {
                    // A monitor asleep since the runtime went idle must
                    // look again: this park may complete a deadlock, or
                    // let a paused clock auto-advance.
                    self.shared.reactor.kick_monitor();
                }
                std::thread::park();
                block_ons.parked.fetch_sub(1, Relaxed);
                if let Some(msg) = block_ons.failure(key) {
                    panic!("{msg}");
                }
            }
        };
        local.close_and_drain();
        out
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("id", &self.id())
            .field("procs", &self.shared.nprocs())
            .finish_non_exhaustive()
    }
}

struct ThreadWaker {
    thread: std::thread::Thread,
    notified: Arc<AtomicBool>,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // Release pairs with block_on's swap(Acquire).
        self.notified.store(true, Release);
        self.thread.unpark();
    }
}

impl futures_task::Spawn for Handle {
    fn spawn_obj(
        &self,
        future: futures_task::FutureObj<'static, ()>,
    ) -> Result<(), futures_task::SpawnError> {
        if self.shared.is_shutdown() {
            return Err(futures_task::SpawnError::shutdown());
        }
        drop(self.spawn(future));
        Ok(())
    }

    fn status(&self) -> Result<(), futures_task::SpawnError> {
        if self.shared.is_shutdown() {
            Err(futures_task::SpawnError::shutdown())
        } else {
            Ok(())
        }
    }
}

impl futures_task::LocalSpawn for Handle {
    /// Pins the future to the calling thread (see `spawn_local`); fails when
    /// the thread is neither a worker nor inside `block_on`.
    fn spawn_local_obj(
        &self,
        future: futures_task::LocalFutureObj<'static, ()>,
    ) -> Result<(), futures_task::SpawnError> {
        match context::local_queue() {
            Some(q) if !self.shared.is_shutdown() => {
                drop(local::spawn_local(&q, future));
                Ok(())
            }
            _ => Err(futures_task::SpawnError::shutdown()),
        }
    }
}

//! `Runtime` and `Handle`: starting, entering and stopping a runtime.

use crate::metrics::RuntimeMetrics;
use crate::scheduler::context::{self, EnterGuard};
use crate::scheduler::Shared;
use crate::task::JoinHandle;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod block_on;
mod handle;

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

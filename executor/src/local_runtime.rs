//! `LocalRuntime`: tokio's runtime whose `block_on` thread also runs
//! `!Send` tasks, as a one-P runtime and a `LocalSet`.
//!
//! tokio's local runtime is a current-thread runtime whose thread accepts
//! `spawn_local` as well as `spawn`. numa_rt builds it from parts it has:
//! the runtime the builder makes (one P with `new_current_thread`) runs the
//! `Send` tasks on its worker, and a [`LocalSet`] owned by the runtime
//! holds the `!Send` ones, which run on the thread that calls
//! [`LocalRuntime::block_on`] while it runs — the thread that made the
//! runtime, since a `LocalRuntime` is `!Send`.

use crate::task::{JoinHandle, LocalSet};
use crate::{EnterGuard, Handle, Runtime, RuntimeMetrics};
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// Options for [`Builder::build_local`](crate::Builder::build_local)
/// (tokio's; none yet).
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct LocalOptions {}

/// A runtime whose calling thread runs `!Send` tasks too (tokio's
/// `runtime::LocalRuntime`): [`LocalRuntime::spawn_local`], or
/// [`spawn_local`](crate::spawn_local) inside [`LocalRuntime::block_on`]
/// or with [`LocalRuntime::enter`]'s guard held.
///
/// ```
/// use numa_rt_executor::{Builder, LocalOptions};
/// use std::rc::Rc;
///
/// let rt = Builder::new_current_thread().build_local(LocalOptions::default()).unwrap();
/// let shared = Rc::new(40); // !Send
/// let s = shared.clone();
/// let early = rt.spawn_local(async move { *s + 1 });
/// let out = rt.block_on(async move {
///     let later = numa_rt_executor::spawn_local(async move { *shared + 2 });
///     early.await.unwrap() + later.await.unwrap()
/// });
/// assert_eq!(out, 83);
/// ```
pub struct LocalRuntime {
    // Declared first, dropped first: the set's `!Send` futures go on this
    // thread while the runtime they may use (timers, sockets) still runs.
    set: LocalSet,
    rt: Runtime,
}

impl LocalRuntime {
    /// A local runtime with one P and default settings.
    pub fn new() -> std::io::Result<LocalRuntime> {
        crate::Builder::new_current_thread().build_local(LocalOptions::default())
    }

    pub(crate) fn from_runtime(rt: Runtime) -> LocalRuntime {
        LocalRuntime {
            set: LocalSet::new(),
            rt,
        }
    }

    /// The runtime's handle (for `Send` tasks, from any thread).
    pub fn handle(&self) -> &Handle {
        self.rt.handle()
    }

    /// Spawns a `Send` task on the runtime's P.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.rt.spawn(future)
    }

    /// Spawns a `!Send` task; it runs on this thread while
    /// [`LocalRuntime::block_on`] runs.
    #[track_caller]
    pub fn spawn_local<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.set.spawn_local(future)
    }

    /// Runs a blocking closure on the runtime's blocking pool.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.rt.handle().spawn_blocking(f)
    }

    /// Runs `future` to completion on this thread, running the runtime's
    /// `!Send` tasks meanwhile.
    ///
    /// # Panics
    /// As [`Runtime::block_on`].
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.set.block_on(&self.rt, future)
    }

    /// Enters the runtime and its set of `!Send` tasks until the guard
    /// drops: `spawn` and `spawn_local` work on this thread.
    pub fn enter(&self) -> EnterGuard {
        self.rt.enter().with_local(self.set.queue().clone())
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        self.rt.metrics()
    }

    /// Drops the `!Send` tasks, then stops the runtime, waiting at most
    /// `timeout` for busy threads (see [`Runtime::shutdown_timeout`]).
    pub fn shutdown_timeout(self, timeout: Duration) {
        let LocalRuntime { set, rt } = self;
        drop(set);
        rt.shutdown_timeout(timeout);
    }

    /// [`LocalRuntime::shutdown_timeout`] without waiting.
    pub fn shutdown_background(self) {
        self.shutdown_timeout(Duration::ZERO)
    }
}

impl fmt::Debug for LocalRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalRuntime")
            .field("handle", self.rt.handle())
            .field("set", &self.set)
            .finish()
    }
}

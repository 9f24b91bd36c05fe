//! `Handle`: reaching a runtime from anywhere (spawning, entering, its
//! metrics, dump and topology) and the futures-task spawner traits.

use super::{Handle, Id, RuntimeFlavor, TryCurrentError};
use crate::metrics::RuntimeMetrics;
use crate::scheduler::context::{self, EnterGuard};
use crate::scheduler::local;
use crate::task::JoinHandle;
use numa_rt_numa::Topology;
use std::fmt;
use std::future::Future;

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
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("id", &self.id())
            .field("procs", &self.shared.nprocs())
            .finish_non_exhaustive()
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

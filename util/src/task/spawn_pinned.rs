//! [`LocalPoolHandle`]: a pool of pinned workers for `!Send` futures.
//!
//! Each worker of the pool is a one-processor numa_rt runtime on threads of
//! its own. Its M runs a pinned task (`spawn_local`, via
//! [`Runtime::run_on_worker`](numa_rt::Runtime::run_on_worker)) that
//! receives jobs; each job's `!Send` future is spawned with
//! [`numa_rt::spawn_local`] from there, so it is pinned to that M and never
//! moves. The caller gets the `JoinHandle` of a `Send` forwarding task on
//! the worker's runtime, which waits for the pinned task's output: aborting
//! it aborts the pinned task, a panic in the pinned task (or in the closure
//! that makes its future) comes out of it as the task's panic.
//!
//! As tokio's, the pool works from any thread (it needs no runtime of the
//! caller's), and timers, sockets and spawns inside a pinned future belong
//! to its worker's runtime. Dropping the last handle ends the workers:
//! pinned tasks still running are then cancelled.

use numa_rt::runtime::{Builder, Handle};
use numa_rt::task::JoinHandle;
use numa_rt::DeadlockMode;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

use super::AbortOnDropHandle;

/// A pool of worker threads on which `!Send` futures run pinned, each
/// future on one thread for its whole life.
///
/// Clones share the pool; it ends when the last clone is dropped.
///
/// ```
/// use numa_rt_util::task::LocalPoolHandle;
/// use std::rc::Rc;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// let pool = LocalPoolHandle::new(2);
/// let out = pool
///     .spawn_pinned(|| {
///         let data = Rc::new("hello"); // !Send, kept across an await
///         async move {
///             numa_rt::task::yield_now().await;
///             data.to_uppercase()
///         }
///     })
///     .await
///     .unwrap();
/// assert_eq!(out, "HELLO");
/// # }
/// ```
#[derive(Clone)]
pub struct LocalPoolHandle {
    pool: Arc<LocalPool>,
}

struct LocalPool {
    workers: Box<[Worker]>,
}

/// A job: run on the worker's pinned loop, it spawns the pinned task.
type Job = Box<dyn FnOnce() + Send + 'static>;

struct Worker {
    /// The worker's runtime, where the forwarding tasks run.
    handle: Handle,
    /// To the pinned loop; dropping the last sender ends the worker.
    jobs: mpsc::UnboundedSender<Job>,
    /// Tasks given to this worker and not yet ended (their forwarders).
    load: Arc<AtomicUsize>,
}

impl LocalPoolHandle {
    /// A pool of `pool_size` workers, started now.
    ///
    /// # Panics
    /// If `pool_size` is 0, or a worker's runtime cannot be built.
    #[track_caller]
    pub fn new(pool_size: usize) -> LocalPoolHandle {
        assert!(pool_size > 0);
        let workers = (0..pool_size).map(Worker::start).collect();
        LocalPoolHandle {
            pool: Arc::new(LocalPool { workers }),
        }
    }

    /// The number of workers (threads that run pinned tasks).
    pub fn num_threads(&self) -> usize {
        self.pool.workers.len()
    }

    /// Each worker's load: the tasks given to it that have not ended yet.
    pub fn get_task_loads_for_each_worker(&self) -> Vec<usize> {
        self.pool
            .workers
            .iter()
            // Relaxed: a snapshot for balancing and observing only.
            .map(|w| w.load.load(Ordering::Relaxed))
            .collect()
    }

    /// Runs the future `create_task` makes, pinned to the least loaded
    /// worker. `create_task` runs on that worker (so the future need not be
    /// `Send`); a panic in it or in the future is the task's panic.
    ///
    /// The returned handle detaches on drop, as any `JoinHandle`: the task
    /// runs on. Aborting it aborts the pinned task.
    #[track_caller]
    pub fn spawn_pinned<F, Fut>(&self, create_task: F) -> JoinHandle<Fut::Output>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let worker = self.pool.least_loaded();
        worker.spawn(create_task)
    }

    /// [`spawn_pinned`](Self::spawn_pinned) on worker `idx` (`0..num_threads()`).
    ///
    /// # Panics
    /// If `idx` is out of range.
    #[track_caller]
    pub fn spawn_pinned_by_idx<F, Fut>(&self, create_task: F, idx: usize) -> JoinHandle<Fut::Output>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let n = self.pool.workers.len();
        let Some(worker) = self.pool.workers.get(idx) else {
            panic!("spawn_pinned_by_idx: worker {idx} of a pool of {n}")
        };
        // Relaxed: the count only balances; the guard undoes it.
        worker.load.fetch_add(1, Ordering::Relaxed);
        worker.spawn(create_task)
    }
}

impl fmt::Debug for LocalPoolHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalPoolHandle")
            .field("num_threads", &self.num_threads())
            .field("loads", &self.get_task_loads_for_each_worker())
            .finish()
    }
}

impl LocalPool {
    /// The worker with the fewest tasks, with its count raised by one.
    fn least_loaded(&self) -> &Worker {
        loop {
            let (worker, load) = self
                .workers
                .iter()
                // Relaxed: see `get_task_loads_for_each_worker`.
                .map(|w| (w, w.load.load(Ordering::Relaxed)))
                .min_by_key(|&(_, load)| load)
                .expect("a pool has at least one worker");
            // Relaxed: the count orders nothing; the exchange only makes
            // two concurrent spawns see each other's choice.
            if worker
                .load
                .compare_exchange(load, load + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return worker;
            }
        }
    }
}

/// Lowers a worker's load when the task ends (its forwarder is dropped).
struct LoadGuard(Arc<AtomicUsize>);

impl Drop for LoadGuard {
    fn drop(&mut self) {
        // Relaxed: see `get_task_loads_for_each_worker`.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Worker {
    /// Starts worker `index`: a thread that builds a one-P runtime and runs
    /// the pinned job loop on its M until every sender is gone.
    #[track_caller]
    fn start(index: usize) -> Worker {
        let (jobs, mut inbox) = mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let load = Arc::new(AtomicUsize::new(0));
        let loop_load = load.clone();
        std::thread::Builder::new()
            .name(format!("numa_rt_util-pool-{index}"))
            .spawn(move || {
                let rt = Builder::new_current_thread()
                    .thread_name(format!("numa_rt_util-pinned-{index}"))
                    // Its tasks wait on the pool's callers, which it cannot see.
                    .deadlock(DeadlockMode::Off)
                    .build();
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(rt.handle().clone()));
                drop(ready_tx);
                rt.run_on_worker(move || async move {
                    while let Some(job) = inbox.recv().await {
                        job();
                    }
                    // The pool is gone. Let tasks that have finished hand
                    // their outputs to their forwarders before the runtime
                    // (and every task still running) is dropped.
                    loop {
                        // Relaxed: see `get_task_loads_for_each_worker`.
                        let before = loop_load.load(Ordering::Relaxed);
                        numa_rt::task::yield_now().await;
                        if before == 0 || loop_load.load(Ordering::Relaxed) == before {
                            break;
                        }
                    }
                });
            })
            .expect("LocalPoolHandle: spawning a worker thread");
        let handle = ready_rx
            .recv()
            .expect("LocalPoolHandle: the worker thread ended before starting its runtime")
            .unwrap_or_else(|e| panic!("LocalPoolHandle: building a worker's runtime: {e}"));
        Worker { handle, jobs, load }
    }

    /// Sends the job and spawns its forwarder (the load is already raised).
    #[track_caller]
    fn spawn<F, Fut>(&self, create_task: F) -> JoinHandle<Fut::Output>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let guard = LoadGuard(self.load.clone());
        let jobs = self.jobs.clone();
        self.handle.spawn(async move {
            let _guard = guard;
            let (tx, rx) = oneshot::channel();
            let job: Job = Box::new(move || {
                // On the worker's M: the task is pinned there. The closure
                // runs inside the task, so its panic is the task's.
                let pinned = numa_rt::spawn_local(async move { create_task().await });
                if let Err(pinned) = tx.send(pinned) {
                    // The forwarder was aborted meanwhile.
                    pinned.abort();
                }
            });
            if jobs.send(job).is_err() {
                panic!("LocalPoolHandle: the worker has stopped");
            }
            let pinned = match rx.await {
                Ok(pinned) => AbortOnDropHandle::new(pinned),
                Err(_) => panic!("LocalPoolHandle: the worker stopped before running the task"),
            };
            match pinned.await {
                Ok(out) => out,
                Err(e) => match e.try_into_panic() {
                    Ok(payload) => std::panic::resume_unwind(payload),
                    Err(e) => panic!("spawn_pinned task was cancelled: {e}"),
                },
            }
        })
    }
}

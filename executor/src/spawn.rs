//! The free functions: `spawn`, `spawn_local`, `spawn_blocking`.

use crate::runtime::Handle;
use crate::scheduler::{context, local};
use crate::task::JoinHandle;
use std::future::Future;
use std::panic::Location;

#[track_caller]
pub(crate) fn current_handle(what: &str) -> Handle {
    match Handle::try_current() {
        Ok(h) => h,
        Err(_) => no_runtime(what),
    }
}

#[track_caller]
#[cold]
fn no_runtime(what: &str) -> ! {
    panic!(
        "{what} must be called from a numa_rt runtime: inside a task, Runtime::block_on, \
         #[numa_rt::main], or with a Handle entered (Handle::enter)"
    )
}

/// Spawns a task on the current runtime.
///
/// From a worker, the new task goes to the spawning processor's `runnext`
/// slot (it runs next, with warm caches), unless the spawner just accepted a
/// connection: then it goes to the next processor round-robin, so accept
/// loops spread their connections (Vyukov's root-task distribution).
///
/// ```
/// let rt = numa_rt_executor::Builder::new().max_procs(2).build().unwrap();
/// let answer = rt.block_on(async {
///     let handle = numa_rt_executor::spawn(async { 6 * 7 });
///     handle.await.unwrap()
/// });
/// assert_eq!(answer, 42);
/// ```
///
/// # Panics
/// Outside a numa_rt runtime.
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // Through the entered runtime, borrowed (no `Handle` clone per spawn).
    let location = Location::caller();
    match context::with_current(|shared| shared.spawn_at(future, location)) {
        Some(handle) => handle,
        None => no_runtime("numa_rt::spawn"),
    }
}

/// Spawns a task beside another task, on the current runtime: see
/// [`Handle::spawn_near`].
///
/// # Panics
/// Outside a numa_rt runtime.
#[track_caller]
pub fn spawn_near<F>(near: &impl crate::task::Near, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    current_handle("numa_rt::task::spawn_near").spawn_near(near, future)
}

/// Spawns a `!Send` task pinned to the current thread (Go's LockOSThread).
///
/// On a worker it always runs on this M (never stolen); inside
/// `Runtime::block_on` it runs on the calling thread while `block_on` runs,
/// and is dropped when `block_on` returns.
///
/// ```
/// use std::rc::Rc;
///
/// let rt = numa_rt_executor::Runtime::new().unwrap();
/// let n = rt.block_on(async {
///     let shared = Rc::new(5); // !Send: cannot go to `spawn`
///     let local = numa_rt_executor::spawn_local(async move { *shared + 1 });
///     local.await.unwrap()
/// });
/// assert_eq!(n, 6);
/// ```
///
/// # Panics
/// On a thread that is neither a worker nor inside `block_on`.
#[track_caller]
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    match context::local_queue() {
        Some(q) => local::spawn_local(&q, future),
        // tokio's words first (tests and code match on them), then ours.
        None => panic!(
            "`spawn_local` called from outside of a `task::LocalSet` or `runtime::LocalRuntime` \
             (numa_rt: call it from a numa_rt worker thread, inside Runtime::block_on (e.g. \
             #[numa_rt::main]), a LocalSet or a LocalRuntime: the task is pinned to the calling \
             thread, which must be one that runs it)"
        ),
    }
}

/// Runs a blocking closure on the current runtime's blocking pool: threads
/// that hold no processor, so the closure may block (a file read, a lock, a
/// long computation) without holding up other tasks.
///
/// ```
/// let rt = numa_rt_executor::Runtime::new().unwrap();
/// let sum = rt.block_on(async {
///     numa_rt_executor::spawn_blocking(|| (1..=10u64).sum::<u64>()).await.unwrap()
/// });
/// assert_eq!(sum, 55);
/// ```
///
/// # Panics
/// Outside a numa_rt runtime.
#[track_caller]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    current_handle("numa_rt::spawn_blocking").spawn_blocking(f)
}

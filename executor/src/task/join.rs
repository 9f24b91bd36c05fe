//! `JoinHandle` and `JoinError`.

use super::harness::{self, contain, drop_payload, Output};
use super::{AbortHandle, Id, Panic, TaskMeta};
use futures_task::ArcWake;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

type Inner<T> = async_task::FallibleTask<Output<T>, TaskMeta>;

/// The raw parts of one of a task's wakers, and its `TaskMeta`: lets a
/// handle that keeps the task alive wake it (to abort it), read its flags,
/// or clone a waker for an [`AbortHandle`], without holding a waker (and
/// its reference count) of its own.
#[derive(Clone, Copy)]
pub(crate) struct TaskRef {
    data: *const (),
    vtable: &'static RawWakerVTable,
    meta: NonNull<TaskMeta>,
}

// SAFETY: the parts are only used while the task is alive: turned back into
// a `Waker` (Send and Sync), or read as the `TaskMeta` (Sync: an id and an
// atomic word).
unsafe impl Send for TaskRef {}
// SAFETY: as above.
unsafe impl Sync for TaskRef {}

impl TaskRef {
    /// `waker` and `meta` must belong to the same task.
    pub(crate) fn new(waker: &Waker, meta: &TaskMeta) -> TaskRef {
        TaskRef {
            data: waker.data(),
            vtable: waker.vtable(),
            meta: NonNull::from(meta),
        }
    }

    /// The task's metadata.
    ///
    /// # Safety
    /// As for [`TaskRef::with_waker`]; the reference must not outlive that.
    unsafe fn meta(&self) -> &TaskMeta {
        // SAFETY: the header holding the metadata lives as long as the
        // allocation, which the caller keeps alive.
        unsafe { self.meta.as_ref() }
    }

    /// Runs `f` with a waker of the task, borrowed: no reference count is
    /// taken unless `f` clones it.
    ///
    /// # Safety
    /// The task's allocation must be alive for the call: the caller holds
    /// its `Task` handle, a waker or a runnable.
    unsafe fn with_waker<R>(&self, f: impl FnOnce(&Waker) -> R) -> R {
        // SAFETY: the parts come from a waker of this task (`of`), whose
        // vtable functions are valid on `data` while the task is alive (the
        // caller's promise); `ManuallyDrop` keeps us from releasing a
        // reference we never took.
        let waker =
            ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(self.data, self.vtable)) });
        f(&waker)
    }
}

/// An owned permission to await a task's output.
///
/// Awaiting yields `Ok(output)`, or a [`JoinError`] if the task panicked or
/// was aborted (also by runtime shutdown). Dropping the handle detaches the
/// task: it keeps running. [`JoinHandle::abort`] cancels it; awaiting the
/// handle then resolves only after the task's future has been dropped.
///
/// The waker of whoever awaits the handle may panic in `wake`, `clone` or
/// `drop` without taking the runtime down: a handle awaited from anything
/// but a task's own poll (a combinator's waker, `block_on` of another
/// executor) is registered through a forwarding waker (allocated once per
/// handle) that contains such a panic.
pub struct JoinHandle<T> {
    /// `None` once the output (or error) has been returned.
    task: Option<Inner<T>>,
    /// A waker of the task, valid while `task` is `Some`.
    raw: TaskRef,
    id: Id,
    /// The forwarding waker, made on first need (see the type docs).
    forward: Option<Arc<ForwardWaker>>,
}

impl<T> JoinHandle<T> {
    /// `raw` must be of `task`.
    pub(crate) fn new(task: async_task::Task<Output<T>, TaskMeta>, raw: TaskRef) -> Self {
        let id = task.metadata().id;
        JoinHandle {
            task: Some(task.fallible()),
            raw,
            id,
            forward: None,
        }
    }

    /// Cancels the task: its future is dropped at its next poll instead of
    /// being polled (at once if the task is idle, after the poll in progress
    /// if it is running), and awaiting this handle then yields a cancelled
    /// [`JoinError`] — after the drop. No effect on a finished task (its
    /// output is kept), nor on a `spawn_blocking` closure already running.
    pub fn abort(&self) {
        if self.task.is_none() {
            return;
        }
        // SAFETY: `task` keeps the allocation alive.
        let meta = unsafe { self.raw.meta() };
        if meta.set_aborted() {
            // SAFETY: as above.
            unsafe { self.raw.with_waker(Waker::wake_by_ref) };
        }
    }

    /// Runs `f` on the task's metadata while the handle keeps it alive
    /// (`None` once the output was taken).
    pub(crate) fn with_meta<R>(&self, f: impl FnOnce(&TaskMeta) -> R) -> Option<R> {
        self.task.as_ref()?;
        // SAFETY: `task` keeps the allocation alive for the call.
        Some(f(unsafe { self.raw.meta() }))
    }

    /// Whether the task has finished (completed, panicked or been cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// The task's id (the one [`id()`](super::id()) returns inside it).
    pub fn id(&self) -> Id {
        self.id
    }

    /// A handle that can abort the task without owning its output: `Send`,
    /// `Sync` and `Clone`. It keeps the task's allocation (not its future)
    /// alive until dropped.
    pub fn abort_handle(&self) -> AbortHandle {
        if self.task.is_none() {
            return AbortHandle::finished(self.id);
        }
        // SAFETY: `task` keeps the allocation alive; the clone takes a
        // reference of its own, which keeps it alive for the `AbortHandle`.
        let waker = unsafe { self.raw.with_waker(Waker::clone) };
        // SAFETY: as above.
        AbortHandle::new(self.id, waker, unsafe { self.raw.meta() })
    }

    /// Polls with a waker that is known not to panic (a `JoinSet` entry's),
    /// outside the cooperative budget.
    pub(crate) fn poll_trusted(&mut self, waker: &Waker) -> Poll<Result<T, JoinError>> {
        poll_task(&mut self.task, self.id, waker)
    }
}

/// Polls async-task's handle with `waker` (which async-task may wake, clone
/// and drop where a panic aborts); `None` after the result was returned.
fn poll_task<T>(slot: &mut Option<Inner<T>>, id: Id, waker: &Waker) -> Poll<Result<T, JoinError>> {
    let Some(task) = slot.as_mut() else {
        return Poll::Ready(Err(JoinError::cancelled(id)));
    };
    let out = match Pin::new(task).poll(&mut Context::from_waker(waker)) {
        Poll::Pending => return Poll::Pending,
        Poll::Ready(out) => out,
    };
    *slot = None;
    Poll::Ready(match out {
        Some(out) => out.into_result(),
        // Dropped by the runtime (shutdown) before it finished.
        None => Err(JoinError::cancelled(id)),
    })
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// Once it has returned the output, polling again yields a cancelled
    /// error.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.task.is_none() {
            return Poll::Ready(Err(JoinError::cancelled(this.id)));
        }
        // Awaiting a handle is an operation on the cooperative budget.
        if numa_rt_reactor::coop::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        if harness::is_trusted_waker(cx.waker()) {
            // The common case, `handle.await` in a task or in `block_on`:
            // async-task gets the runtime's own waker, which cannot panic.
            return this.poll_trusted(cx.waker());
        }
        let forward = this.forward.get_or_insert_with(Default::default);
        forward.set(cx.waker());
        poll_task(&mut this.task, this.id, &futures_task::waker_ref(forward))
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // A finished task's output is dropped here, by `Output`'s
            // destructor, which contains a panic.
            task.detach();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

/// The awaiter waker a `JoinHandle` gives async-task when the caller's waker
/// is not the runtime's own: async-task calls its awaiter where a panic
/// aborts the process, so the caller's waker is only ever woken and dropped
/// here, inside `catch_unwind`.
#[derive(Default)]
struct ForwardWaker {
    target: Mutex<Option<Waker>>,
}

impl ForwardWaker {
    /// Records the caller's waker. Runs in the caller's poll: a panicking
    /// `clone` unwinds into the caller (not into async-task); the drop of
    /// the waker it replaces is contained like every other.
    fn set(&self, waker: &Waker) {
        let mut target = self.target.lock().unwrap_or_else(|e| e.into_inner());
        if target.as_ref().is_some_and(|t| t.will_wake(waker)) {
            return;
        }
        let old = target.replace(waker.clone());
        drop(target);
        if let Some(old) = old {
            if let Err(p) = contain(move || drop(old)) {
                drop_payload(p);
            }
        }
    }
}

impl ArcWake for ForwardWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        let target = arc_self
            .target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = target {
            // The hook has printed the panic; the awaiter is not woken, as
            // with tokio. The task's completion goes on.
            if let Err(p) = contain(move || w.wake()) {
                drop_payload(p);
            }
        }
    }
}

impl Drop for ForwardWaker {
    fn drop(&mut self) {
        let target = self
            .target
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = target {
            if let Err(p) = contain(move || drop(w)) {
                drop_payload(p);
            }
        }
    }
}

/// Why a task did not produce its output.
///
/// `Send + Sync + 'static` and a [`std::error::Error`], so `handle.await?`
/// works in functions returning `Box<dyn Error + Send + Sync>`,
/// `anyhow::Result` or `std::io::Result`.
pub struct JoinError {
    repr: Repr,
    id: Id,
}

enum Repr {
    Cancelled,
    /// The payload is `Send` but not `Sync`; the mutex makes the error
    /// `Sync`. It is only locked to read a string message (`Display`).
    Panic(Mutex<Panic>),
}

impl JoinError {
    pub(crate) fn cancelled(id: Id) -> Self {
        JoinError {
            repr: Repr::Cancelled,
            id,
        }
    }

    pub(crate) fn panic(id: Id, p: Panic) -> Self {
        JoinError {
            repr: Repr::Panic(Mutex::new(p)),
            id,
        }
    }

    /// The task was aborted, or dropped by runtime shutdown.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked (in a poll, or in its future's destructor when it
    /// completed or was aborted).
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload. Panics if the task was cancelled; see [`JoinError::try_into_panic`].
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` called on a cancelled task's error")
    }

    /// The panic payload, or the error back if the task was cancelled.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(p) => Ok(p.into_inner().unwrap_or_else(|e| e.into_inner())),
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the task that failed.
    pub fn id(&self) -> Id {
        self.id
    }

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, debug: bool) -> fmt::Result {
        let p = match &self.repr {
            // tokio's Debug shapes, which tests and logs match on.
            Repr::Cancelled if debug => return write!(f, "JoinError::Cancelled({:?})", self.id),
            Repr::Cancelled => return write!(f, "task {} was cancelled", self.id),
            Repr::Panic(p) => p.lock().unwrap_or_else(|e| e.into_inner()),
        };
        let msg = p
            .downcast_ref::<&'static str>()
            .copied()
            .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()));
        match (msg, debug) {
            (Some(m), false) => write!(f, "task {} panicked with message {m:?}", self.id),
            (None, false) => write!(f, "task {} panicked", self.id),
            (Some(m), true) => write!(f, "JoinError::Panic({:?}, {m:?}, ...)", self.id),
            (None, true) => write!(f, "JoinError::Panic({:?}, ...)", self.id),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, true)
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for std::io::Error {
    /// An `io::Error` of kind `Other` that keeps the `JoinError` (reach it
    /// with `get_ref`/`into_inner` and a downcast).
    fn from(e: JoinError) -> Self {
        std::io::Error::other(e)
    }
}

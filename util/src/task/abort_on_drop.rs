//! [`AbortOnDropHandle`] and [`AbortOnDrop`]: task handles that abort their
//! task when dropped.

use numa_rt::task::{AbortHandle, JoinError, JoinHandle};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A numa_rt [`JoinHandle`] that aborts its task when dropped (a plain
/// `JoinHandle` detaches it). Await it as the `JoinHandle`.
///
/// ```
/// use numa_rt_util::task::AbortOnDropHandle;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// let (tx, rx) = numa_rt::sync::oneshot::channel::<()>();
/// let handle = AbortOnDropHandle::new(numa_rt::spawn(async move {
///     let _tx = tx; // dropped with the task's future
///     std::future::pending::<()>().await
/// }));
/// drop(handle);
/// assert!(rx.await.is_err()); // the task was aborted: its future dropped
/// # }
/// ```
#[must_use = "dropping an AbortOnDropHandle aborts the task"]
pub struct AbortOnDropHandle<T>(JoinHandle<T>);

impl<T> AbortOnDropHandle<T> {
    /// Takes charge of `handle`'s task.
    pub fn new(handle: JoinHandle<T>) -> Self {
        AbortOnDropHandle(handle)
    }

    /// Aborts the task now ([`JoinHandle::abort`]).
    pub fn abort(&self) {
        self.0.abort()
    }

    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }

    /// An [`AbortHandle`] of the task (which does not abort on drop).
    pub fn abort_handle(&self) -> AbortHandle {
        self.0.abort_handle()
    }

    /// The plain `JoinHandle` back: the task is no longer aborted when the
    /// handle is dropped.
    pub fn detach(self) -> JoinHandle<T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the handle is
        // moved out exactly once (the wrapper's `Drop` does not run).
        unsafe { std::ptr::read(&this.0) }
    }
}

impl<T> Drop for AbortOnDropHandle<T> {
    fn drop(&mut self) {
        self.0.abort()
    }
}

impl<T> std::fmt::Debug for AbortOnDropHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortOnDropHandle")
            .field("id", &self.0.id())
            .finish()
    }
}

impl<T> Future for AbortOnDropHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> AsRef<JoinHandle<T>> for AbortOnDropHandle<T> {
    fn as_ref(&self) -> &JoinHandle<T> {
        &self.0
    }
}

/// An [`AbortHandle`] that aborts its task when dropped.
///
/// ```
/// use numa_rt_util::task::AbortOnDrop;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// let task = numa_rt::spawn(std::future::pending::<()>());
/// drop(AbortOnDrop::new(task.abort_handle()));
/// assert!(task.await.unwrap_err().is_cancelled());
/// # }
/// ```
#[must_use = "dropping an AbortOnDrop aborts the task"]
pub struct AbortOnDrop(AbortHandle);

impl AbortOnDrop {
    /// Takes charge of `handle`'s task.
    pub fn new(handle: AbortHandle) -> Self {
        AbortOnDrop(handle)
    }

    /// Aborts the task now.
    pub fn abort(&self) {
        self.0.abort()
    }

    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }

    /// The plain `AbortHandle` back: the task is no longer aborted on drop.
    pub fn detach(self) -> AbortHandle {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: as in `AbortOnDropHandle::detach`: moved out once, never
        // dropped in place.
        unsafe { std::ptr::read(&this.0) }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort()
    }
}

impl std::fmt::Debug for AbortOnDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortOnDrop")
            .field("id", &self.0.id())
            .finish()
    }
}
